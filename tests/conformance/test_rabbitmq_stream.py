"""The ``rabbitmq-stream`` Spark source against a private RabbitMQ node with the stream plugin
(started here, on loopback, its own node name and ports; stopped after): batch reads equal
what was published with either protocol, typed headers keep their types, a restarted
streaming query reads nothing twice and skips nothing, a stream truncated under a stopped
query fails with `StreamTruncated`, `route()` agrees with `Topology.route_message`, a
streaming query outlives the node restarted under it (each offset once) and fails with
`StreamUnreachable` when the node stays away longer than ``reconnectTimeout``, and a
``streamPattern`` reads the streams it matches, picks up one created later from its first
offset and stops with `StreamVanished` when one is deleted, as a task does whose stream is
deleted under it.

Run by ``make conformance`` (marker ``conformance``; they start Spark too: marker ``spark``).
"""

from __future__ import annotations

import os
import time
import uuid

import pyarrow.parquet as pq
import pytest

from tests.conformance.streams import declare_stream, publish_091, publish_stream, stream_node
from tests.pipeline.conftest import spark  # noqa: F401 - the shared SparkSession fixture
from xroute import Topology
from xroute.core.errors import StreamNotFound, StreamTruncated, StreamUnreachable, StreamVanished
from xroute.core.field_table import decode_table
from xroute.core.values import binary, float32, long, short

pytestmark = [pytest.mark.conformance, pytest.mark.spark]


@pytest.fixture(scope="module")
def node():
    """The private node with the stream plugin (and the management API, for the patterns),
    for this module."""
    with stream_node(management=True) as started:
        yield started


@pytest.fixture(autouse=True)
def password(monkeypatch):
    """guest's password, where every xroute connection takes it from."""
    monkeypatch.setenv("RABBITMQ_PASSWORD", "guest")


@pytest.fixture
def registered(spark):  # noqa: F811
    from xroute.spark import register

    register(spark)
    return spark


def _name(short_name: str) -> str:
    return f"xr-{short_name}-{uuid.uuid4().hex[:6]}"


def _rows(df):
    return sorted(df.collect(), key=lambda r: (r["stream"], r["offset"]))


def test_batch_read_equals_what_both_protocols_published(node, registered):
    stream = _name("both")
    declare_stream(node.amqp_url, stream)
    publish_091(node.amqp_url, "", [(stream, {"i": n}, b"amqp-%d" % n, f"m{n}") for n in range(40)])
    publish_stream(node.stream_port, stream, [b"stream-%d" % n for n in range(60)])
    df = registered.read.format("rabbitmq-stream").option("maxRecordsPerPartition", 30).load(
        node.uri(stream)
    )
    rows = _rows(df)
    assert [r["offset"] for r in rows] == list(range(100))
    assert [r["payload"] for r in rows] == [b"amqp-%d" % n for n in range(40)] + [
        b"stream-%d" % n for n in range(60)
    ]
    # The 0-9-1 publishes: their exchange (the default one), key and message id; the stream
    # protocol's messages read as RabbitMQ reads them back: default exchange, the stream's name.
    assert {(r["exchange"], r["routing_key"]) for r in rows} == {("", stream)}
    assert [r["message_id"] for r in rows[:40]] == [f"m{n}" for n in range(40)]
    assert [decode_table(r["amqp_headers"])[0]["i"] for r in rows[:40]] == list(range(40))
    assert rows[40]["message_id"] is None and rows[40]["headers"] == '{"n": 0}'
    assert all(r["chunk_timestamp"] is not None for r in rows)
    # A range: startingOffset and endingOffset.
    part = (registered.read.format("rabbitmq-stream").option("startingOffset", 35)
            .option("endingOffset", 45).load(node.uri(stream)))
    assert [r["offset"] for r in _rows(part)] == list(range(35, 45))


