"""Stream reads that outlive a broker restart, and streams named by a pattern, without a broker
(make test): the back-off and what is retried (`xroute.streams.reconnect`), a node that never
comes back (`StreamUnreachable`, naming the stream and the node), the pattern's pure parts
(`xroute.streams.names`), and a streaming reader that re-lists its streams each micro-batch
(a new stream from offset 0, a vanished one a typed error). The broker itself:
tests/conformance/test_rabbitmq_stream.py."""

from __future__ import annotations

import socket

import pytest

from xroute.core.errors import (
    ManagementAuthFailed,
    ManagementUnavailable,
    StreamDisconnected,
    StreamNotFound,
    StreamTruncated,
    StreamUnreachable,
    StreamURIError,
    StreamVanished,
)
from xroute.spark.rabbitmq_stream import SourceOptions, StreamRange, StreamReader
from xroute.streams import names, reconnect
from xroute.streams.uri import parse_stream_uri


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------- reconnect


def test_delays_double_up_to_a_ceiling():
    pauses = reconnect.delays(0.25, 2.0)
    assert [next(pauses) for _ in range(6)] == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]


@pytest.mark.parametrize("error, transient", [
    (ConnectionRefusedError(111, "refused"), True),
    (StreamDisconnected("lost"), True),
    (TimeoutError(), True),
    (ManagementUnavailable("down"), True),
    (ManagementAuthFailed("401"), False),
    (StreamNotFound("no such stream"), False),
    (StreamTruncated("s", 0, 5), False),
    (ValueError("bad"), False),
])
def test_what_is_worth_retrying(error, transient):
    assert reconnect.is_transient(error) is transient


def test_rstreams_not_yet_errors_are_retried():
    from rstream import exceptions

    assert reconnect.is_transient(exceptions.StreamNotAvailable(""))
    assert reconnect.is_transient(exceptions.LeaderNotAvailable(""))
    assert not reconnect.is_transient(exceptions.AuthenticationFailure(""))


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_retrying_comes_back_when_the_node_does():
    clock = _Clock()
    failures = iter([ConnectionResetError(), StreamDisconnected("lost")])

    def attempt() -> str:
        error = next(failures, None)
        if error is not None:
            raise error
        return "read"

    assert reconnect.retrying(attempt, timeout_s=60, what="w", endpoint="e",
                              sleep=clock.sleep, clock=lambda: clock.now) == "read"
    assert clock.slept == [0.25, 0.5]


def test_retrying_gives_up_after_the_timeout_naming_stream_and_node():
    clock = _Clock()

    def attempt() -> None:
        raise ConnectionRefusedError(111, "Connect call failed")

    with pytest.raises(StreamUnreachable) as failure:
        reconnect.retrying(attempt, timeout_s=10, what="reading stream 'orders' offsets 0..9",
                           endpoint="rabbitmq-stream://guest@h:5552/%2F", stream="orders",
                           sleep=clock.sleep, clock=lambda: clock.now)
    message = str(failure.value)
    assert message.startswith("reading stream 'orders' offsets 0..9: the node at "
                              "rabbitmq-stream://guest@h:5552/%2F did not answer for 10 s")
    assert "Connect call failed" in message and "reconnectTimeout" in message
    assert failure.value.stream == "orders"
    assert failure.value.endpoint == "rabbitmq-stream://guest@h:5552/%2F"
    assert sum(clock.slept) <= 10 and len(clock.slept) >= 4


def test_retrying_raises_a_lasting_error_at_once_and_zero_means_one_try():
    calls = []

    def missing() -> None:
        calls.append(1)
        raise StreamNotFound("stream 'x' does not exist", "x")

    with pytest.raises(StreamNotFound):
        reconnect.retrying(missing, timeout_s=60, what="w", endpoint="e", sleep=pytest.fail)
    assert len(calls) == 1

    def away() -> None:
        raise StreamDisconnected("cannot open a stream connection to X")

    with pytest.raises(StreamDisconnected, match="cannot open"):
        reconnect.retrying(away, timeout_s=0, what="w", endpoint="e", sleep=pytest.fail)


def test_a_node_that_never_answers_ends_in_stream_unreachable(closed_port):
    from xroute.streams import client

    endpoint = parse_stream_uri(f"rabbitmq-stream://guest@127.0.0.1:{closed_port}/%2F?stream=s",
                                "guest")
    with pytest.raises(StreamUnreachable) as failure:
        client.tails(endpoint, ["s"], reconnect_s=0.6)
    assert f"127.0.0.1:{closed_port}" in str(failure.value) and "'s'" in str(failure.value)
    with pytest.raises(StreamUnreachable, match=r"reading stream 's' offsets 0\.\.9"):
        list(client.read_range(endpoint, "s", 0, 10, reconnect_s=0.3))


