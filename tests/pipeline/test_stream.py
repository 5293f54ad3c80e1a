"""`xroute stream`: every message of every file that lands in the source is written exactly
once, through a driver killed mid-batch, replays and restarts, and its deliveries equal
`Topology.route_message`; bad input is rejected with reasons, or stops the stream naming the
file. The crash tests run the CLI in a subprocess (it is SIGKILLed); the others run in this
process on the shared ``spark`` fixture."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pipeline import data
from xroute import Topology
from xroute.core.errors import DatasetError, OutputExists
from xroute.pipeline.stream_commit import MARKERS, committed_batches, committed_files
from xroute.sources.storage import locate
from xroute.spark.stream import StreamOptions, run_stream

pytestmark = pytest.mark.spark

PER_FILE = 400
SRC = Path(__file__).resolve().parents[2] / "src"


# ---------------------------------------------------------------------- helpers


def land(source: Path, name: str, records: list[dict[str, Any]], generated: bool = False) -> None:
    """Write a Parquet file into the source as it would land: whole, by a rename (Spark skips
    names starting with '.'). ``generated``: without message ids (the stream names them
    file:row)."""
    table = data.table(records)
    if generated:
        table = table.set_column(0, "message_id", pa.nulls(len(records), pa.string()))
    partial = source / f".{name}.tmp"
    pq.write_table(table, partial)
    os.replace(partial, source / name)


def batch_of(start: int, file_number: int, generated: bool = False) -> list[dict[str, Any]]:
    """The records of one file; with generated ids, the ids the stream will give them."""
    records = data.messages(PER_FILE, seed=100 + file_number)
    for row, record in enumerate(records):
        record["message_id"] = (
            f"f{file_number:03d}.parquet:{row}" if generated else f"m{start + row}"
        )
    return records


def committed_rows(out: str, output: str) -> list[dict[str, Any]]:
    """The rows of ``output`` over every committed batch (the folders a reader should read)."""
    rows = []
    for part in committed_files(out, output):
        with part.filesystem.open_input_file(part.path) as source:
            rows.extend(pq.read_table(source).to_pylist())
    return rows


def assert_exactly_once(out: str, expected: data.Expected, records: list[dict[str, Any]]) -> None:
    """Every message in exactly one output, once; deliveries as `Topology.route_message` says."""
    deliveries = committed_rows(out, "deliveries")
    unroutable = committed_rows(out, "unroutable")
    rejected = committed_rows(out, "rejected")
    pairs = Counter((r["message_id"], r["queue"]) for r in deliveries)
    doubled = {pair: n for pair, n in pairs.items() if n > 1}
    assert not doubled, f"deliveries written more than once: {list(doubled.items())[:5]}"
    assert set(pairs) == expected.deliveries
    assert Counter(r["message_id"] for r in unroutable) == Counter(expected.unroutable)
    assert Counter(r["message_id"] for r in rejected) == Counter(list(expected.rejected))
    assert {r["message_id"]: r["reason"].split(":")[0] for r in rejected} == expected.rejected
    seen = {m for m, _ in pairs} | {r["message_id"] for r in unroutable + rejected}
    assert seen == {r["message_id"] for r in records}, "a message is missing from every output"
    markers = committed_batches(out)
    for batch_id, marker in markers.items():
        c = marker["counts"]
        assert c["input"] == c["delivered"] + c["unroutable"] + c["rejected"], batch_id
    summary = json.loads(locate(out).child("summary.json").read_bytes())
    assert summary["counts"] == expected.counts(len(records))
    assert [b["batch_id"] for b in summary["batches"]] == list(markers)


def cli(*arguments: str) -> list[str]:
    """The command line of ``xroute`` from this checkout."""
    return [sys.executable, "-c", "from xroute.cli import main; main()", *arguments]


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    env.update(extra or {})
    return env


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

    FILES = 8

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
        self.arguments += ["--checkpoint", str(tmp_path / "checkpoint"), "--max-files", "1"]
        self.log = tmp_path / "first.log"
        with self.log.open("w") as log:
            self.first = subprocess.Popen(
                cli("stream", *self.arguments, *session, "--trigger-interval", "200ms"),
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
            cli("stream", *self.arguments, *session, "--available-now"),
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
            self.tmp_path, out=self.out, checkpoint=str(self.tmp_path / "checkpoint")
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


# ---------------------------------------------------------------------- in-process runs


def options(tmp_path: Path, **changes: Any) -> StreamOptions:
    settings = {
        "definitions": str(tmp_path / "defs.json"),
        "source": str(tmp_path / "in"),
        "out": str(tmp_path / "out"),
        "checkpoint": str(tmp_path / "checkpoint"),
        "max_files": 1,
        "available_now": True,
        **changes,
    }
    return StreamOptions(**settings)


def landed_files(tmp_path: Path, files: int = 3) -> list[dict[str, Any]]:
    """The test definitions and ``files`` files landed where `options` looks (one batch each);
    their records."""
    source = tmp_path / "in"
    source.mkdir()
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    chunks = [batch_of(i * PER_FILE, i) for i in range(files)]
    for i, chunk in enumerate(chunks):
        land(source, f"f{i:03d}.parquet", chunk)
    return [r for chunk in chunks for r in chunk]


def forget_commit(checkpoint: Path, batch_id: int) -> None:
    """Make Spark's checkpoint as a driver killed before committing ``batch_id`` leaves it."""
    (checkpoint / "commits" / str(batch_id)).unlink()
    (checkpoint / "commits" / f".{batch_id}.crc").unlink(missing_ok=True)


