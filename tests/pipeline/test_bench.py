"""The pipeline benchmark's workload and its single-process run (no Spark here)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from xroute import Topology
from xroute.bench.pipeline import EXCHANGE, Workload, ensure_workload, run_single_process


def test_single_process_run_routes_the_workload_as_the_library(tmp_path):
    workload = Workload(messages=3000, bindings=200, queues=4)
    defs, messages = ensure_workload(tmp_path / "data", workload, say=lambda _: None)
    spec = json.loads(defs.read_text())
    assert len(spec["bindings"]) == 200 and len(spec["queues"]) == 4
    again = ensure_workload(tmp_path / "data", workload, say=lambda _: None)
    assert again == (defs, messages)  # cached: made once
    result = run_single_process(defs, messages, tmp_path / "out", engine="compiled")
    topology = Topology.from_definitions(str(defs))
    keys = pq.read_table(messages).column("routing_key").to_pylist()
    assert len(keys) == 3000
    routes = [topology.route(EXCHANGE, key) for key in keys]
    counts = result["counts"]
    assert counts["input"] == 3000
    assert counts["deliveries"] == sum(len(r) for r in routes)
    assert counts["delivered"] == sum(1 for r in routes if r)
    assert counts["unroutable"] == sum(1 for r in routes if not r)
    assert counts["deliveries"] == pq.read_table(tmp_path / "out" / "deliveries").num_rows
    assert result["messages_per_s"] > 0


@pytest.mark.spark
def test_the_regex_cross_join_peer_routes_as_the_library(spark, tmp_path):
    """The peer a data engineer would write (cross join, one rlike per binding) is exact on
    the seed mix, so its figure in `xroute bench pipeline` measures a correct job."""
    from pyspark.sql import functions as F

    from xroute.bench.pipeline import regex_peer_frames

    workload = Workload(messages=300, bindings=150, queues=5)
    defs, messages = ensure_workload(tmp_path / "data", workload, say=lambda _: None)
    frame, bindings = regex_peer_frames(spark, defs, messages, 300)
    pairs = (
        frame.crossJoin(F.broadcast(bindings))
        .where(F.expr("key rlike regex"))
        .select("id", "queue")
        .distinct()
        .collect()
    )
    found: dict[int, set[str]] = {}
    for row in pairs:
        found.setdefault(row["id"], set()).add(row["queue"])
    topology = Topology.from_definitions(str(defs))
    keys = pq.read_table(messages).column("routing_key").to_pylist()
    for i, key in enumerate(keys):
        assert found.get(i, set()) == set(topology.route(EXCHANGE, key)), key