def test_reconnect_timeout_from_the_option_or_the_uri():
    base = {"path": "rabbitmq-stream://u@h/%2F?stream=a&reconnect=5", "password": "p"}
    assert SourceOptions.parse(base).reconnect_s == 5.0
    assert SourceOptions.parse({**base, "reconnectTimeout": "0"}).reconnect_s == 0.0
    assert SourceOptions.parse({"path": "rabbitmq-stream://u@h/%2F?stream=a",
                                "password": "p"}).reconnect_s == 60.0
    with pytest.raises(StreamURIError, match="reconnectTimeout must be seconds"):
        SourceOptions.parse({**base, "reconnectTimeout": "soon"})
    with pytest.raises(StreamURIError, match="reconnect=-1"):
        parse_stream_uri("rabbitmq-stream://u@h/%2F?stream=a&reconnect=-1", "p")


# ---------------------------------------------------------------------- patterns


def test_a_pattern_matches_whole_names_sorted():
    pattern = names.compile_pattern("orders-.*")
    found = names.matching(pattern, ["orders-2", "orders-1", "xorders-1", "orders", "orders-1"])
    assert found == ("orders-1", "orders-2")
    assert names.matching(names.compile_pattern("a|b"), ["a", "ab", "b"]) == ("a", "b")
    with pytest.raises(StreamURIError, match="not a regular expression"):
        names.compile_pattern("orders-(")


def test_only_stream_queues_are_streams():
    queues = [{"name": "orders-1", "type": "stream"}, {"name": "orders-q", "type": "classic"},
              {"name": "orders-2", "type": "stream"}, {"name": "qq", "type": "quorum"}]
    assert names.stream_names(queues) == ["orders-1", "orders-2"]
    with pytest.raises(ManagementUnavailable, match="not a list of queues"):
        names.stream_names({"error": "x"})


def test_where_the_management_api_is():
    endpoint = parse_stream_uri("rabbitmq-stream://reader@broker:5552/prod?pattern=a.*", "p")
    assert names.management_base(endpoint, None) == "http://broker:15672"
    assert names.management_base(endpoint, "https://mgmt:443/rmq") == "https://mgmt:443/rmq"
    assert names.management_base(endpoint, "http://reader@mgmt:15672") == "http://mgmt:15672"
    with pytest.raises(StreamURIError, match="names user 'admin'"):
        names.management_base(endpoint, "http://admin@mgmt:15672")


def test_an_unreachable_management_api_says_what_a_pattern_needs(closed_port):
    endpoint = parse_stream_uri("rabbitmq-stream://guest@127.0.0.1:1/%2F?pattern=o-.*", "guest")
    with pytest.raises(ManagementUnavailable) as failure:
        names.list_streams(endpoint, f"http://127.0.0.1:{closed_port}", "o-.*", timeout=2)
    message = str(failure.value)
    assert "streamPattern 'o-.*' lists the streams through RabbitMQ's management API" in message
    assert f"127.0.0.1:{closed_port}" in message and "managementUri" in message
    # The reader retries it (it goes away with the node) until its reconnectTimeout.
    with pytest.raises(StreamUnreachable, match="listing the streams streamPattern 'o-.\\*'"):
        names.resolve(endpoint, "o-.*", f"http://127.0.0.1:{closed_port}", 0.3)


def test_pattern_in_the_uri_and_as_an_option():
    uri = parse_stream_uri("rabbitmq-stream://u@h/%2F?pattern=a+b.*&management=http://m:1", "p")
    assert uri.pattern == "a+b.*" and uri.management == "http://m:1"  # "+" stays a plus
    assert "pattern=a%2Bb.%2A" in uri.uri and "management" not in uri.uri
    with pytest.raises(StreamURIError, match="names streams and a pattern"):
        parse_stream_uri("rabbitmq-stream://u@h/%2F?pattern=a.*&stream=b", "p")
    options = SourceOptions.parse({"path": "rabbitmq-stream://u@h/%2F", "password": "p",
                                   "streamPattern": "o-.*", "managementUri": "http://m:2"})
    assert (options.pattern, options.streams, options.management_uri) == ("o-.*", (), "http://m:2")
    with pytest.raises(StreamURIError, match="use one"):
        SourceOptions.parse({"path": "rabbitmq-stream://u@h/%2F?stream=a", "password": "p",
                             "streamPattern": "o-.*"})
    with pytest.raises(StreamURIError, match="or the 'stream' \\(or 'streamPattern'\\) option"):
        SourceOptions.parse({"path": "rabbitmq-stream://u@h/%2F", "password": "p"})
    # Per-stream offsets for a pattern name some streams; the others start at their first.
    some = SourceOptions.parse({"path": "rabbitmq-stream://u@h/%2F?pattern=o-.*", "password": "p",
                                "startingOffset": '{"o-1": 4}'})
    assert some.start_at == (("o-1", 4),)
    assert SourceOptions.parse({"path": "rabbitmq-stream://u@h/%2F?pattern=o-.*", "password": "p",
                                "startingOffset": "{}"}).start_at == ()


