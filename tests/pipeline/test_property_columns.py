"""The pipeline reads message_id, correlation_id and timestamp columns as the messages' basic
properties, for the types that hash or pick on them (no Spark: the routing step alone)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from xroute import Topology
from xroute.core.batch import BatchRouter
from xroute.pipeline.transform import properties_of, route_records

EXPORT = Path(__file__).parents[1] / "data" / "plugins.json"


def test_property_columns_reach_the_exchange_types():
    topology = Topology.from_definitions(EXPORT)
    router = BatchRouter(topology)
    ids = [f"customer-{i}" for i in range(60)]
    batch = pa.RecordBatch.from_pydict(
        {
            "routing_key": ["k"] * 60,
            "exchange": ["by-customer"] * 30 + ["any"] * 30,
            "message_id": ids,
            "correlation_id": [None] * 60,
        }
    )
    properties = properties_of(router, batch)
    assert properties[0] == {"message_id": "customer-0"}
    outcome = route_records(
        router, batch.column("routing_key"), batch.column("exchange"), properties=properties
    )
    got: dict[int, set[str]] = {}
    for row, queue in zip(outcome.delivery_rows.tolist(), outcome.queue_ids.tolist()):
        got.setdefault(row, set()).add(router.queues[queue])
    expected = {
        row: set(topology.route(exchange, "k", properties={"message_id": ids[row]}))
        for row, exchange in enumerate(batch.column("exchange").to_pylist())
    }
    assert got == expected
    # the message id decides, so both shards get some of them
    assert {q for queues in got.values() for q in queues} == {"shard-a", "shard-b"}


def test_standard_topologies_read_no_property_columns():
    topology = Topology()
    topology.declare_exchange("t", "topic")
    router = BatchRouter(topology)
    batch = pa.RecordBatch.from_pydict({"message_id": ["a"]})
    assert properties_of(router, batch) is None
