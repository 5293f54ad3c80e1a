"""The two ways of reading Parquet input: each task with pyarrow
(`xroute.spark.pyarrow_reader`), or Spark's JVM reader. Both must give the same records, so
outputs with the same rows and the same types; auto must leave to Spark what pyarrow would read
otherwise."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.pipeline import data
from xroute.core.errors import DatasetError
from xroute.pipeline.transform import relative_path
from xroute.spark.io import FILE_COLUMN, ROW_COLUMN, ParquetFooter, read_messages
from xroute.spark.job import PipelineOptions, run_pipeline
from xroute.spark.pyarrow_reader import (
    arrow_schema,
    plan_splits,
    read_frame,
    read_split,
    survey,
)


def write_files(folder: Path, sizes: list[tuple[str, int, int]]) -> None:
    """Parquet files of ``rows`` one-column rows in row groups of ``group``."""
    for name, rows, group in sizes:
        pq.write_table(
            pa.table({"routing_key": [f"{name}.{i}" for i in range(rows)]}),
            folder / name,
            row_group_size=group,
        )


def test_splits_cover_every_row_once_in_file_order(tmp_path):
    write_files(tmp_path, [("a.parquet", 1000, 100), ("b c.parquet", 250, 100)])
    (tmp_path / "_SUCCESS").write_text("")  # hidden, as Spark hides it
    dataset = survey(str(tmp_path))
    uris = [(tmp_path / name).as_uri() for name in ("a.parquet", "b c.parquet")]
    assert [f.uri for f in dataset.footers] == uris
    assert dataset.columns == ("routing_key",)
    plan = plan_splits(dataset.footers, tasks=4)
    # about a quarter of the rows each, whole row groups, files shared where they end
    assert [[(s.uri, s.row_groups, s.first_row, s.rows) for s in task] for task in plan] == [
        [(uris[0], (0, 1, 2, 3), 0, 400)],
        [(uris[0], (4, 5, 6, 7), 400, 400)],
        [(uris[0], (8, 9), 800, 200), (uris[1], (0, 1), 0, 200)],
        [(uris[1], (2,), 200, 50)],
    ]
    schema = pa.schema(
        [("routing_key", pa.string()), ("_xroute_file", pa.string()), ("_xroute_row", pa.int64())]
    )
    seen = []
    for split in [split for task in plan for split in task]:
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


@given(
    files=st.lists(st.lists(st.integers(0, 50), max_size=6), min_size=1, max_size=6),
    tasks=st.integers(1, 12),
)
def test_plans_read_every_row_group_once_in_order(files, tasks):
    footers = [ParquetFooter(f"file:///f{i}", tuple(sizes)) for i, sizes in enumerate(files)]
    plan = plan_splits(footers, tasks)
    assert 1 <= len(plan) <= tasks
    read = [(s.uri, group) for task in plan for s in task for group in s.row_groups]
    assert read == [(f.uri, g) for f in footers for g in range(len(f.row_groups))]
    for split in (s for task in plan for s in task):
        sizes = files[int(split.uri.removeprefix("file:///f"))]
        assert split.row_groups == tuple(range(split.row_groups[0], split.row_groups[-1] + 1))
        assert split.first_row == sum(sizes[: split.row_groups[0]])
        assert split.rows == sum(sizes[g] for g in split.row_groups)
    total = sum(map(sum, files))
    target = -(-total // tasks)
    # every task but the last has its share of rows
    assert all(sum(s.rows for s in task) >= target for task in plan[:-1])


def test_files_without_row_groups_give_one_task_that_reads_nothing(tmp_path):
    pq.ParquetWriter(tmp_path / "a.parquet", pa.schema([("routing_key", pa.string())])).close()
    assert plan_splits(survey(str(tmp_path)).footers, tasks=8) == [()]


def test_many_small_files_share_tasks(tmp_path):
    write_files(tmp_path, [(f"part-{i:03d}.parquet", 10, 10) for i in range(50)])
    plan = plan_splits(survey(str(tmp_path)).footers, tasks=4)
    assert [sum(s.rows for s in task) for task in plan] == [130, 130, 130, 110]
    assert [s.uri for task in plan for s in task] == [
        (tmp_path / f"part-{i:03d}.parquet").as_uri() for i in range(50)
    ]


@pytest.mark.parametrize(
    ("layout", "reason"),
    [
        ({"k=1/a.parquet": {"routing_key": ["x"]}}, "key=value folders"),
        (
            {"a.parquet": {"routing_key": ["x"]}, "b.parquet": {"routing_key": [1]}},
            "different schemas",
        ),
        ({"a.parquet": {"routing_key": ["x"], "n": pa.array([1], pa.uint32())}}, "type uint32"),
        ({"a.parquet": {"routing_key": ["x"], "t": pa.array([1], pa.duration("s"))}}, "duration"),
        ({"notes.txt": None}, "as Parquet"),
    ],
)
def test_what_only_spark_reads_as_spark_does_is_refused_with_a_reason(tmp_path, layout, reason):
    for name, columns in layout.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if columns is None:
            (tmp_path / name).write_text("not Parquet")
        else:
            pq.write_table(pa.table(columns), tmp_path / name)
    with pytest.raises(DatasetError, match=reason):
        survey(str(tmp_path))


def test_int96_timestamps_are_left_to_spark(tmp_path):
    table = pa.table({"routing_key": ["x"], "t": pa.array([datetime(2026, 1, 1)])})
    pq.write_table(table, tmp_path / "a.parquet", use_deprecated_int96_timestamps=True)
    with pytest.raises(DatasetError, match="INT96 timestamps"):
        survey(str(tmp_path))


def test_nanosecond_timestamps_are_read_cut_to_microseconds(tmp_path):
    """pandas writes nanoseconds, which Spark's own reader refuses; Spark keeps microseconds."""
    at = pa.array([1_767_225_600_123_456_789, None], pa.timestamp("ns"))
    pq.write_table(pa.table({"routing_key": ["a", "b"], "at": at}), tmp_path / "a.parquet")
    dataset = survey(str(tmp_path))
    schema = arrow_schema(dataset, "UTC")
    assert schema.field("at").type == pa.timestamp("us")
    ((split,),) = plan_splits(dataset.footers, tasks=1)
    (batch,) = read_split(split, schema, batch_rows=10)
    assert batch.column("at").to_pylist() == [datetime(2026, 1, 1, 0, 0, 0, 123456), None]