def other_definitions() -> dict[str, Any]:
    """The test topology with one more queue bound to every topic message."""
    topology = Topology.from_definitions(data.definitions(), engine="reference")
    topology.declare_queue("everything")
    topology.bind("topic", "everything", "#")
    return topology.to_definitions()


def test_second_run_routes_only_new_files_and_replays_are_exact(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    chunks = [batch_of(i * PER_FILE, i) for i in range(5)]
    for i in range(2):
        land(source, f"f{i:03d}.parquet", chunks[i])
    run_stream(spark, options(tmp_path), say=lambda _: None)
    first = committed_batches(str(tmp_path / "out"))
    assert list(first) == [0, 1]

    # New files, and a new definitions file that lands after the first batch of this run.
    for i in range(2, 5):
        land(source, f"f{i:03d}.parquet", chunks[i])
    # A file copied with its old modification time kept (Spark's default skips it).
    month_ago = time.time() - 30 * 86400
    os.utime(source / "f002.parquet", (month_ago, month_ago))
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        if len(lines) == 1:
            (tmp_path / "defs.json").write_text(json.dumps(other_definitions()))

    run_stream(spark, options(tmp_path, reload_definitions=True), say=say)
    out = str(tmp_path / "out")
    markers = committed_batches(out)
    assert list(markers) == [0, 1, 2, 3, 4]
    routed_by_second = {name for b in (2, 3, 4) for name in markers[b]["inputs"]}
    assert {Path(name).name for name in routed_by_second} == {
        "f002.parquet",
        "f003.parquet",
        "f004.parquet",
    }
    assert {b: markers[b]["counts"]["input"] for b in markers} == {b: PER_FILE for b in range(5)}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [c["batch_id"] for c in summary["definitions_changes"]] == [0, 3]
    assert any("new definitions" in line for line in lines)

    # Deliveries follow the definitions in force for each batch.
    old = Topology.from_definitions(data.definitions())
    new = Topology.from_definitions(other_definitions())
    before = [r for chunk in chunks[:3] for r in chunk]
    after = [r for chunk in chunks[3:] for r in chunk]
    expected = data.expected(old, before)
    later = data.expected(new, after)
    expected.deliveries |= later.deliveries
    expected.unroutable |= later.unroutable
    expected.rejected.update(later.rejected)
    assert "everything" in {q for _, q in later.deliveries}
    assert_exactly_once(out, expected, before + after)

    # Spark lost its commit of batch 4 after the marker was written: the replay is skipped.
    forget_commit(tmp_path / "checkpoint", 4)
    lines.clear()
    run_stream(spark, options(tmp_path), say=lines.append)
    assert any("already committed: skipped" in line for line in lines), lines
    assert_exactly_once(out, expected, before + after)

    # Killed after publishing batch 4 but before its marker: the replay deletes and redoes it.
    forget_commit(tmp_path / "checkpoint", 4)
    (tmp_path / "out" / MARKERS / "4.json").unlink()
    stray = tmp_path / "out" / "deliveries" / "batch_id=4" / "part-stray.parquet"
    pq.write_table(data.table(chunks[4][:3]).select(["message_id"]), stray)
    run_stream(spark, options(tmp_path), say=lambda _: None)
    assert not stray.exists()
    assert_exactly_once(out, expected, before + after)


def test_a_new_checkpoint_on_an_existing_output_is_refused(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    land(source, "f000.parquet", batch_of(0, 0))
    run_stream(spark, options(tmp_path), say=lambda _: None)
    with pytest.raises(OutputExists, match="another stream"):
        run_stream(spark, options(tmp_path, checkpoint=str(tmp_path / "new")), say=print)


def test_bad_records_are_rejected_with_reasons(spark, tmp_path):
    """A corrupt line, a file with the wrong columns, malformed headers: rejected, each with
    its reason; nothing skipped."""
    source = tmp_path / "in"
    source.mkdir()
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    good = [
        {"message_id": "g1", "exchange": "topic", "routing_key": "a.b", "headers": None},
        {"message_id": "g2", "exchange": "direct", "routing_key": "a", "headers": None},
    ]
    (source / "a.jsonl").write_text("\n".join(json.dumps(r) for r in good) + "\n")
    line = {"exchange": "topic", "routing_key": "a"}
    (source / "b.jsonl").write_text(
        "\n".join(
            [
                json.dumps({**line, "message_id": "h1", "headers": '{"CC": ["a"'}),
                json.dumps({**line, "message_id": "h2", "headers": json.dumps({"CC": "a.b"})}),
                "this is not JSON at all",
            ]
        )
        + "\n"
    )
    run_stream(spark, options(tmp_path), say=lambda _: None)
    # A file that arrives with other columns than the stream's schema: they read as nulls.
    wrong_columns = {"id": "w1", "exchange": "topic", "topic": "a.b"}
    (source / "c.jsonl").write_text(json.dumps(wrong_columns) + "\n")
    run_stream(spark, options(tmp_path), say=lambda _: None)
    out = str(tmp_path / "out")
    rejected = {r["message_id"]: r["reason"] for r in committed_rows(out, "rejected")}
    assert rejected["h1"].startswith("InvalidHeaders: headers are not valid JSON")
    assert rejected["h2"].startswith("InvalidHeaders")
    corrupt = [reason for mid, reason in rejected.items() if mid.startswith("b.jsonl:")]
    assert corrupt == ["DatasetError: the record is not valid JSON: 'this is not JSON at all'"]
    assert rejected["c.jsonl:0"].startswith("InvalidRoutingKey")
    wanted = data.expected(Topology.from_definitions(data.definitions()), good)
    delivered = {(r["message_id"], r["queue"]) for r in committed_rows(out, "deliveries")}
    assert delivered == wanted.deliveries
    assert {r["message_id"] for r in committed_rows(out, "unroutable")} == wanted.unroutable
    totals = json.loads((tmp_path / "out" / "summary.json").read_text())["counts"]
    assert totals["input"] == 6 and totals["rejected"] == 4


def test_a_file_spark_cannot_read_stops_the_stream_naming_it(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    land(source, "f000.parquet", batch_of(0, 0))
    run_stream(spark, options(tmp_path), say=lambda _: None)
    (source / "f001.parquet").write_bytes(b"PAR1 this is not a parquet file at all")
    land(source, "f002.parquet", batch_of(PER_FILE, 2))
    named = r"cannot read .*/in/f001\.parquet: it is not a Parquet file"
    with pytest.raises(DatasetError, match=named) as caught:
        run_stream(spark, options(tmp_path), say=lambda _: None)
    assert caught.value.path.endswith("f001.parquet")
    markers = committed_batches(str(tmp_path / "out"))
    assert list(markers) == [0], "the batch with the bad file is not committed"
    # Replaced by a readable file, the batch is replayed, and the stream goes on.
    (source / "f001.parquet").unlink()
    land(source, "f001.parquet", batch_of(2 * PER_FILE, 1))
    run_stream(spark, options(tmp_path), say=lambda _: None)
    records = batch_of(0, 0) + batch_of(2 * PER_FILE, 1) + batch_of(PER_FILE, 2)
    topology = Topology.from_definitions(data.definitions())
    assert_exactly_once(str(tmp_path / "out"), data.expected(topology, records), records)


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
    first = subprocess.Popen(
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

    run_stream(spark, options(tmp_path), say=lambda _: None)  # --available-now
    records = [r for chunk in chunks for r in chunk]
    topology = Topology.from_definitions(data.definitions())
    assert_exactly_once(out, data.expected(topology, records), records)


def test_a_stop_asked_by_code_is_not_reported_as_ctrl_c(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    for i in range(3):
        land(source, f"f{i:03d}.parquet", batch_of(i * PER_FILE, i))
    lines: list[str] = []
    stop = threading.Event()

    def say(line: str) -> None:
        lines.append(line)
        stop.set()  # right after the first batch, as xroute bench stream stops its stream

    run_stream(spark, options(tmp_path), say=say, stop=stop)
    assert any(line.startswith("stopped ") for line in lines), lines
    assert not any("Ctrl-C" in line for line in lines), lines


def test_sigint_while_batches_follow_each_other_stops_before_the_next(spark, tmp_path):
    """Ctrl-C during a backlog (--available-now, one file per batch): the batch that would
    start next is not run; the run returns normally; a restart routes the rest once."""
    source = tmp_path / "in"
    source.mkdir()
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    chunks = [batch_of(i * PER_FILE, i) for i in range(4)]
    for i, chunk in enumerate(chunks):
        land(source, f"f{i:03d}.parquet", chunk)
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        if len(lines) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C, right after the first batch

    run_stream(spark, options(tmp_path), say=say)
    assert any(line.startswith("stopped (Ctrl-C)") for line in lines), lines
    out = str(tmp_path / "out")
    assert 1 <= len(committed_batches(out)) < len(chunks), lines
    assert not (tmp_path / "out" / "_temporary").exists()
    run_stream(spark, options(tmp_path), say=lambda _: None)
    records = [r for chunk in chunks for r in chunk]
    topology = Topology.from_definitions(data.definitions())
    assert_exactly_once(out, data.expected(topology, records), records)


def test_schema_given_before_any_file_lands(spark, tmp_path):
    """An empty source needs --schema (and --format); with them the stream starts, routes
    nothing, and routes the files that land later; a bad DDL is refused, naming it."""
    source = tmp_path / "in"
    source.mkdir()
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    with pytest.raises(DatasetError, match="has no files yet to take a schema from"):
        run_stream(spark, options(tmp_path), say=print)
    with pytest.raises(DatasetError, match="'routing_key strin' is not a Spark DDL schema"):
        run_stream(spark, options(tmp_path, schema="routing_key strin"), say=print)
    ddl = "message_id string, exchange string, routing_key string, headers string, size long"
    given = options(tmp_path, schema=ddl, format="parquet")
    summary = run_stream(spark, given, say=print)
    assert summary["counts"]["input"] == 0 and summary["batches"] == []
    records = batch_of(0, 0)
    land(source, "f000.parquet", records)
    run_stream(spark, given, say=lambda _: None)
    topology = Topology.from_definitions(data.definitions())
    assert_exactly_once(str(tmp_path / "out"), data.expected(topology, records), records)
