"""The command line: output and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tests.test_definitions import EXPORT
from xroute import Topology
from xroute.cli import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNROUTABLE, cli


@pytest.fixture
def defs(tmp_path):
    path = tmp_path / "defs.json"
    path.write_text(json.dumps(EXPORT))
    return str(path)


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_route_prints_queues_sorted(defs):
    result = run("route", "--definitions", defs, "--exchange", "logs", "--key", "a.b.c", "--header", 'CC=["x.hdr"]', "--header", "k=1")
    assert result.exit_code == EXIT_OK, result.output
    assert result.stdout.splitlines() == ["q1", "q2"]


def test_route_json(defs):
    result = run("route", "-d", defs, "-e", "logs", "-k", "a.b.c", "--json")
    assert result.exit_code == EXIT_OK
    assert json.loads(result.stdout) == {"exchange": "logs", "routing_key": "a.b.c", "queues": ["q1"], "routed": True}


def test_unroutable_exits_3(defs):
    result = run("route", "-d", defs, "-e", "multi", "-k", ":nobody")
    assert result.exit_code == EXIT_UNROUTABLE
    assert result.stdout == ""


@pytest.mark.parametrize(
    "args,message",
    [
        (["-e", "nope", "-k", "a"], "unknown exchange 'nope'"),
        (["-e", "logs", "-k", "a" * 300], "300 bytes"),
        (["-e", "logs", "-k", "a", "--header", 'CC="a"'], "CC"),
    ],
)
def test_bad_input_exits_2_with_one_line(defs, args, message):
    result = run("route", "-d", defs, *args)
    assert result.exit_code == EXIT_BAD_INPUT
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_error_in_process_leaves_the_callers_processes_running(defs):
    # The last CI run: a command failing inside pytest (with pyspark imported) stopped every
    # process pytest had started, the session's Spark JVM and S3 store included, and 51 tests
    # after it failed. Only the command line, which owns its process, stops what it started.
    import subprocess

    import pyspark  # noqa: F401  (the cleanup only runs where Spark was imported)

    caller_started = subprocess.Popen(["sleep", "60"])
    try:
        result = run("route", "-d", defs, "-e", "nope", "-k", "a")
        assert result.exit_code == EXIT_BAD_INPUT
        assert caller_started.poll() is None, "the command stopped its caller's process"
    finally:
        caller_started.kill()
        caller_started.wait()


def test_route_needs_a_key_and_routes_the_empty_one_when_asked(defs):
    missing = run("route", "-d", defs, "-e", "logs")
    assert missing.exit_code == EXIT_BAD_INPUT and "'-k'" in missing.stderr
    topology = Topology.from_definitions(defs)
    empty = run("route", "-d", defs, "-e", "logs", "-k", "")
    expected = sorted(topology.route("logs", ""))
    assert empty.exit_code == (EXIT_OK if expected else EXIT_UNROUTABLE)
    assert empty.stdout.splitlines() == expected


def test_bad_definitions_exit_2(tmp_path):
    path = tmp_path / "defs.json"
    path.write_text("{oops")
    result = run("route", "-d", str(path), "-e", "x", "-k", "a")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "not valid JSON" in result.stderr


def test_header_values_are_json_when_they_parse(defs):
    assert run("route", "-d", defs, "-e", "logs", "-k", "x.hdr", "-H", "k=1").exit_code == EXIT_OK
    # "1" as text is not the integer 1 for a headers exchange
    assert run("route", "-d", defs, "-e", "logs", "-k", "x.hdr", "-H", 'k="1"').exit_code == EXIT_UNROUTABLE


def test_demo_routes_the_smart_home_example():
    result = run("demo")
    assert result.exit_code == EXIT_OK, result.output
    assert "floor_1.bedroom.temperature" in result.stdout
    assert "dead_letters" in result.stdout


def test_an_error_raised_while_ctrl_c_is_handled_is_ctrl_c_one_line_and_exit_130():
    """py4j, interrupted in a call, fails to cancel it and raises its own error with the
    KeyboardInterrupt as context: the command still says it was stopped, exit 130."""
    import click

    from xroute.cli.app import XRouteGroup

    def interrupted_call() -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("Gateway must be connected to send cancel cmd.") from None

    group = XRouteGroup(name="x")
    group.add_command(click.Command("cut", callback=interrupted_call))
    group.add_command(click.Command("fails", callback=lambda: 1 / 0))
    runner = CliRunner()
    stopped = runner.invoke(group, ["cut"])
    assert stopped.exit_code == EXIT_INTERRUPTED
    assert stopped.output.strip() == "xroute: stopped (Ctrl-C)"
    other = runner.invoke(group, ["fails"])  # any other error is not taken for Ctrl-C
    assert isinstance(other.exception, ZeroDivisionError)


_FINALIZER_SWALLOWS_CTRL_C = """
import os, signal, sys, time
import xroute_launch
from xroute.cli.app import cli

@cli.command("probe")
def probe():
    class Finalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C lands while a finalizer runs
            time.sleep(0.01)
    Finalized()
    time.sleep(30)
    print("ran on after Ctrl-C")

sys.argv = ["xroute", "probe"]
xroute_launch.main()  # as the `xroute` script starts
"""


def test_a_ctrl_c_that_lands_in_a_finalizer_still_stops_the_command():
    """Python swallows a KeyboardInterrupt raised inside ``__del__`` ("Exception ignored"):
    the command delivers it again, so it stops with one line and exit 130, not runs on."""
    done = subprocess.run([sys.executable, "-c", _FINALIZER_SWALLOWS_CTRL_C],
                          capture_output=True, text=True, timeout=60)
    assert "ran on" not in done.stdout, done.stderr
    assert done.returncode == EXIT_INTERRUPTED, done.stderr
    assert done.stderr.strip() == "xroute: stopped (Ctrl-C)"


_CTRL_C_IN_A_STRING_EXEC = """
import sys
import xroute_launch
from xroute.cli.app import cli

@cli.command("probe")
def probe():
    # Ctrl-C lands while a string exec runs, as while dataclasses build their methods on import
    exec("import signal; signal.raise_signal(signal.SIGINT)", {})
    print("ran on after Ctrl-C")

sys.argv = ["xroute", "probe"]
xroute_launch.main()
"""


def test_a_ctrl_c_that_ends_a_string_exec_exits_130_under_python_m(tmp_path):
    """CPython records a KeyboardInterrupt that ends a string `exec` as unhandled, even once
    the command has caught it, and under ``python -m`` then ends the process by SIGINT (-2,
    seen in CI 1 s into `xroute pipeline`): the command clears the record, exit 130."""
    (tmp_path / "ctrl_c_in_exec.py").write_text(_CTRL_C_IN_A_STRING_EXEC)
    done = subprocess.run([sys.executable, "-m", "ctrl_c_in_exec"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert "ran on" not in done.stdout, done.stderr
    assert done.returncode == EXIT_INTERRUPTED, done.stderr
    assert done.stderr.strip() == "xroute: stopped (Ctrl-C)"
