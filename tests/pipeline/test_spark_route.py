"""`xroute.spark.route` equals `Topology.route_message`, record by record: one row out per row
in, every input column kept, ``queues`` sorted, ``error`` the library's own error; on a classic
session and on a Spark Connect session (a real server from the pyspark package) alike."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.pipeline import data
from tests.test_batch import EXCHANGES, any_key, good_headers, topologies
from xroute import DatasetError, Topology, XRouteError
from xroute.core.errors import InvalidHeaders, InvalidRoutingKey, UnknownExchange
from xroute.core.keys import check_routing_key
from xroute.spark import route

pytestmark = pytest.mark.spark

SCHEMA = "id long, exchange string, routing_key string, headers string"


def expected_row(topology: Topology, exchange: str | None, key: Any, text: str | None):
    """(sorted queues, error text) as `route` should give them, from the library."""
    try:
        # The order route_message checks in: the exchange, the key, the headers.
        if exchange is None:
            raise UnknownExchange(None, "the record names no exchange and no --exchange was given")
        topology.route_message(exchange, "")
        if key is None:
            raise InvalidRoutingKey(None, "the message has no routing key")
        check_routing_key(key)
        try:
            headers = None if text is None else json.loads(text)
        except ValueError as error:
            raise InvalidHeaders(
                f"headers are not valid JSON ({error}): {text[:80]!r}", "headers", text
            ) from None
        return sorted(topology.route_message(exchange, key, headers)), None
    except XRouteError as error:
        return [], f"{type(error).__name__}: {error}"


def json_headers(headers: Any) -> str | None:
    """Headers as the JSON text a log would carry (bytes, which JSON cannot, as text)."""
    if headers is None:
        return None
    return json.dumps(
        {k: v.decode() if isinstance(v, bytes) else v for k, v in headers.items()}
    )


@pytest.fixture(params=["classic", "connect"])
def session(request):
    """The classic test session, then a Spark Connect session on the private server."""
    return request.getfixturevalue("spark" if request.param == "classic" else "spark_connect")


records = st.lists(
    st.tuples(
        st.sampled_from([*EXCHANGES, None, "nowhere"]),
        any_key,
        st.one_of(st.none(), good_headers.map(json_headers), st.just('{"CC": ["a"')),
    ),
    min_size=1,
    max_size=40,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(topology=topologies(), rows=records, default=st.sampled_from([None, "x0", "x1"]))
def test_route_equals_route_message(session, topology, rows, default):
    frame = session.createDataFrame(
        [(i, exchange, key, text) for i, (exchange, key, text) in enumerate(rows)], SCHEMA
    )
    routed = route(frame, topology, exchange=default).collect()
    assert [r["id"] for r in routed] == list(range(len(rows))), "one row out per row in, in order"
    for row, (exchange, key, text) in zip(routed, rows):
        wanted = expected_row(topology, exchange if exchange is not None else default, key, text)
        assert (row["queues"], row["error"]) == wanted, (
            f"exchange={exchange!r} key={key!r} headers={text!r} default={default!r}\n"
            f"{topology.to_definitions()}"
        )
        assert (row["exchange"], row["routing_key"], row["headers"]) == (exchange, key, text)


def test_route_on_the_pipeline_topology(session, tmp_path):
    """Every exchange type, CC/BCC, e2e, alternates, internal exchanges, malformed records;
    the DataFrame read from Parquet, topology given as a definitions file."""
    records = data.messages(3000, seed=5)
    path = tmp_path / "messages.parquet"
    pq.write_table(data.table(records), path)
    definitions = tmp_path / "defs.json"
    definitions.write_text(json.dumps(data.definitions()))
    topology = Topology.from_definitions(data.definitions())

    routed = route(session.read.parquet(str(path)), str(definitions)).collect()

    assert [r["message_id"] for r in routed] == [r["message_id"] for r in records]
    for row, record in zip(routed, records):
        wanted = expected_row(
            topology, record["exchange"], record["routing_key"], record["headers"]
        )
        assert (row["queues"], row["error"]) == wanted, record
        assert row["size"] == record["size"]


def test_route_reads_map_headers_and_a_default_exchange(session):
    t = Topology()
    t.declare_exchange("h", "headers")
    t.declare_queue("sensors")
    t.bind("h", "sensors", "", {"x-match": "all", "kind": "sensor"})
    frame = session.createDataFrame(
        [("k", {"kind": "sensor"}), ("k", {"kind": "camera"}), ("k", None)],
        "routing_key string, headers map<string,string>",
    )
    routed = route(frame, t, exchange="h").collect()
    assert [r["queues"] for r in routed] == [["sensors"], [], []]
    assert [r["error"] for r in routed] == [None, None, None]


def test_route_reads_spark_types_as_amqp_types(spark):
    # ShortType is a short, LongType a long, FloatType a float (xroute.arrow_values): inside
    # an array the width counts, as on RabbitMQ.
    from xroute.core.values import float32, long, short

    t = Topology()
    t.declare_exchange("h", "headers")
    for queue, wanted in (("short", [short(1)]), ("int", [1]), ("long", [long(1)]),
                          ("float", [float32(1.5)]), ("double", [1.5])):
        t.declare_queue(queue)
        t.bind("h", queue, "", {"x-match": "any", "s": wanted, "i": wanted, "l": wanted,
                                "f": wanted, "d": wanted})
    frame = spark.createDataFrame(
        [("k", ([1], None, None, None, None)), ("k", (None, [1], None, None, None)),
         ("k", (None, None, [1], None, None)), ("k", (None, None, None, [1.5], None)),
         ("k", (None, None, None, None, [1.5]))],
        "routing_key string, headers struct<s: array<short>, i: array<int>, l: array<long>,"
        " f: array<float>, d: array<double>>",
    )
    routed = route(frame, t, exchange="h").collect()
    assert [r["queues"] for r in routed] == [["short"], ["int"], ["long"], ["float"], ["double"]]


def test_route_names_its_columns_as_asked(spark):
    t = Topology()
    t.declare_queue("q")
    frame = spark.createDataFrame([("q", "x")], "key string, queues string")
    with pytest.raises(DatasetError, match="already has a column 'queues'"):
        route(frame, t, exchange="", routing_key="key")
    routed = route(frame, t, exchange="", routing_key="key", queues_column="to").collect()
    assert routed[0]["to"] == ["q"] and routed[0]["queues"] == "x"


def test_route_refuses_what_it_cannot_route(spark):
    t = Topology()
    frame = spark.createDataFrame([("a",)], "key string")
    with pytest.raises(DatasetError, match="no routing key column 'routing_key'"):
        route(frame, t, exchange="")
    with pytest.raises(DatasetError, match="no 'exchange' column and no exchange="):
        route(frame, t, routing_key="key")
    bad = spark.createDataFrame([("a", 1)], "routing_key string, headers int")
    with pytest.raises(DatasetError, match="must be a map, a struct, a JSON object as text or an AMQP field table"):
        route(bad, t, exchange="")


def test_route_on_a_stream(spark, tmp_path):
    """The same function on a streaming DataFrame (a folder of Parquet files)."""
    t = Topology()
    t.declare_exchange("x", "topic")
    t.declare_queue("all")
    t.bind("x", "all", "#")
    source = tmp_path / "in"
    source.mkdir()
    for part in range(2):
        keys = pa.array([f"k{part}.{i}" for i in range(5)])
        pq.write_table(pa.table({"routing_key": keys}), source / f"part-{part}.parquet")
    stream = spark.readStream.schema("routing_key string").parquet(str(source))
    query = (
        route(stream, t, exchange="x")
        .writeStream.format("memory")
        .queryName("xroute_stream_test")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    rows = spark.sql("SELECT routing_key, queues, error FROM xroute_stream_test").collect()
    assert sorted(r["routing_key"] for r in rows) == sorted(
        f"k{p}.{i}" for p in range(2) for i in range(5)
    )
    assert all(r["queues"] == ["all"] and r["error"] is None for r in rows)


@pytest.mark.parametrize("mode", ["classic", "connect"])
def test_the_readme_pyspark_examples_run(spark, mode, request, monkeypatch):
    """The README's PySpark examples (``py`` blocks: they need Spark), on the classic session
    and, with ``SPARK_REMOTE`` naming the private Connect server, on Spark Connect."""
    import re
    from pathlib import Path

    if mode == "connect":
        server = request.getfixturevalue("connect_server")
        request.getfixturevalue("spark_connect")  # Connect mode for this test
        monkeypatch.setenv("SPARK_REMOTE", server.url)
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    blocks = re.findall(r"```py\n(.*?)```", readme, re.S)
    assert len(blocks) >= 2, "the README has lost its PySpark examples"
    for block in blocks:
        assert len(block.strip().splitlines()) <= 14
        exec(compile(block, "README.md", "exec"), {})


def test_route_reads_property_columns_and_the_profile(spark):
    # x-consistent-hash on a header: up to 3.12 its AMQP type is hashed too, so the profile
    # must reach the workers; hash-property reads the message_id column.
    from pathlib import Path

    export = json.loads((Path(__file__).parents[1] / "data" / "plugins.json").read_text())
    export["exchanges"].append(
        {"name": "by-header", "type": "x-consistent-hash", "arguments": {"hash-header": "h"}}
    )
    export["bindings"] += [
        {"source": "by-header", "destination": q, "destination_type": "queue", "routing_key": "1"}
        for q in ("shard-a", "shard-b")
    ]
    rows = [(i, "by-header" if i % 2 else "by-customer", "k", json.dumps({"h": i}), f"m{i}")
            for i in range(40)]
    df = spark.createDataFrame(rows, SCHEMA + ", message_id string")
    for version in ("3.10", "3.13"):
        topology = Topology.from_definitions(export, rabbitmq=version)
        got = {r["id"]: r["queues"] for r in route(df, topology).collect()}
        assert got == {
            i: sorted(topology.route(x, k, json.loads(h), properties={"message_id": m}))
            for i, x, k, h, m in rows
        }