def varied_dataset(folder: Path) -> None:
    """Files in nested folders (two share a name), no message ids, and a column of each kind
    of type the pyarrow reader maps to Spark's; Spark hands some over as other Arrow types than
    pyarrow reads (naive millisecond timestamps, a dictionary as its values...)."""
    records = data.messages(900, seed=5)
    start = datetime(2026, 1, 2, 3, 4, 5)
    table = data.table(records).drop_columns(["message_id"])
    table = table.append_column(
        "sent_at", pa.array([start + timedelta(seconds=i) for i in range(900)], pa.timestamp("ms"))
    )
    table = table.append_column("small", pa.array(range(900), pa.int16()))
    table = table.append_column(
        "at", pa.array([start + timedelta(hours=i) for i in range(900)], pa.timestamp("us", "UTC"))
    )
    table = table.append_column("day", pa.array([date(2026, 1, 1 + i % 28) for i in range(900)]))
    table = table.append_column(
        "price", pa.array([Decimal(i) / 100 for i in range(900)], pa.decimal128(9, 2))
    )
    table = table.append_column("raw", pa.array([bytes([i % 256]) for i in range(900)]))
    table = table.append_column(
        "tags", pa.array([["a", str(i)] if i % 4 else None for i in range(900)])
    )
    table = table.append_column(
        "origin", pa.array([{"site": f"s{i % 3}", "rack": i % 5} for i in range(900)])
    )
    table = table.append_column(
        "region", pa.array([("eu", "us")[i % 2] for i in range(900)]).dictionary_encode()
    )
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


KEPT = ("sent_at", "small", "labels", "at", "day", "price", "raw", "tags", "origin", "region")


def run(spark, folder: Path, out: Path, reader: str, keep=KEPT) -> dict:
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
def test_read_frame_gives_sparks_records(spark, tmp_path):
    varied_dataset(tmp_path)
    dataset = survey(str(tmp_path))
    mine = read_frame(spark, dataset, batch_rows=64)
    theirs = read_messages(spark, str(tmp_path), "parquet").frame
    assert mine.schema == theirs.schema
    assert mine.rdd.getNumPartitions() > 3  # split by row groups, as the pipeline's tasks

    def records(frame) -> list[str]:
        # Spark writes file:/ where pyarrow writes file:///: the files are compared below.
        rows = frame.drop(FILE_COLUMN).collect()
        return sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str) for r in rows)

    assert records(mine) == records(theirs)
    def files(frame) -> set[str]:  # as generated message ids name them
        return {relative_path(r[0], dataset.root) for r in frame.select(FILE_COLUMN).distinct().collect()}

    assert files(mine) == files(theirs) == {"2026/a/part.parquet", "2026/b/part.parquet", "2027/part.parquet"}
    assert mine.select(ROW_COLUMN).distinct().count() == 400  # rows numbered within each file


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
    with pytest.raises(DatasetError, match="key=value folders"):
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
