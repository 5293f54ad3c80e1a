"""scripts/client_suites/report.py: how the client suites' runs on RabbitMQ and xroute are
judged, reruns included (the suites themselves run in CI, `make client-suites`)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "scripts" / "client_suites" / "report.py"
spec = importlib.util.spec_from_file_location("client_suites_report", SCRIPT)
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)


def _write(results: Path, name: str, outcomes: dict[str, str]) -> None:
    lines = []
    for test, outcome in outcomes.items():
        node = f"/suite/{test}"
        lines += [json.dumps({"test": test, "node": node, "when": when,
                              "outcome": outcome if when == "call" else "passed"})
                  for when in ("setup", "call", "teardown")]
    (results / f"s-{name}.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture
def results(tmp_path: Path) -> Path:
    _write(tmp_path, "rabbitmq", {"t.py::ok": "passed", "t.py::flaky_here": "passed",
                                  "t.py::flaky_there": "passed", "t.py::broken": "passed",
                                  "t.py::big[1]": "passed", "t.py::fails_there": "failed"})
    _write(tmp_path, "xroute", {"t.py::ok": "passed", "t.py::flaky_here": "failed",
                                "t.py::flaky_there": "failed", "t.py::broken": "failed",
                                "t.py::big[1]": "failed", "t.py::fails_there": "failed"})
    return tmp_path


@pytest.fixture
def allow(tmp_path: Path) -> Path:
    path = tmp_path / "allow.txt"
    path.write_text("# comment\ns::t.py::big[*]  # a version difference\n")
    return path


def _pending(results: Path, allow: Path) -> set[str]:
    judged = report.judge(results, report.allowed(allow), "s")
    return {node.rsplit("/", 1)[1] for node in judged["pending_xroute"]}


def test_reruns_then_verdicts(results, allow, capsys):
    # Before any rerun: the three unexcused suspects are pending; the allowed one is not.
    assert _pending(results, allow) == {"t.py::flaky_here", "t.py::flaky_there", "t.py::broken"}
    _write(results, "xroute-rerun1", {"t.py::flaky_here": "passed", "t.py::flaky_there": "failed",
                                      "t.py::broken": "failed"})
    assert _pending(results, allow) == {"t.py::flaky_there", "t.py::broken"}
    _write(results, "xroute-rerun2", {"t.py::flaky_there": "failed", "t.py::broken": "failed"})
    _write(results, "rabbitmq-rerun1", {"t.py::flaky_there": "failed", "t.py::broken": "passed"})
    _write(results, "rabbitmq-rerun2", {"t.py::broken": "passed"})
    assert _pending(results, allow) == {"t.py::broken"}
    assert report.main(results, allow) == 1
    out = capsys.readouterr().out
    summary = json.loads(out[: out.index("\nrerun:")])
    assert summary["suites"]["s"] == {
        "passed_on_rabbitmq": 5, "passed_on_xroute": 1, "allowed": 1, "passed_on_rerun": 1,
        "flaky_on_rabbitmq": 1, "failed": 1, "collected": 6,
    }
    assert summary["reruns"]["s::t.py::flaky_there"] == {
        "xroute": ["failed", "failed", "failed"], "rabbitmq": ["passed", "failed"],
        "verdict": "flaky on RabbitMQ",
    }
    assert summary["reruns"]["s::t.py::flaky_here"]["verdict"] == "passed on rerun"
    assert "FAILED on xroute, passed on RabbitMQ: s::t.py::broken" in out


def test_a_run_killed_mid_test_counts_it_failed(tmp_path):
    (tmp_path / "s-xroute.jsonl").write_text(
        json.dumps({"test": "t.py::cut", "node": "/suite/t.py::cut", "when": "setup",
                    "outcome": "passed"}) + "\n" + '{"test": "t.py::ha'  # cut short
    )
    assert report.outcomes(tmp_path / "s-xroute.jsonl") == {"/suite/t.py::cut": ("t.py::cut", "failed")}
