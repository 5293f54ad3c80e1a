"""`xroute stream` in a subprocess killed mid-batch (its driver, or the Spark Connect server
under it) or stopped by Ctrl-C, then restarted: every message is written exactly once.

These tests spend their time in drivers they start themselves, so they form a JVM group of
their own (``XDIST_GROUP``): under ``make test`` they run beside the tests that use the shared
Spark session, in the other worker (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline import data
from tests.pipeline.streams import (
    PER_FILE,
    assert_exactly_once,
    batch_of,
    cli,
    cli_env,
    land,
    options,
)
from xroute import Topology
from xroute.bench.owned import Owned
from xroute.pipeline.stream_commit import MARKERS, committed_batches
from xroute.sources.storage import locate
from xroute.spark.stream import run_stream

pytestmark = pytest.mark.spark
XDIST_GROUP = "jvm-drivers"


# ---------------------------------------------------------------------- crash and restart




@pytest.mark.parametrize("storage", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_driver_killed_mid_batch_then_restarted_loses_and_doubles_nothing(
    storage, spark, tmp_path, request
):
    """Files land while the stream runs; the driver is SIGKILLed while a batch is staged but
    not committed; a restart on the same checkpoint (--available-now) finishes the job.

    The restart runs in this process on the shared ``spark`` session (a driver of its own, as
    a restarted process has: the killed one left only its checkpoint and output behind), which
    saves a JVM start; the command line's own --available-now restart is run by the Connect
    test below."""
    extra: dict[str, str] = {}
    if storage == "s3":
        store = request.getfixturevalue("s3_store")
        out = f"{store.new_bucket('stream')}/out"
        extra = store.env
    else:
        out = str(tmp_path / "out")
    crash = Crash(tmp_path, out, ["--master", "local[2]"], extra)
    killed_in = crash.run_until_mid_batch(lambda: os.killpg(crash.first.pid, signal.SIGKILL))
    assert crash.first.returncode == -signal.SIGKILL
    crash.restart_in_process_and_check(killed_in, spark)


def test_connect_server_killed_mid_batch_then_restarted_loses_and_doubles_nothing(
    connect_server, tmp_path
):
    """On Spark Connect the driver is the server, and foreachBatch runs in its Python workers:
    the server is SIGKILLed while a batch is staged but not committed (the client then fails);
    another server (the run's shared one, which never saw this stream) and a restart of the
    command line on the same checkpoint finish the job."""
    from tests.services.connect import ConnectServer

    first_server = ConnectServer(tmp_path / "server-1").start()
    try:
        # The client retries a lost server for XROUTE_CONNECT_PATIENCE_S, then fails: 1 s
        # here (at 5 s it took 37 s to exit, pyspark's backoff of 5 retries, 50 ms x4 each).
        patience = {"XROUTE_CONNECT_PATIENCE_S": "1"}
        crash = Crash(tmp_path, str(tmp_path / "out"), ["--remote", first_server.url], patience)
        killed_in = crash.run_until_mid_batch(first_server.kill, exit_wait_s=300)
    finally:
        first_server.stop()
    assert crash.first.returncode == 2, crash.log_tail()
    assert "lost the Spark Connect server" in crash.log_tail().strip().splitlines()[-1]
    crash.restart_and_check(killed_in, ["--remote", connect_server.url])


class Crash:
    """A stream run in a subprocess over files that land while it runs, killed mid-batch, then
    restarted with --available-now; the outputs checked exactly once."""

    # Enough files that one batch is still in flight when the stream has committed another
    # (the first run takes one file a batch); the restart takes the rest in one batch after
    # redoing the killed one, as Spark's offset log planned it (a batch costs 2 s here).
    FILES = 5

    def __init__(
        self, tmp_path: Path, out: str, session: list[str], env: dict[str, str] | None = None
    ) -> None:
        self.tmp_path, self.out, self.env = tmp_path, out, cli_env(env)
        self.source = tmp_path / "in"
        self.source.mkdir()
        definitions = tmp_path / "defs.json"
        definitions.write_text(json.dumps(data.definitions()))
        self.records_by_file = [
            batch_of(i * PER_FILE, i, generated=(i == 2)) for i in range(self.FILES)
        ]
        self.landed = 0
        for _ in range(2):
            self.land_next()
        self.arguments = ["-d", str(definitions), "-m", str(self.source), "-o", out]
        self.arguments += ["--checkpoint", str(tmp_path / "checkpoint")]
        self.log = tmp_path / "first.log"
        with self.log.open("w") as log:
            self.first = Owned("driver").popen(
                cli("stream", *self.arguments, *session, "--max-files", "1",
                    "--trigger-interval", "200ms"),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,  # its own group: the JVM and Python workers die with it
            )

    def land_next(self) -> None:
        i = self.landed
        land(self.source, f"f{i:03d}.parquet", self.records_by_file[i], generated=(i == 2))
        self.landed += 1

    def log_tail(self) -> str:
        return self.log.read_text()[-3000:]

    def run_until_mid_batch(self, kill: Any, exit_wait_s: float = 120) -> int:
        """Land files one batch ahead of the stream; ``kill()`` once a batch is staged and its
        marker not written; the id of that batch, once the stream's process has ended (by
        itself within ``exit_wait_s``, else SIGKILLed)."""
        target = locate(self.out)
        killed_in = None
        try:
            deadline = time.monotonic() + 400
            while killed_in is None and time.monotonic() < deadline:
                assert self.first.poll() is None, self.log_tail()
                committed = committed_batches(target) if target.exists() else {}
                if self.landed < self.FILES and len(committed) >= self.landed - 1:
                    self.land_next()
                following = max(committed, default=-1) + 1
                if committed and target.child("_temporary", f"batch-{following}").exists():
                    if not target.child(MARKERS, f"{following}.json").exists():
                        kill()
                        killed_in = following
                time.sleep(0.005)
        finally:
            if self.first.poll() is None and killed_in is None:
                os.killpg(self.first.pid, signal.SIGKILL)
            try:
                self.first.wait(exit_wait_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.first.pid, signal.SIGKILL)
                self.first.wait(60)
        assert killed_in is not None, "the stream never had a batch in flight to kill"
        assert not target.child(MARKERS, f"{killed_in}.json").exists()
        return killed_in

    def restart_and_check(self, killed_in: int, session: list[str]) -> None:
        """Land the remaining files, run the stream again until they are all routed, and check
        every message was written exactly once."""
        while self.landed < self.FILES:
            self.land_next()
        second = subprocess.run(
            cli("stream", *self.arguments, *session, "--max-files", str(self.FILES),
                "--available-now"),
            capture_output=True,
            text=True,
            timeout=600,
            env=self.env,
        )
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
        self.check(killed_in)

    def restart_in_process_and_check(self, killed_in: int, spark: Any) -> None:
        """As `restart_and_check`, with the restart run by `run_stream` on ``spark`` in this
        process (the same options as the command line's, --available-now)."""
        while self.landed < self.FILES:
            self.land_next()
        restart = options(
            self.tmp_path,
            out=self.out,
            checkpoint=str(self.tmp_path / "checkpoint"),
            max_files=self.FILES,
        )
        # An s3:// output: the s3_store fixture has put the store's variables in this
        # process's environment and the session's workers' already.
        run_stream(spark, restart, say=lambda _: None)
        self.check(killed_in)

    def check(self, killed_in: int) -> None:
        """Every message written exactly once, the killed batch redone, no staging left."""
        records = [r for chunk in self.records_by_file for r in chunk]
        expected = data.expected(Topology.from_definitions(data.definitions()), records)
        assert_exactly_once(self.out, expected, records)
        target = locate(self.out)
        markers = committed_batches(target)
        assert killed_in in markers, "the batch killed mid-way was redone"
        inputs = sum(len(m["inputs"]) for m in markers.values())
        assert inputs == self.FILES, "each file in one batch"
        assert not target.child("_temporary").exists(), "no staging left behind"


def test_ctrl_c_stops_after_the_current_batch(spark, tmp_path):
    """SIGINT to the whole process group (as a terminal's Ctrl-C sends it) mid-stream: the
    run ends cleanly (exit 0, no staging left); a restart routes the rest, each message once
    (run in this process on the shared session: a JVM start saved)."""
    source, checkpoint, out = tmp_path / "in", tmp_path / "checkpoint", str(tmp_path / "out")
    source.mkdir()
    definitions = tmp_path / "defs.json"
    definitions.write_text(json.dumps(data.definitions()))
    chunks = [batch_of(i * PER_FILE, i) for i in range(4)]
    for i, chunk in enumerate(chunks):
        land(source, f"f{i:03d}.parquet", chunk)
    arguments = ["-d", str(definitions), "-m", str(source), "-o", out, "--max-files", "1"]
    arguments += ["--checkpoint", str(checkpoint), "--master", "local[2]"]
    log = (tmp_path / "first.log").open("w")
    first = Owned("driver").popen(
        cli("stream", *arguments, "--trigger-interval", "1s"),
        stdout=log,
        stderr=subprocess.STDOUT,
        env=cli_env(),
        start_new_session=True,
    )
    try:
        marker = locate(out).child(MARKERS, "0.json")
        deadline = time.monotonic() + 300
        while not marker.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), (tmp_path / "first.log").read_text()[-3000:]
        os.killpg(first.pid, signal.SIGINT)
        first.wait(120)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(60)
        log.close()
    text = (tmp_path / "first.log").read_text()
    assert first.returncode == 0, text[-3000:]
    assert "stopped (Ctrl-C)" in text, text[-3000:]
    stopped_at = committed_batches(out)
    assert len(stopped_at) < len(chunks), "it stopped before routing everything"
    assert not (tmp_path / "out" / "_temporary").exists(), "a batch was left half done"

    # --available-now, the rest in one batch
    run_stream(spark, options(tmp_path, max_files=len(chunks)), say=lambda _: None)
    records = [r for chunk in chunks for r in chunk]
    topology = Topology.from_definitions(data.definitions())
    assert_exactly_once(out, data.expected(topology, records), records)