def _pattern_reader(monkeypatch, listed: list[list[str]], tails: dict[str, int]) -> StreamReader:
    """A streaming reader of ``o-.*`` whose management API lists ``listed`` in turn."""
    from xroute.streams import client

    answers = iter(listed)
    monkeypatch.setattr(names, "list_streams", lambda *a, **k: next(answers))
    monkeypatch.setattr(client, "tails", lambda ep, streams, known=None, reconnect_s=0: {
        s: tails[s] for s in streams})
    monkeypatch.setattr(client, "positions", lambda ep, streams, spec, reconnect_s=0: {
        s: 0 for s in streams})
    options = SourceOptions.parse({"path": "rabbitmq-stream://u@h/%2F?pattern=o-.*",
                                   "password": "p", "maxRecordsPerPartition": "100"})
    return StreamReader(options)


def test_a_stream_created_later_joins_from_its_first_offset(monkeypatch):
    reader = _pattern_reader(
        monkeypatch, [["o-1", "other"], ["o-1", "other"], ["o-1", "o-2", "other"]],
        {"o-1": 50, "o-2": 30},
    )
    start = reader.initialOffset()
    assert start == {"o-1": 0}
    first = reader.latestOffset(start)
    assert first == {"o-1": 50}
    second = reader.latestOffset(first)
    assert second == {"o-1": 50, "o-2": 30}
    parts = reader.partitions(first, second)
    assert parts == [StreamRange("o-2", 0, 30)]  # o-1 has nothing new


def test_a_stream_that_vanished_stops_the_query(monkeypatch):
    reader = _pattern_reader(monkeypatch, [["o-1"]], {"o-1": 5, "o-2": 7})
    with pytest.raises(StreamVanished) as failure:
        reader.latestOffset({"o-1": 5, "o-2": 7})
    assert "'o-2' (matched by streamPattern 'o-.*', read up to offset 7) no longer exists" in str(
        failure.value)
    assert isinstance(failure.value, StreamNotFound) and failure.value.stream == "o-2"


def test_a_stream_no_longer_matched_but_there_is_left_quietly(monkeypatch):
    # The pattern changed between runs: "x-1" exists but no longer matches; not an error.
    reader = _pattern_reader(monkeypatch, [["o-1", "x-1"]], {"o-1": 9, "x-1": 3})
    assert reader.latestOffset({"o-1": 4, "x-1": 3}) == {"o-1": 9}


def test_a_management_api_answering_500_is_waited_for():
    """3.10's API answered 500 to /api/queues while a restarted node recovered its streams:
    retried, then the listing is used; a 404 is not retried."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    answers = [(500, b"{}"), (200, json.dumps([{"name": "o-1", "type": "stream"},
                                              {"name": "o-q", "type": "classic"}]).encode())]
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            asked.append(self.path)
            status, body = answers.pop(0) if answers else (404, b"{}")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = parse_stream_uri("rabbitmq-stream://guest@127.0.0.1:1/%2F?pattern=o-.*", "g")
        api = f"http://127.0.0.1:{server.server_port}"
        assert names.resolve(endpoint, "o-.*", api, 30)[0] == ("o-1",)
        assert asked == ["/api/queues/%2F?columns=name,type"] * 2
        from xroute.core.errors import ManagementError

        with pytest.raises(ManagementError, match="answered 404") as failure:
            names.resolve(endpoint, "o-.*", api, 30)
        assert not isinstance(failure.value, ManagementUnavailable)
    finally:
        server.shutdown()


def test_a_stream_deleted_between_listing_and_tails_is_vanished_too(monkeypatch):
    from xroute.streams import client

    reader = _pattern_reader(monkeypatch, [["o-1", "o-2"]], {"o-1": 5})

    def tails(endpoint, streams, known=None, reconnect_s=0):
        raise StreamNotFound("stream 'o-2' does not exist", "o-2")

    monkeypatch.setattr(client, "tails", tails)
    with pytest.raises(StreamVanished, match="'o-2' .*read up to offset 7"):
        reader.latestOffset({"o-1": 5, "o-2": 7})
