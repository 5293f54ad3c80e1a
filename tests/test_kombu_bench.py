"""``xroute bench kombu`` end to end on a tiny workload (memory transport): results and plots
are written, xroute's side is checked exact, and bad options are usage errors. No timing is
asserted."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from xroute.bench.kombu import amqp_keys
from xroute.cli import cli


def test_bench_kombu_writes_checked_results(tmp_path):
    result = CliRunner().invoke(cli, [
        "bench", "kombu", "--sizes", "20,60", "--transports", "memory",
        "--max-messages", "60", "--max-seconds", "2", "--out", str(tmp_path),
    ])
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "results.json").read_text())
    runs = {(r["bindings"], r["mode"]): r for r in results["runs"]}
    assert set(runs) == {(20, "kombu"), (20, "xroute"), (60, "kombu"), (60, "xroute")}
    for (size, mode), run in runs.items():
        assert run["checked"] == run["messages"] > 0
        assert 0 <= run["routing_share"] <= 1
        if mode == "xroute":
            assert run["wrong_routes"] == 0
    assert set(results["ratios"]["memory"]) == {"20", "60"}
    # The machine as measured, nothing assumed of it.
    assert f"{os.cpu_count()} cores" in results["meta"]["note"]
    assert "load average" in results["meta"]["note"]
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "messages_per_s.png", "publish_time_split.png"]


def test_bench_kombu_refuses_bad_options(tmp_path):
    runner = CliRunner()
    for args in (["--sizes", "ten"], ["--transports", "sqs"], ["--sizes", "0"]):
        result = runner.invoke(cli, ["bench", "kombu", "--out", str(tmp_path), *args])
        assert result.exit_code == 2, (args, result.output)


def test_amqp_keys_let_hash_stand_for_no_word():
    keys = amqp_keys(["a.#", "*.b"], 200, seed=3)
    assert "a" in keys  # '#' as zero words: the case kombu's own routing misses
    assert all(k.startswith("a") or k.endswith(".b") for k in keys)
