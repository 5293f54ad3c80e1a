"""The two ways of reading Parquet input: each task with pyarrow (`xroute.pipeline.splits`) or
Spark's JVM reader. Both must give the same records, so the same outputs, byte for byte in
content and type; auto must fall back to Spark where pyarrow would read something else."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pipeline import data
from xroute.errors import DatasetError
from xroute.pipeline.job import PipelineOptions, run_pipeline
from xroute.pipeline.splits import plan_splits, read_split


def write_files(folder: Path, sizes: list[tuple[str, int, int]]) -> list[str]:
    """Parquet files of ``rows`` one-column rows in row groups of ``group``; their URIs."""
    uris = []
    for name, rows, group in sizes:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.table({"routing_key": [f"{name}.{i}" for i in range(rows)]}),
            path,
            row_group_size=group,
        )
        uris.append(path.as_uri())
    return uris


def test_splits_cover_every_row_once_in_file_order(tmp_path):
    uris = write_files(tmp_path, [("a.parquet", 1000, 100), ("b c.parquet", 250, 100)])
    splits = plan_splits(uris, ["routing_key"], tasks=4)
    # about a quarter of the rows each, whole row groups, never across files
    assert [(s.uri, s.row_groups, s.first_row, s.rows) for s in splits] == [
        (uris[0], (0, 1, 2, 3), 0, 400),
        (uris[0], (4, 5, 6, 7), 400, 400),
        (uris[0], (8, 9), 800, 200),
        (uris[1], (0, 1, 2), 0, 250),
    ]
    schema = pa.schema(
        [("routing_key", pa.string()), ("_xroute_file", pa.string()), ("_xroute_row", pa.int64())]
    )
    seen = []
    for split in splits:
        for batch in read_split(split, schema, batch_rows=64):
            assert batch.num_rows <= 64
            keys = batch.column("routing_key").to_pylist()
            rows = batch.column("_xroute_row").to_pylist()
            files = batch.column("_xroute_file").to_pylist()
            seen += list(zip(files, rows, keys))
    expected = [
        (uri, i, f"{name}.{i}")
        for uri, (name, rows) in zip(uris, [("a.parquet", 1000), ("b c.parquet", 250)])
        for i in range(rows)
    ]
    assert seen == expected


def test_a_file_without_a_column_is_refused_by_name(tmp_path):
    uris = write_files(tmp_path, [("a.parquet", 10, 5)])
    with pytest.raises(DatasetError, match="has no column 'exchange'.*--reader spark"):
        plan_splits(uris, ["routing_key", "exchange"], tasks=2)


def varied_dataset(folder: Path) -> None:
    """Files in nested folders (two share a name), no message ids, and columns whose Parquet
    types Spark reads as other Arrow types (uint32, millisecond and naive timestamps, a map)."""
    records = data.messages(900, seed=5)
    start = datetime(2026, 1, 2, 3, 4, 5)
    table = data.table(records).drop_columns(["message_id"])
    table = table.append_column(
        "sent_at", pa.array([start + timedelta(seconds=i) for i in range(900)], pa.timestamp("ms"))
    )
    table = table.append_column("small", pa.array(range(900), pa.uint32()))
    table = table.append_column(
        "labels",
        pa.array(
            [[("n", str(i))] if i % 3 else None for i in range(900)],
            pa.map_(pa.string(), pa.string()),
        ),
    )
    for part, (first, stop) in {
        "2026/a/part.parquet": (0, 300),
        "2026/b/part.parquet": (300, 700),
        "2027/part.parquet": (700, 900),
    }.items():
        (folder / part).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.slice(first, stop - first), folder / part, row_group_size=70)


def run(spark, folder: Path, out: Path, reader: str, keep=("sent_at", "small", "labels")) -> dict:
    (folder.parent / "defs.json").write_text(json.dumps(data.definitions()))
    return run_pipeline(
        spark,
        PipelineOptions(
            definitions=str(folder.parent / "defs.json"),
            messages=str(folder),
            out=str(out),
            keep_columns=tuple(keep),
            reader=reader,
        ),
    )


def contents(out: Path, name: str) -> tuple[pa.Schema, list[str]]:
    table = pq.read_table(out / name)
    rows = sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())
    return table.schema, rows


@pytest.mark.spark
def test_both_readers_give_the_same_outputs(spark, tmp_path):
    source = tmp_path / "in"
    varied_dataset(source)
    summaries = {}
    for reader in ("pyarrow", "spark"):
        summaries[reader] = run(spark, source, tmp_path / reader, reader)
        assert summaries[reader]["reader"] == reader
    for name in ("deliveries", "unroutable", "rejected"):
        assert contents(tmp_path / "pyarrow", name) == contents(tmp_path / "spark", name), name
    for field in ("counts", "queues", "bindings", "top_unroutable_keys", "rejected_by_error"):
        assert summaries["pyarrow"][field] == summaries["spark"][field], field
    ids = {m["message_id"] for m in pq.read_table(tmp_path / "pyarrow" / "unroutable").to_pylist()}
    ids |= {m["message_id"] for m in pq.read_table(tmp_path / "pyarrow" / "deliveries").to_pylist()}
    # the ids name each file by its path under the dataset folder, so equal names stay apart
    assert {i.rsplit(":", 1)[0] for i in ids} == {
        "2026/a/part.parquet",
        "2026/b/part.parquet",
        "2027/part.parquet",
    }
    assert summaries["pyarrow"]["partitions"] > 3


@pytest.mark.spark
def test_auto_leaves_partition_folders_to_spark(spark, tmp_path):
    records = [r for r in data.messages(300, seed=8) if r["exchange"]]  # a folder name each
    table = data.table(records)
    flat = tmp_path / "flat"
    flat.mkdir()
    pq.write_table(table, flat / "messages.parquet")
    # the same records, their exchange named by the folder each is in
    source = tmp_path / "in"
    for exchange in sorted({r["exchange"] for r in records}):
        rows = [i for i, r in enumerate(records) if r["exchange"] == exchange]
        folder = source / f"exchange={exchange}"
        folder.mkdir(parents=True)
        pq.write_table(table.take(rows).drop_columns(["exchange"]), folder / "part.parquet")
    with pytest.raises(DatasetError, match="has no column 'exchange'"):
        run(spark, source, tmp_path / "forced", "pyarrow", keep=())
    summary = run(spark, source, tmp_path / "auto", "auto", keep=())
    assert summary["reader"] == "spark"
    want = run(spark, flat, tmp_path / "want", "auto", keep=())
    assert want["reader"] == "pyarrow"
    assert summary["counts"] == want["counts"]
    for name in ("deliveries", "rejected"):
        assert contents(tmp_path / "auto", name)[1] == contents(tmp_path / "want", name)[1]


@pytest.mark.spark
def test_pyarrow_reads_parquet_only(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    (source / "messages.csv").write_text("exchange,routing_key\namq.topic,a.b\n")
    with pytest.raises(
        DatasetError, match="--reader pyarrow reads Parquet only; this dataset is csv"
    ):
        run(spark, source, tmp_path / "out", "pyarrow", keep=())
    assert run(spark, source, tmp_path / "auto", "auto", keep=())["reader"] == "spark"