def test_typed_headers_survive_and_route_as_rabbitmq_routes(node, registered):
    stream = _name("typed")
    declare_stream(node.amqp_url, stream)
    connection_headers = [
        {"kind": "a", "level": short(3)},
        {"kind": "a", "level": long(3)},  # 3.10 compares top-level values, not their types
        {"kind": "b", "ratio": float32(1.5), "raw": binary(b"\x00\xff")},
        {"kind": "b", "flag": True},
    ]
    publish_091(node.amqp_url, "", [
        (stream, h, b"", f"t{n}") for n, h in enumerate(connection_headers)
    ])
    rows = _rows(registered.read.format("rabbitmq-stream").load(node.uri(stream)))
    tables = [decode_table(r["amqp_headers"])[0] for r in rows]
    assert type(tables[0]["level"]) is short and type(tables[1]["level"]) is long
    assert type(tables[2]["ratio"]) is float32 and tables[2]["raw"] == b"\x00\xff"
    assert tables[3]["flag"] is True
    # route() on the source's rows, typed headers, against Topology.route_message.
    topology = Topology(rabbitmq="3.10")
    topology.declare_exchange("h", "headers")
    for queue in ("q-short", "q-any-a", "q-ratio"):
        topology.declare_queue(queue)
    topology.bind("h", "q-short", "", {"x-match": "all", "level": short(3)})
    topology.bind("h", "q-any-a", "", {"x-match": "any", "kind": "a"})
    topology.bind("h", "q-ratio", "", {"x-match": "all", "ratio": float32(1.5)})
    from xroute.spark import route

    df = registered.read.format("rabbitmq-stream").load(node.uri(stream)).drop("exchange")
    routed = sorted(route(df, topology, exchange="h", headers="amqp_headers").collect(),
                    key=lambda r: r["offset"])
    for row, headers in zip(routed, tables):
        expected = topology.route_message("h", row["routing_key"], headers)
        assert sorted(row["queues"]) == sorted(q.name if hasattr(q, "name") else q for q in expected)
    assert [sorted(r["queues"]) for r in routed] == [
        ["q-any-a", "q-short"], ["q-any-a", "q-short"], ["q-ratio"], []
    ]


def test_a_restarted_streaming_query_reads_nothing_twice_and_skips_nothing(
    node, registered, tmp_path
):
    stream = _name("restart")
    declare_stream(node.amqp_url, stream)
    publish_stream(node.stream_port, stream, [b"a-%d" % n for n in range(250)])
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run_once() -> None:
        query = (registered.readStream.format("rabbitmq-stream")
                 .option("maxRecordsPerTrigger", 70).load(node.uri(stream))
                 .select("stream", "offset", "payload")
                 .writeStream.format("parquet").option("checkpointLocation", checkpoint)
                 .start(out))
        # The default trigger honours maxRecordsPerTrigger (availableNow reads all at once).
        try:
            query.processAllAvailable()
            assert query.exception() is None
        finally:
            query.stop()

    run_once()
    first = pq.read_table(out).column("offset").to_pylist()
    assert sorted(first) == list(range(250))
    publish_stream(node.stream_port, stream, [b"b-%d" % n for n in range(130)])
    run_once()  # restarted from the checkpoint
    offsets = pq.read_table(out).column("offset").to_pylist()
    assert sorted(offsets) == list(range(380)), "each offset exactly once across the restart"
    # maxRecordsPerTrigger: 250 then 130 more in micro-batches of at most 70 rows each.
    batches = [f for f in os.listdir(os.path.join(checkpoint, "offsets")) if f.isdigit()]
    assert len(batches) >= 4 + 2, batches


def test_a_stream_truncated_under_a_stopped_query_fails_clearly(node, registered, tmp_path):
    stream = _name("trunc")
    # Small segments and a small size limit: retention removes old segments as new ones come.
    declare_stream(node.amqp_url, stream, {"x-max-length-bytes": 20000,
                                           "x-stream-max-segment-size-bytes": 5000})
    publish_stream(node.stream_port, stream, [b"x" * 100 for _ in range(20)])
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def start():
        return (registered.readStream.format("rabbitmq-stream").load(node.uri(stream))
                .select("offset").writeStream.format("parquet")
                .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(out))

    query = start()
    assert query.awaitTermination(180)
    assert sorted(pq.read_table(out).column("offset").to_pylist()) == list(range(20))
    # While the query is stopped, far more than the limit arrives: offsets 20.. are removed.
    for _ in range(8):
        publish_stream(node.stream_port, stream, [b"y" * 100 for _ in range(200)])
    from xroute.streams import client
    from xroute.streams.offsets import OffsetSpec
    from xroute.streams.uri import parse_stream_uri

    head = client.positions(parse_stream_uri(node.uri(stream)), [stream], OffsetSpec("first"))
    assert head[stream] > 20, f"retention did not truncate the stream (first offset {head})"
    query = start()
    with pytest.raises(Exception) as failure:
        query.awaitTermination(180)
    assert "no longer holds offsets 20.." in str(failure.value)
    assert StreamTruncated.__name__ in str(failure.value)


