"""``xroute verify`` and ``xroute capture`` refuse bad input in one line, exit 2, before any
Spark starts or any broker is asked."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tests.traces.test_tracing_log import DATA, sample_topology
from xroute.cli import cli


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_verify_names_a_missing_trace_and_a_file_that_is_none(tmp_path):
    defs = tmp_path / "defs.json"
    defs.write_text(json.dumps(sample_topology().to_definitions()))
    result = run("verify", "-d", str(defs), "-m", str(tmp_path / "nothing"), "-o", str(tmp_path / "o"))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"xroute: error: no trace at '{tmp_path / 'nothing'}'"]
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    result = run("verify", "-d", str(defs), "-m", str(bad), "-o", str(tmp_path / "o"))
    assert result.exit_code == 2 and f"{bad}: not a trace" in result.output
    assert not (tmp_path / "o").exists()


def test_verify_refuses_an_output_inside_its_trace(tmp_path):
    defs = tmp_path / "defs.json"
    defs.write_text(json.dumps(sample_topology().to_definitions()))
    result = run("verify", "-d", str(defs), "-m", str(DATA), "-o", str(DATA / "out"))
    assert result.exit_code == 2 and "lies inside the trace" in result.output
    assert not (DATA / "out").exists()


def test_capture_wants_an_amqp_url(tmp_path):
    result = run("capture", "http://localhost:15672", "-o", str(tmp_path / "cap"))
    assert result.exit_code == 2 and "amqp:// URL" in result.output
