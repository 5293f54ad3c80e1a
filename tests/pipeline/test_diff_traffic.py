"""``xroute diff`` on Spark: planted changes on random topologies, every message routed
through both; the counts, per-queue gains and losses and the changes/ rows must equal a
message-by-message comparison with `Topology.route`."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tests import diff_planted as planted
from xroute import OutputExists, Topology
from xroute.cli import EXIT_DIFF_CHANGED, EXIT_OK, cli
from xroute.spark.diff import DiffOptions, compare, route_both, run_diff, summarise
from xroute.spark.io import Columns

pytestmark = pytest.mark.spark

# Seeds whose planted change shows in the traffic (an alternate exchange matters only to the
# messages no binding of 't' matches: some draws have none).
SEEDS = {"alternate": "traffic-alternate-4"}
SCHEMA = "message_id string, exchange string, routing_key string, headers string"


def frame_of(spark, msgs):
    rows = [(m, e, k, None if h is None else json.dumps(h)) for m, e, k, h in msgs]
    return spark.createDataFrame(rows, SCHEMA)


@pytest.mark.parametrize("change", planted.CHANGES)
def test_planted_change_counts_equal_the_library(spark, change):
    rng = random.Random(SEEDS.get(change, f"traffic-{change}"))
    export = planted.random_export(rng)
    new_export = planted.plant(export, change, rng)
    msgs = planted.messages(rng, 400)
    old, new = Topology.from_definitions(export), Topology.from_definitions(new_export)
    expected = planted.oracle(old, new, msgs)

    compared = compare(route_both(frame_of(spark, msgs), export, new_export, engine="trie")).persist()
    got = summarise(compared, old, new, samples=3)

    counts = got.to_dict()["counts"]
    for name in ("messages", "changed", "gained_a_queue", "lost_a_queue", "became_unroutable", "became_routable", "refused_before", "refused_after"):
        assert counts[name] == expected["counts"][name], (change, name, counts, dict(expected["counts"]))
    assert {q: (g, n) for q, g, n in got.per_queue} == expected["per_queue"]
    changed_rows = {
        r["message_id"]: (r["queues_before"], r["queues_after"])
        for r in compared.where("changed").select("message_id", "queues_before", "queues_after").collect()
    }
    assert changed_rows == expected["changes"]
    assert len(got.samples) == min(3, len(changed_rows))
    for sample in got.samples:
        assert (sample["queues_before"], sample["queues_after"]) == expected["changes"][sample["message_id"]]
    compared.unpersist()
    assert counts["changed"] > 0  # the planted change shows in this traffic


def test_run_diff_writes_changes_report_and_plot_and_the_cli_exits_1(spark, tmp_path):
    rng = random.Random("e2e-3")  # a seed whose renamed queue gets traffic (14 messages change)
    export = planted.random_export(rng)
    new_export = planted.plant(export, "rename-queue", rng)
    msgs = planted.messages(rng, 300)
    # No message_id column: records are named file:row, as the pipeline names them.
    table = pa.table({
        "exchange": [e for _, e, _, _ in msgs],
        "routing_key": [k for _, _, k, _ in msgs],
        "headers": [None if h is None else json.dumps(h) for *_, h in msgs],
    })
    pq.write_table(table, tmp_path / "log.parquet")
    old_path, new_path = tmp_path / "old.json", tmp_path / "new.json"
    old_path.write_text(json.dumps(export))
    new_path.write_text(json.dumps(new_export))
    expected = planted.oracle(Topology.from_definitions(export), Topology.from_definitions(new_export), msgs)
    by_row = {f"log.parquet:{m[1:]}": v for m, v in expected["changes"].items()}

    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["diff", str(old_path), str(new_path), "-m", str(tmp_path / "log.parquet"), "-o", str(out), "--json"])
    assert result.exit_code == EXIT_DIFF_CHANGED, result.output
    report = json.loads((out / "diff.json").read_text())
    assert report["traffic"]["counts"]["changed"] == expected["counts"]["changed"] > 0
    assert (out / "diff.png").stat().st_size > 0
    changes = pq.read_table(out / "changes").to_pylist()
    assert {r["message_id"]: (r["queues_before"], r["queues_after"]) for r in changes} == by_row
    assert report["static"]["queues_removed"] and report["traffic"]["samples"]

    with pytest.raises(OutputExists):
        run_diff(spark, DiffOptions(old=str(old_path), new=str(new_path), messages=str(tmp_path / "log.parquet"), out=str(out)))
    same = CliRunner().invoke(cli, ["diff", str(old_path), str(old_path), "-m", str(tmp_path / "log.parquet"), "-o", str(out), "--overwrite"])
    assert same.exit_code == EXIT_OK, same.output
    assert pq.read_table(out / "changes").num_rows == 0


def test_named_columns_diff_as_the_standard_ones(spark, tmp_path):
    rng = random.Random("e2e-3")
    export = planted.random_export(rng)
    new_export = planted.plant(export, "rename-queue", rng)
    msgs = planted.messages(rng, 300)
    columns = {
        "exchange": [e for _, e, _, _ in msgs],
        "routing_key": [k for _, _, k, _ in msgs],
        "headers": [None if h is None else json.dumps(h) for *_, h in msgs],
    }
    pq.write_table(pa.table(columns), tmp_path / "plain.parquet")
    # The same log under other names, with a decoy 'routing_key' column that must be ignored.
    pq.write_table(
        pa.table({"ex": columns["exchange"], "rk": columns["routing_key"], "h": columns["headers"],
                  "routing_key": ["decoy"] * len(msgs)}),
        tmp_path / "named.parquet",
    )
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(export))
    new.write_text(json.dumps(new_export))
    plain = run_diff(spark, DiffOptions(old=str(old), new=str(new), messages=str(tmp_path / "plain.parquet"), out=str(tmp_path / "p")))
    named = run_diff(spark, DiffOptions(
        old=str(old), new=str(new), messages=str(tmp_path / "named.parquet"), out=str(tmp_path / "n"),
        columns=Columns("rk", "ex", "h"),
    ))
    assert named.to_dict()["counts"] == plain.to_dict()["counts"] and plain.changed > 0
    assert named.per_queue == plain.per_queue
