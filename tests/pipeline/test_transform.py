"""The pure routing step (no Spark): Arrow batches in, deliveries/unroutable/rejected out."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tests.pipeline import data
from xroute import Topology
from xroute.core.batch import BatchRouter
from xroute.pipeline.transform import Plan, route_batch
from xroute.spark.io import FILE_COLUMN, ROW_COLUMN

ROOT = "file:///data/in"


@pytest.fixture(scope="module")
def topology() -> Topology:
    return Topology.from_definitions(data.definitions(), engine="compiled")


@pytest.fixture(scope="module")
def router(topology) -> BatchRouter:
    return BatchRouter(topology)


def as_batch(
    table: pa.Table, rows: list[int] | None = None, file: str = "messages.parquet"
) -> pa.RecordBatch:
    n = table.num_rows
    table = table.append_column(FILE_COLUMN, pa.array([f"{ROOT}/{file}"] * n))
    table = table.append_column(
        ROW_COLUMN, pa.array(rows, pa.int64()) if rows is not None else pa.nulls(n, pa.int64())
    )
    return table.combine_chunks().to_batches()[0]


def test_every_record_ends_where_route_message_says(topology, router):
    records = data.messages(3000, seed=5)
    table = data.table(records)
    plan = Plan(tuple(table.column_names), keep_columns=("size",), root=ROOT)
    routed = route_batch(router, as_batch(table, list(range(len(records)))), plan)
    want = data.expected(topology, records)
    got = set(
        zip(
            routed.deliveries.column("message_id").to_pylist(),
            routed.deliveries.column("queue").to_pylist(),
        )
    )
    assert got == want.deliveries
    assert len(got) == routed.deliveries.num_rows  # one row per (message, queue)
    assert set(routed.unroutable.column("message_id").to_pylist()) == want.unroutable
    reasons = dict(
        zip(
            routed.rejected.column("message_id").to_pylist(),
            routed.rejected.column("reason").to_pylist(),
        )
    )
    assert {m: r.split(":")[0] for m, r in reasons.items()} == want.rejected
    assert (
        routed.input
        == len(records)
        == routed.delivered + routed.unroutable.num_rows + routed.rejected.num_rows
    )
    # every kind of fault occurs, and the malformed headers are named as such
    assert set(want.rejected.values()) >= {
        "InvalidRoutingKey",
        "InvalidHeaders",
        "UnknownExchange",
        "AccessRefused",
    }
    assert any("not valid JSON" in r for r in reasons.values())
    hits = {
        (b.source, b.destination.name, b.routing_key, json.dumps(b.arguments, sort_keys=True)): int(
            h
        )
        for b, h in zip(router.bindings, routed.hits)
        if h
    }
    assert hits == dict(want.hits)
    sizes = {r["message_id"]: r["size"] for r in records}
    kept = routed.deliveries.to_pylist()
    assert kept and all(row["size"] == sizes[row["message_id"]] for row in kept)
    assert routed.queue_counts.sum() == routed.deliveries.num_rows


def test_outputs_keep_the_whole_record(router):
    records = data.messages(400, seed=9)
    table = data.table(records)
    routed = route_batch(
        router, as_batch(table, list(range(400))), Plan(tuple(table.column_names), root=ROOT)
    )
    assert routed.unroutable.schema.names == [
        "message_id",
        "exchange",
        "routing_key",
        "headers",
        "size",
    ]
    assert routed.rejected.schema.names == [
        "message_id",
        "exchange",
        "routing_key",
        "headers",
        "size",
        "reason",
    ]
    by_id = {r["message_id"]: r for r in records}
    for row in routed.unroutable.to_pylist() + routed.rejected.to_pylist():
        original = by_id[row["message_id"]]
        assert {k: row[k] for k in original} == original
    assert routed.deliveries.schema.names == ["message_id", "queue"]


def test_rejected_reasons_name_the_library_error(router):
    table = pa.table(
        {
            "exchange": ["topic", "topic", "topic", "nope", "inner", None, "topic"],
            "routing_key": [None, "k" * 300, "a", "a", "a", "a", "a"],
            "headers": [None, None, '{"CC": "a.b"}', None, None, None, "{oops"],
        }
    )
    routed = route_batch(
        router, as_batch(table, list(range(7))), Plan(tuple(table.column_names), root=ROOT)
    )
    reasons = routed.rejected.column("reason").to_pylist()
    assert reasons == [
        "InvalidRoutingKey: invalid routing key None: the message has no routing key",
        f"InvalidRoutingKey: invalid routing key {'k' * 300!r:.77}...: "
        "300 bytes in UTF-8, more than 255",
        "InvalidHeaders: header 'CC' must be an array of routing keys, got longstr ('a.b')",
        "UnknownExchange: unknown exchange 'nope' (publish)",
        "AccessRefused: exchange 'inner' is internal: it cannot be published to",
        "UnknownExchange: unknown exchange None "
        "(the record names no exchange and no --exchange was given)",
        reasons[6],
    ]
    assert reasons[6].startswith("InvalidHeaders: headers are not valid JSON")
    assert dict(routed.errors) == {
        "InvalidRoutingKey": 2,
        "InvalidHeaders": 2,
        "UnknownExchange": 2,
        "AccessRefused": 1,
    }


def test_default_exchange_option_fills_missing_exchanges(topology, router):
    table = pa.table({"routing_key": ["a.b", "a", "zzz"]})
    plan = Plan(tuple(table.column_names), default_exchange="", root=ROOT)
    routed = route_batch(router, as_batch(table, [0, 1, 2]), plan)
    assert routed.deliveries.to_pylist() == [{"message_id": "messages.parquet:0", "queue": "a.b"}]
    assert routed.unroutable.column("exchange").to_pylist() == ["", ""]
    assert topology.route("", "a") == frozenset()


def test_generated_ids_count_rows_of_text_files_across_batches(router):
    table = pa.table({"exchange": ["fanout"] * 5, "routing_key": ["x"] * 5})
    plan = Plan(tuple(table.column_names), root=ROOT)
    seen: dict[str, int] = {}
    first = route_batch(router, as_batch(table.slice(0, 3), file="sub/a.jsonl"), plan, seen)
    second = route_batch(router, as_batch(table.slice(3), file="sub/a.jsonl"), plan, seen)
    ids = (
        first.deliveries.column("message_id").to_pylist()
        + second.deliveries.column("message_id").to_pylist()
    )
    assert sorted(set(ids)) == [f"sub/a.jsonl:{i}" for i in range(5)]


def test_a_missing_message_id_is_generated_for_that_record_only(router):
    table = pa.table(
        {"message_id": ["given", None], "exchange": ["fanout"] * 2, "routing_key": ["x"] * 2}
    )
    routed = route_batch(
        router, as_batch(table, [0, 1]), Plan(tuple(table.column_names), root=ROOT)
    )
    assert sorted(set(routed.deliveries.column("message_id").to_pylist())) == [
        "given",
        "messages.parquet:1",
    ]


def test_map_headers_are_read_as_tables(router):
    headers = pa.array(
        [[("kind", "sensor"), ("floor", "1")], None], pa.map_(pa.string(), pa.string())
    )
    table = pa.table(
        {"exchange": ["headers", "headers"], "routing_key": ["", ""], "headers": headers}
    )
    routed = route_batch(
        router, as_batch(table, [0, 1]), Plan(tuple(table.column_names), root=ROOT)
    )
    # "floor" is the string "1" here, not the integer 1: the all-binding on floor 1 does not match
    t = router.topology
    want = {
        (f"messages.parquet:{i}", q)
        for i, h in enumerate([{"kind": "sensor", "floor": "1"}, None])
        for q in t.route("headers", "", h)
    }
    got = set(
        zip(
            routed.deliveries.column("message_id").to_pylist(),
            routed.deliveries.column("queue").to_pylist(),
        )
    )
    assert got == want and got


def _text(values: list[bytes | None]) -> pa.Array:
    """A string array holding these bytes as they are, as Spark hands over a file's bytes."""
    raw = pa.array(values, pa.binary())
    return pa.Array.from_buffers(pa.string(), len(raw), raw.buffers(), raw.null_count)


