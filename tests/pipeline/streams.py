"""What the `xroute stream` tests share: files landed as a source sees them, the records the
stream must write, the check that each was written exactly once, the command line and the
in-process options."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tests.pipeline import data
from xroute.pipeline.stream_commit import committed_batches, committed_files
from xroute.sources.storage import locate
from xroute.spark.stream import StreamOptions

PER_FILE = 400
SRC = Path(__file__).resolve().parents[2] / "src"


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
