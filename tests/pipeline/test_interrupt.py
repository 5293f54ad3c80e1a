"""Ctrl-C on ``xroute pipeline`` while Spark routes: one line, exit 130, and the cleanup of any
failed run (no OUT left when the run made it)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pipeline import data
from xroute.bench.owned import Owned
from xroute.cli import EXIT_INTERRUPTED

pytestmark = pytest.mark.spark
XDIST_GROUP = "jvm-drivers"  # drivers and clusters of its own: beside the shared session (tests/conftest.py)
ROWS = 2_000_000  # enough routing for the signal to land while the job runs


def test_ctrl_c_while_routing_is_one_line_and_exit_130(tmp_path):
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    keys = pa.array(["a.b.c", "x.y", "user.1.inbox", "z"] * (ROWS // 4))
    pq.write_table(pa.table({"routing_key": keys}), tmp_path / "m.parquet")
    out = tmp_path / "out"
    command = [
        sys.executable, "-c", "from xroute.cli import main; main()",
        "pipeline", "-d", "defs.json", "-m", "m.parquet", "-o", str(out), "-e", "topic",
        "--no-progress",
    ]
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    process = Owned("driver").popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (out / "_temporary").exists() and process.poll() is None:
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)  # as the terminal sends Ctrl-C to the driver
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
        else:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the driver's JVM, if it outlived it
            except ProcessLookupError:
                pass
    assert process.returncode == EXIT_INTERRUPTED, stderr[-3000:]
    assert stderr.strip().splitlines() == ["xroute: stopped (Ctrl-C)"], stderr[-3000:]
    assert not out.exists(), "the run made OUT, and a stopped run removes it"


def _session_processes(session: int) -> list[str]:
    """The processes of a session, as 'pid command' lines (zombies left out)."""
    left = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            command = open(f"/proc/{entry}/cmdline").read().replace("\0", " ")
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            left.append(f"{entry} {command[:100]}")
    return left


@pytest.mark.parametrize(
    "delay, remote",
    [(0.3, None), (1.0, None), (3.0, None), (6.0, None), (4.0, "local[2]")],
    ids=["0.3s", "1s", "3s", "6s", "connect-local-4s"],
)
def test_ctrl_c_during_start_up_leaves_no_process_running(tmp_path, delay, remote):
    # Issue 38: a SIGINT 2-4 s into `xroute pipeline` left Spark's JVM running (3 of 3), and
    # one at about 7 s printed py4j's tracebacks. At each moment: one line, 130, nothing left.
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    pq.write_table(pa.table({"routing_key": pa.array(["a.b.c", "x.y"] * 500)}),
                   tmp_path / "m.parquet")
    command = [
        # As the `xroute` script starts (xroute_launch), so that Ctrl-C while Python still
        # imports is one line too.
        sys.executable, "-m", "xroute_launch", "pipeline", "-d",
        "defs.json", "-m", "m.parquet", "-o", str(tmp_path / "out"), "-e", "topic",
        "--no-progress",
    ] + (["--remote", remote] if remote else [])
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_GATEWAY_PORT", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    process = Owned("driver").popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        time.sleep(delay)
        finished_first = process.poll() is not None
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
        left = _session_processes(process.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    if finished_first:
        pytest.skip(f"the run ended within {delay} s, before the signal (a faster machine)")
    # What the run did says more than what it left: the code and stderr first.
    assert process.returncode == EXIT_INTERRUPTED, (process.returncode, left, stderr[-3000:])
    assert stderr.strip().splitlines() == ["xroute: stopped (Ctrl-C)"], stderr[-3000:]
    assert left == [], left