def test_a_missing_stream_is_a_typed_error_on_the_driver(node, registered):
    with pytest.raises(Exception) as failure:
        registered.read.format("rabbitmq-stream").load(node.uri("no-such-stream")).collect()
    assert "stream 'no-such-stream' does not exist" in str(failure.value)
    from xroute.streams import client
    from xroute.streams.uri import parse_stream_uri

    with pytest.raises(StreamNotFound):
        client.tails(parse_stream_uri(node.uri("no-such-stream")), ["no-such-stream"])


def test_spark_connect_reads_a_stream_too(node, spark_connect):
    """register() on a Spark Connect session: the same rows, read by the server's workers."""
    from xroute.spark import register

    stream = _name("connect")
    declare_stream(node.amqp_url, stream)
    publish_stream(node.stream_port, stream, [b"c-%d" % n for n in range(25)])
    register(spark_connect)
    rows = _rows(spark_connect.read.format("rabbitmq-stream").load(node.uri(stream)))
    assert [(r["offset"], r["payload"]) for r in rows] == [(n, b"c-%d" % n) for n in range(25)]


def _committed_batches(checkpoint: str) -> int:
    folder = os.path.join(checkpoint, "commits")
    return len([f for f in os.listdir(folder) if f.isdigit()]) if os.path.isdir(folder) else 0


def test_a_streaming_query_outlives_a_broker_restart(node, registered, tmp_path):
    """The node's RabbitMQ application is stopped and started under a running query: the
    driver and the tasks reconnect, and every offset lands once in the sink."""
    stream = _name("restart-node")
    declare_stream(node.amqp_url, stream)
    publish_stream(node.stream_port, stream, [b"r-%d" % n for n in range(600)])
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    query = (registered.readStream.format("rabbitmq-stream")
             .option("maxRecordsPerTrigger", 40).option("reconnectTimeout", 90)
             .load(node.uri(stream)).select("stream", "offset", "payload")
             .writeStream.format("parquet").option("checkpointLocation", checkpoint)
             .trigger(processingTime="100 milliseconds").start(out))
    try:
        deadline = time.monotonic() + 300
        while _committed_batches(checkpoint) < 1 and time.monotonic() < deadline:
            assert query.exception() is None
            time.sleep(0.05)
        before = _committed_batches(checkpoint)
        assert 1 <= before < 15, f"the restart must come mid-query ({before} of 15 batches)"
        node.restart()
        publish_stream(node.stream_port, stream, [b"s-%d" % n for n in range(200)])
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    offsets = pq.read_table(out).column("offset").to_pylist()
    assert sorted(offsets) == list(range(800)), "each offset exactly once across the restart"


def test_a_node_away_longer_than_the_reconnect_timeout_fails_naming_stream_and_node(
    node, registered
):
    stream = _name("away")
    declare_stream(node.amqp_url, stream)
    publish_stream(node.stream_port, stream, [b"a"] * 5)
    frame = (registered.read.format("rabbitmq-stream").option("reconnectTimeout", 2)
             .load(node.uri(stream)))
    node.node.rabbitmqctl("stop_app")
    try:
        with pytest.raises(Exception) as failure:
            frame.collect()
    finally:
        node.node.rabbitmqctl("start_app")
    message = str(failure.value)
    assert StreamUnreachable.__name__ in message
    assert f"stream {stream!r}" in message
    assert f"the node at rabbitmq-stream://guest@127.0.0.1:{node.stream_port}/%2F" in message
    assert "did not answer for 2 s" in message


