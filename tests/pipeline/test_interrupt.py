"""Ctrl-C on ``xroute pipeline`` while Spark routes: one line, exit 130, and the cleanup of any
failed run (no OUT left when the run made it)."""

from __future__ import annotations

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
from xroute.cli import EXIT_INTERRUPTED

pytestmark = pytest.mark.spark
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
    process = subprocess.Popen(
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
