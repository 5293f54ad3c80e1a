"""The commands' broker input (``rabbitmq-stream://``) without a broker or Spark (make test):
the preflight refuses a bad URI, a missing password, a file format and a node that does not
answer in one line with exit code 2; a batch's offsets come from Spark's offset log and the
tasks' spans prove them read whole; the first run's start is kept in the checkpoint folder and
read back without asking the broker. The broker itself: tests/conformance/test_rabbitmq_stream_cli.py.
"""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner

from xroute.cli import EXIT_BAD_INPUT, cli
from xroute.core.errors import PipelineFailed, StreamURIError
from xroute.pipeline.stream_summary import status_line
from xroute.spark import broker_input
from xroute.spark.rabbitmq_stream import SourceOptions
from xroute.streams.offsets import OffsetSpec
from xroute.streams.uri import parse_stream_uri


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def defs(tmp_path) -> str:
    path = tmp_path / "defs.json"
    path.write_text(json.dumps({"queues": [], "exchanges": [], "bindings": []}))
    return str(path)


def run(*args: str, password: str | None = "guest"):
    env = {"RABBITMQ_PASSWORD": password}
    return CliRunner().invoke(cli, list(args), env=env)


def stream_args(defs: str, tmp_path, uri: str) -> list[str]:
    return ["stream", "-d", defs, "-m", uri, "-o", str(tmp_path / "out"),
            "--checkpoint", str(tmp_path / "cp")]


@pytest.mark.parametrize(
    "uri, words",
    [
        ("rabbitmq-stream://guest:secret@127.0.0.1:5552/%2F?stream=s", "holds a password"),
        ("rabbitmq-stream://guest@127.0.0.1:5552/%2F", "no stream named"),
        ("rabbitmq-stream://guest@127.0.0.1:5552/%2F?stream=s&bogus=1", "unknown URI parameter"),
    ],
)
def test_stream_refuses_a_bad_uri_before_spark(defs, tmp_path, uri, words):
    result = run(*stream_args(defs, tmp_path, uri))
    assert result.exit_code == EXIT_BAD_INPUT
    assert words in result.output
    assert "starting Spark" not in result.output
    assert not (tmp_path / "cp").exists()


def test_stream_without_a_password_says_where_it_comes_from(defs, tmp_path):
    result = run(*stream_args(defs, tmp_path, "rabbitmq-stream://guest@127.0.0.1/%2F?stream=s"),
                 password=None)
    assert result.exit_code == EXIT_BAD_INPUT
    assert "set RABBITMQ_PASSWORD" in result.output


def test_a_node_that_does_not_answer_is_refused_in_one_line(defs, tmp_path, closed_port):
    uri = f"rabbitmq-stream://guest@127.0.0.1:{closed_port}/%2F?stream=s"
    result = run(*stream_args(defs, tmp_path, uri))
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.output.startswith(
        f"xroute: error: cannot open a stream connection to rabbitmq-stream://guest@127.0.0.1:{closed_port}/"
    )
    assert "starting Spark" not in result.output
    # The same preflight for a bounded range: pipeline and diff -m.
    result = run("pipeline", "-d", defs, "-m", uri, "-o", str(tmp_path / "p"))
    assert result.exit_code == EXIT_BAD_INPUT and "cannot open a stream connection" in result.output
    result = run("diff", defs, defs, "-m", uri, "-o", str(tmp_path / "d"))
    assert result.exit_code == EXIT_BAD_INPUT and "cannot open a stream connection" in result.output


def test_a_file_format_is_refused_for_a_broker(defs, tmp_path):
    uri = "rabbitmq-stream://guest@127.0.0.1/%2F?stream=s"
    result = run(*stream_args(defs, tmp_path, uri), "--format", "csv")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "--format csv names a file format" in result.output


def test_per_stream_offsets_as_json():
    options = SourceOptions.parse({
        "path": "rabbitmq-stream://u@h/%2F?stream=a,b", "password": "p",
        "startingOffset": '{"a": 3, "b": 0}', "endingOffset": '{"a": 9, "b": 4}',
    })
    assert options.start_at == (("a", 3), ("b", 0)) and options.end_at == (("a", 9), ("b", 4))
    with pytest.raises(StreamURIError, match=r"missing \['b'\]"):
        SourceOptions.parse({"path": "rabbitmq-stream://u@h/%2F?stream=a,b", "password": "p",
                             "startingOffset": '{"a": 3}'})
    with pytest.raises(StreamURIError, match="not offsets"):
        SourceOptions.parse({"path": "rabbitmq-stream://u@h/%2F?stream=a", "password": "p",
                             "startingOffset": '{"a": -1}'})


def test_check_spans_proves_a_batch_read_whole():
    start, end = {"a": 10, "b": 5}, {"a": 20, "b": 5}
    assert broker_input.check_spans(start, end, {"a": [10, 19]}, {"a": 10}) == 10
    with pytest.raises(PipelineFailed, match=r"offsets 10\.\.19 \(10 messages\); the tasks read 10\.\.18"):
        broker_input.check_spans(start, end, {"a": [10, 18]}, {"a": 9})
    with pytest.raises(PipelineFailed, match="the tasks read 10..19 \\(9 messages\\)"):
        broker_input.check_spans(start, end, {"a": [10, 19]}, {"a": 9})  # one missing inside
    with pytest.raises(PipelineFailed, match="the tasks read none"):
        broker_input.check_spans(start, end, {}, {})


def _log(folder, batch_id: int, offsets: dict[str, int]) -> None:
    (folder / "offsets").mkdir(parents=True, exist_ok=True)
    (folder / "offsets" / str(batch_id)).write_text(
        'v1\n{"batchWatermarkMs":0}\n' + json.dumps(offsets)
    )


def test_batch_offsets_come_from_the_offset_log_and_the_kept_start(tmp_path):
    endpoint = parse_stream_uri("rabbitmq-stream://guest@127.0.0.1:1/%2F?stream=a", "guest")
    checkpoint = str(tmp_path)
    broker_input.keep_start(checkpoint, endpoint, {"a": 7})
    broker_input.keep_start(checkpoint, endpoint, {"a": 99})  # kept once: the first run's
    _log(tmp_path, 0, {"a": 50})
    _log(tmp_path, 1, {"a": 80})
    assert broker_input.batch_offsets(checkpoint, 0) == ({"a": 7}, {"a": 50})
    assert broker_input.batch_offsets(checkpoint, 1) == ({"a": 50}, {"a": 80})
    with pytest.raises(PipelineFailed, match="has no batch 2"):
        broker_input.batch_offsets(checkpoint, 2)
    # Read back without the broker (port 1 answers nothing): the start is the kept one.
    assert broker_input.pinned_start(checkpoint, endpoint, OffsetSpec("next")) == {"a": 7}
    other = parse_stream_uri("rabbitmq-stream://guest@127.0.0.1:1/%2F?stream=a,b", "guest")
    with pytest.raises(StreamURIError, match="made for streams \\['a'\\], not \\['b'\\]"):
        broker_input.pinned_start(checkpoint, other, OffsetSpec("next"))


def test_status_line_shows_offsets_and_lag_in_messages():
    marker = {"batch_id": 3, "seconds": 2.0, "offsets": {"orders": [100, 250]},
              "counts": {"input": 150, "unroutable": 4, "rejected": 0}}
    line = status_line(marker, 1234, "messages")
    assert "offsets orders 100..249" in line and line.endswith("lag 1,234 messages")
    assert status_line(marker, None, "messages").endswith("lag ? messages")