def _delete_stream(amqp_url: str, name: str) -> None:
    from xroute.bench.rabbitmq import connect

    connection = connect(amqp_url)
    try:
        connection.channel().queue_delete(name)
    finally:
        connection.close()


def test_a_pattern_reads_its_streams_picks_up_new_ones_and_stops_on_a_vanished_one(
    node, registered, tmp_path
):
    tag = uuid.uuid4().hex[:6]
    a, b, c, other = (f"p{tag}-a", f"p{tag}-b", f"p{tag}-c", f"q{tag}-a")
    for stream in (a, b, other):
        declare_stream(node.amqp_url, stream)
    publish_stream(node.stream_port, a, [b"a"] * 30)
    publish_stream(node.stream_port, b, [b"b"] * 20)
    publish_stream(node.stream_port, other, [b"x"] * 10)
    uri = f"rabbitmq-stream://guest@127.0.0.1:{node.stream_port}/%2F"
    pattern = f"p{tag}-.*"

    def source(reader):
        return (reader.format("rabbitmq-stream").option("streamPattern", pattern)
                .option("managementUri", node.management_url).load(uri))

    # A batch read: the streams matched, not the one beside them.
    got = sorted((r["stream"], r["offset"]) for r in source(registered.read).collect())
    assert got == sorted([(a, n) for n in range(30)] + [(b, n) for n in range(20)])
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    query = (source(registered.readStream).select("stream", "offset").writeStream
             .format("parquet").option("checkpointLocation", checkpoint)
             .trigger(processingTime="100 milliseconds").start(out))
    try:
        query.processAllAvailable()
        # A stream created under the running query: read from its first offset.
        declare_stream(node.amqp_url, c)
        publish_stream(node.stream_port, c, [b"c"] * 15)
        publish_stream(node.stream_port, a, [b"a"] * 5)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            query.processAllAvailable()
            rows = pq.read_table(out).to_pylist()
            if any(r["stream"] == c for r in rows) and len(rows) >= 70:
                break
            time.sleep(0.2)
        rows = sorted((r["stream"], r["offset"]) for r in pq.read_table(out).to_pylist())
        assert rows == sorted([(a, n) for n in range(35)] + [(b, n) for n in range(20)]
                              + [(c, n) for n in range(15)]), "each offset once, c from 0"
        # A stream it was reading is deleted: the query stops, saying which.
        _delete_stream(node.amqp_url, b)
        with pytest.raises(Exception) as failure:
            query.awaitTermination(120)
    finally:
        query.stop()
    said = [line for line in str(failure.value).splitlines() if "xroute.core.errors" in line]
    assert any(StreamVanished.__name__ in line for line in said), said
    assert f"{b!r} (matched by streamPattern {pattern!r}, read up to offset 20)" in str(
        failure.value), said


def test_a_stream_deleted_while_a_task_reads_it_stops_the_task_with_stream_vanished(node):
    """A task waiting for offsets past the tail learns of the deletion from the broker's
    metadata update, not after the read's 120 s of silence; a task that subscribes after it
    finds no stream. Either way: `StreamVanished`, naming the stream and the range."""
    import threading

    from xroute.spark.rabbitmq_stream import SourceOptions, StreamRange, read_range

    stream = _name("deleted")
    declare_stream(node.amqp_url, stream)
    publish_stream(node.stream_port, stream, [b"m"] * 50)
    options = SourceOptions.parse({"path": node.uri(stream), "password": "guest"})
    failed: list[BaseException] = []

    def task() -> None:
        try:
            list(read_range(options, StreamRange(stream, 0, 100)))  # 50 more than it holds
        except BaseException as error:  # noqa: BLE001 - the test reads it
            failed.append(error)

    reader = threading.Thread(target=task, daemon=True)
    reader.start()
    time.sleep(1)  # not needed for the outcome: gives the task time to subscribe first
    _delete_stream(node.amqp_url, stream)
    reader.join(60)  # half the read's silence timeout: a metadata update, not the timeout
    assert not reader.is_alive(), "the task still waits on a deleted stream"
    assert len(failed) == 1 and isinstance(failed[0], StreamVanished), failed
    assert f"stream {stream!r} was deleted" in str(failed[0])
    assert "offsets 0..99" in str(failed[0])
