"""The shared local Spark reaches the `s3_store` through the standard AWS variables alone, even
when the session was started before the store (its Python workers get the variables through
`share_with_spark`): tasks read a Parquet file the driver wrote and write objects the driver
reads back, in an RDD job and in ``mapInArrow``."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.s3]


def test_local_spark_tasks_read_and_write_s3(spark, s3_store) -> None:
    # `spark` comes first: the session (and its JVM) exists before the store's variables do.
    bucket = s3_store.new_bucket("local-spark")
    source = f"{bucket}/in/messages.parquet"
    pq.write_table(pa.table({"routing_key": [f"k.{i}" for i in range(100)]}), source)

    def task(index: int) -> tuple[int, int, str]:
        import os

        from pyarrow import fs

        rows = pq.read_table(source).num_rows
        store, path = fs.FileSystem.from_uri(f"{bucket}/out/task-{index}.txt")
        with store.open_output_stream(path) as sink:
            sink.write(f"task {index} read {rows}".encode())
        return index, rows, os.environ.get("AWS_ENDPOINT_URL", "")

    results = sorted(spark.sparkContext.parallelize(range(2), 2).map(task).collect())
    assert results == [(0, 100, s3_store.endpoint), (1, 100, s3_store.endpoint)]
    store = s3_store.filesystem()
    name = bucket.removeprefix("s3://")
    for index in range(2):
        with store.open_input_stream(f"{name}/out/task-{index}.txt") as written:
            assert written.read().decode() == f"task {index} read 100"


def test_map_in_arrow_reads_s3(spark, s3_store) -> None:
    bucket = s3_store.new_bucket("arrow")
    lookup = f"{bucket}/lookup.parquet"
    pq.write_table(pa.table({"word": ["a", "b", "c"]}), lookup)

    def count_known(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        known = set(pq.read_table(lookup).column("word").to_pylist())
        for batch in batches:
            words = batch.column("word").to_pylist()
            yield pa.RecordBatch.from_pydict({"known": [w in known for w in words]})

    frame = spark.createDataFrame([(w,) for w in "abxcy"], "word string").repartition(2)
    known = frame.mapInArrow(count_known, "known boolean").collect()
    assert sorted(row.known for row in known) == [False, False, True, True, True]