def test_invalid_utf8_rejects_its_record_and_the_rest_are_routed(topology, router):
    keys = _text([b"user.1.inbox", b"user.\xff.inbox", None, b"a.b"])
    corrupt = _text([None, None, b'{"routing_key": "\xc3("}', None])
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["topic"] * 4), keys, corrupt, pa.array(["f"] * 4), pa.array([0, 1, 2, 3])],
        names=["exchange", "routing_key", "_corrupt_record", FILE_COLUMN, ROW_COLUMN],
    )
    plan = Plan(("exchange", "routing_key", "_corrupt_record"))
    routed = route_batch(router, batch, plan)
    rejected = {r["message_id"]: r for r in routed.rejected.to_pylist()}
    assert set(rejected) == {"f:1", "f:2"}
    assert rejected["f:1"]["reason"].startswith(
        "DatasetError: the record's 'routing_key' is not valid UTF-8 (invalid start byte at byte 5)"
    )
    assert rejected["f:2"]["reason"].startswith("DatasetError: the record is not valid UTF-8")
    assert "_corrupt_record" not in routed.rejected.schema.names
    assert "_corrupt_record" not in routed.unroutable.schema.names
    assert routed.input == 4 and routed.rejected.num_rows + routed.unroutable.num_rows + routed.delivered == 4
    for key, row in (("user.1.inbox", "f:0"), ("a.b", "f:3")):
        queues = {r["queue"] for r in routed.deliveries.to_pylist() if r["message_id"] == row}
        assert queues == set(topology.route("topic", key)), key
