"""`xroute bench seeds` end to end at the smallest size, so that the harness cannot rot.

Timings are never asserted: only that every experiment ran, checked its answers, and left a
well-formed results.json, a real PNG per experiment and a report that mentions each of them.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from xroute.bench.experiments import EXPERIMENTS, select
from xroute.bench.report import render
from xroute.cli import cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LOCAL = [module for module in EXPERIMENTS if module.NUMBER != 6]  # 6 needs a real RabbitMQ


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("seeds")
    result = CliRunner().invoke(cli, ["bench", "seeds", "--scale", "tiny", "--out", str(out)])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return out, json.loads((out / "results.json").read_text())


def test_results_json_holds_every_local_experiment(run):
    _, results = run
    assert results["scale"] == "tiny"
    assert [e["number"] for e in results["experiments"]] == [m.NUMBER for m in LOCAL]
    for field in ("cpu_model", "cores", "python", "packages", "cpu_ghz_source"):
        assert field in results["machine"], field
    for entry in results["experiments"]:
        assert "error" not in entry, entry.get("error")
        for field in ("seed", "setup", "comparison", "tables", "checks", "plot", "seconds"):
            assert field in entry, (entry["number"], field)
        assert entry["seed"]["figures"], entry["number"]
        assert entry["comparison"]["rows"], entry["number"]
        for spec in [entry["comparison"], *entry["tables"]]:
            assert all(len(row) == len(spec["columns"]) for row in spec["rows"]), spec["title"]
        assert any(isinstance(v, int) and v > 0 for v in entry["checks"].values()), entry["checks"]


def test_every_experiment_has_a_real_png(run):
    out, results = run
    for entry in results["experiments"]:
        path = out / entry["plot"]
        assert path.read_bytes()[:8] == PNG_MAGIC, path


def test_report_mentions_every_experiment_and_the_machine(run):
    out, results = run
    report = (out / "REPORT.md").read_text()
    for module in LOCAL:
        assert f"## {module.NUMBER}. {module.TITLE}" in report
        assert f"]({module.NUMBER:02d}-{module.KEY}.png)" in report
    assert results["machine"]["cpu_model"] in report
    assert "## Peers" in report
    assert report == render(results)  # the report is a pure function of results.json


def test_the_broker_experiment_needs_the_flag():
    result = CliRunner().invoke(cli, ["bench", "seeds", "--only", "6", "--scale", "tiny"])
    assert result.exit_code == 2
    assert "--with-rabbitmq" in result.output
    assert [m.NUMBER for m in select([6], with_rabbitmq=True)] == [6]
    with pytest.raises(ValueError, match="no experiment 9"):
        select([9], with_rabbitmq=False)
