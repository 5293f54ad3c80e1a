"""`xroute stream` in this process on the shared ``spark`` fixture: a second run routes only
new files and replays are exact, bad input is rejected with reasons or stops the stream naming
the file, a stop asked by code or by SIGINT ends after the current batch. The runs killed
mid-batch are in test_stream_crash.py."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.pipeline import data
from tests.pipeline.streams import (
    PER_FILE,
    assert_exactly_once,
    batch_of,
    committed_rows,
    forget_commit,
    land,
    options,
)
from xroute import Topology
from xroute.core.errors import DatasetError, OutputExists
from xroute.pipeline.stream_commit import MARKERS, committed_batches
from xroute.spark.stream import run_stream

pytestmark = pytest.mark.spark


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

