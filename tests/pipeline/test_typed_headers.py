"""Timestamp and decimal headers through the pipeline (issue 15, item 5): JSON headers cannot
carry them, so a Parquet ``headers`` column of Arrow struct type does. Its timestamp fields
become datetimes, its decimal fields Decimals of the column's scale, nested structs tables in
field order; a null field is an absent header. Routes equal `Topology.route` of the same dicts.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pipeline.test_transform import ROOT, as_batch
from xroute import Topology
from xroute.core.batch import BatchRouter
from xroute.pipeline.transform import Plan, route_batch
from xroute.spark.job import PipelineOptions, run_pipeline

SENT = 1_700_000_000  # seconds since the epoch
HEADERS_TYPE = pa.struct(
    [
        ("sent", pa.timestamp("us", tz="UTC")),
        ("price", pa.decimal128(9, 2)),
        ("where", pa.struct([("floor", pa.int32()), ("room", pa.string())])),
        ("kind", pa.string()),
    ]
)
HEADERS = [
    {"sent": datetime.fromtimestamp(SENT, timezone.utc), "price": Decimal("12.50"),
     "where": {"floor": 1, "room": "a"}, "kind": "sensor"},
    {"sent": datetime.fromtimestamp(SENT + 1, timezone.utc), "price": Decimal("12.5"),
     "where": None, "kind": None},  # Decimal("12.5") is stored at the column's scale: 12.50
    {"sent": None, "price": None, "where": {"floor": 2, "room": "a"}, "kind": "sensor"},
    None,
]


def topology() -> Topology:
    t = Topology()
    t.declare_exchange("h", "headers")
    for queue, arguments in {
        # RabbitMQ 3.13+ compare a timestamp header in milliseconds (3.x: in seconds)
        "at_sent": {"sent": SENT * 1000},
        "priced": {"price": Decimal("12.50")},  # scale 2, as the column's
        "priced_other_scale": {"price": Decimal("12.5")},  # scale 1: never equal
        "floor_1": {"where": {"floor": 1, "room": "a"}},
        "any_kind": {"x-match": "any", "kind": None},
        "no_price": {"x-match": "all", "price": None},
    }.items():
        t.declare_queue(queue)
        t.bind("h", queue, "", arguments)
    return t


def expected(t: Topology) -> set[tuple[str, str]]:
    # The rows as Arrow holds them (a decimal at the column's scale), null fields left out.
    found = set()
    for i, row in enumerate(typed_table().column("headers").to_pylist()):
        headers = None if row is None else {k: v for k, v in row.items() if v is not None}
        found |= {(f"messages.parquet:{i}", q) for q in t.route("h", "", headers)}
    return found


def typed_table() -> pa.Table:
    return pa.table(
        {
            "exchange": ["h"] * len(HEADERS),
            "routing_key": [""] * len(HEADERS),
            "headers": pa.array(HEADERS, HEADERS_TYPE),
        }
    )


def test_struct_headers_route_as_topology_route():
    t = topology()
    table = typed_table()
    routed = route_batch(
        BatchRouter(t),
        as_batch(table, list(range(len(HEADERS)))),
        Plan(tuple(table.column_names), root=ROOT),
    )
    got = set(
        zip(
            routed.deliveries.column("message_id").to_pylist(),
            routed.deliveries.column("queue").to_pylist(),
        )
    )
    assert got == expected(t)
    # The rule each row shows, spelled out.
    assert ("messages.parquet:0", "at_sent") in got and ("messages.parquet:1", "at_sent") not in got
    assert {("messages.parquet:0", "priced"), ("messages.parquet:1", "priced")} <= got
    assert not any(q == "priced_other_scale" for _, q in got)
    assert ("messages.parquet:0", "floor_1") in got and ("messages.parquet:2", "floor_1") not in got
    assert ("messages.parquet:1", "any_kind") not in got  # a null field is an absent header
    assert routed.rejected.num_rows == 0
    assert routed.unroutable.column("message_id").to_pylist() == ["messages.parquet:3"]


@pytest.mark.spark
def test_the_job_reads_struct_headers_from_parquet(spark, tmp_path):
    t = topology()
    definitions = t.to_definitions()
    # JSON definitions carry no Decimal: those bindings are left to the pure test above.
    definitions["bindings"] = [
        b for b in definitions["bindings"] if not b["destination"].startswith("priced")
    ]
    (tmp_path / "defs.json").write_text(json.dumps(definitions))
    pq.write_table(typed_table(), tmp_path / "messages.parquet")
    summary = run_pipeline(
        spark,
        PipelineOptions(
            definitions=str(tmp_path / "defs.json"),
            messages=str(tmp_path / "messages.parquet"),
            out=str(tmp_path / "out"),
        ),
    )
    rows = pq.read_table(tmp_path / "out" / "deliveries").to_pylist()
    got = {(r["message_id"], r["queue"]) for r in rows}
    want = expected(Topology.from_definitions(definitions))
    assert got == want and got
    assert summary["counts"]["rejected"] == 0


# ------------------------------------------------------------------ Arrow types as AMQP types

WIDTHS_TYPE = pa.struct(
    [
        ("b", pa.list_(pa.int8())),
        ("s", pa.list_(pa.int16())),
        ("i", pa.list_(pa.int32())),
        ("l", pa.list_(pa.int64())),
        ("u", pa.list_(pa.uint32())),
        ("f", pa.list_(pa.float32())),
        ("d", pa.list_(pa.float64())),
        ("x", pa.list_(pa.binary())),
        ("S", pa.list_(pa.string())),
        ("m", pa.map_(pa.string(), pa.int16())),
        ("top", pa.int64()),
        ("big", pa.uint64()),
    ]
)


def test_arrow_types_say_the_amqp_types():
    """Each Arrow width routes as its AMQP type: inside arrays the type counts, so a binding
    of ``[short(1)]`` takes only the int16 column's ``[1]`` (RabbitMQ: ``[{short, 1}]``)."""
    from xroute.core.values import binary, byte, float32, long, longstr, short, unsignedint

    one = {name: [1] for name in "bsilu"} | {"f": [1.5], "d": [1.5], "x": [b"v"], "S": ["v"]}
    rows = [one | {"m": [("k", 1)], "top": 7, "big": 5}, {"big": 2**64 - 1}]
    t = Topology()
    t.declare_exchange("h", "headers")
    bound = {
        "byte": {"x-match": "any", **{n: [byte(1)] for n in "bsilu"}},
        "short": {"x-match": "any", **{n: [short(1)] for n in "bsilu"}},
        "signedint": {"x-match": "any", **{n: [1] for n in "bsilu"}},
        "long": {"x-match": "any", **{n: [long(1)] for n in "bsilu"}},
        "unsignedint": {"x-match": "any", **{n: [unsignedint(1)] for n in "bsilu"}},
        "float32": {"x-match": "any", "f": [float32(1.5)], "d": [float32(1.5)]},
        "double": {"x-match": "any", "f": [1.5], "d": [1.5]},
        "binary": {"x-match": "any", "x": [binary(b"v")], "S": [binary(b"v")]},
        "longstr": {"x-match": "any", "x": [longstr(b"v")], "S": ["v"]},
        "map": {"m": {"k": short(1)}},
        "top": {"top": 7},  # widths do not count at the top
    }
    for queue, arguments in bound.items():
        t.declare_queue(queue)
        t.bind("h", queue, "", arguments)
    table = pa.table({"exchange": ["h", "h"], "routing_key": ["", ""],
                      "headers": pa.array(rows, WIDTHS_TYPE)})
    routed = route_batch(BatchRouter(t), as_batch(table, [0, 1]), Plan(tuple(table.column_names),
                                                                      root=ROOT))
    got = set(routed.deliveries.column("queue").to_pylist())
    assert got == set(bound), got ^ set(bound)  # each binding by exactly its own column
    # a uint64 beyond a long has no AMQP type: that record alone is refused, by name
    (reason,) = routed.rejected.column("reason").to_pylist()
    assert "18446744073709551615" in reason and "long" in reason
