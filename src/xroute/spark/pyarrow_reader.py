"""Parquet input read by the Python workers themselves, in splits of whole row groups.

Spark's own reader decodes Parquet in the JVM, turns the rows into Arrow and streams them to the
Python worker over a socket; and before that, the driver's JVM reads the footers to learn the
schema. On a 2-core machine that costs about as much CPU as the routing, and Spark lost to one
Python process (docs/pipeline.md). With this reader the driver learns the dataset from the
footers with pyarrow and cuts the files into splits of row groups, Spark schedules a task for
each few splits, and each task reads its row groups with pyarrow: the JVM moves a few hundred bytes per task, not the data.

Both readers must give the same records, so the same outputs:
- a split is a run of consecutive row groups of one file, so that its rows keep their numbers
  in the file (for generated message ids) as Spark's ``_metadata.row_index`` numbers them;
- the schema is Spark's, worked out from the Arrow types by Spark's own rules for Parquet, and
  each batch is cast to the Arrow schema Spark would have handed to ``mapInArrow``;
- a dataset this reader would read differently is refused with a reason (`survey`), and
  ``--reader auto`` leaves it to Spark: ``key=value`` partition folders, files whose schemas
  differ, INT96 timestamps and column types outside the ones mapped below. Nanosecond
  timestamps (pandas' default), which Spark's reader refuses, are read, cut to microseconds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xroute.core.errors import DatasetError
from xroute.sources.storage import Location, locate
from xroute.spark.io import (
    FILE_COLUMN,
    ROW_COLUMN,
    TASKS_PER_CORE,
    Dataset,
    ParquetFooter,
    data_files,
    dataset_root,
    partitioned,
    shown,
)

READERS = ("auto", "pyarrow", "spark")
FOOTER_READERS = 16  # footers read at once
_ASK_SPARK = "read this dataset with --reader spark"


@dataclass(frozen=True)
class Split:
    """Consecutive row groups of one Parquet file, read by one task."""

    uri: str  # the file's URI, which every executor opens (generated ids name it from this)
    row_groups: tuple[int, ...]
    first_row: int  # the file's row number of the split's first row
    rows: int


def survey(path: str) -> Dataset:
    """The Parquet dataset at ``path`` (a local path or a storage URI) from its footers alone,
    for this reader; `DatasetError` naming why when this reader would not read it as Spark
    does."""
    target = locate(path)
    if partitioned(target):
        raise DatasetError(
            f"{path!r} has key=value folders, whose names are columns: {_ASK_SPARK}", path
        )
    files = data_files(target)
    # Footers are small reads: on an object store their latency, not their size, is the cost.
    with ThreadPoolExecutor(FOOTER_READERS) as pool:
        sources = list(pool.map(open_parquet, files))
    footers, first_schema, first_file = [], None, None
    for file, source in zip(files, sources):
        schema = source.schema_arrow
        if first_schema is None:
            first_schema, first_file = schema, file
            _refuse_int96(source, file)
        elif not schema.equals(first_schema):
            raise DatasetError(
                f"{shown(file.uri)!r} and {shown(first_file.uri)!r} have different schemas: {_ASK_SPARK}",
                file.uri,
            )
        metadata = source.metadata
        footers.append(
            ParquetFooter(
                file.uri,
                tuple(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)),
            )
        )
    if first_schema is None:
        raise DatasetError(f"{path!r} holds no Parquet file", path)
    return Dataset(
        format="parquet",
        columns=tuple(first_schema.names),
        root=dataset_root(target),
        schema=spark_schema(first_schema),
        footers=tuple(footers),
    )


def open_parquet(file: Location) -> pq.ParquetFile:
    """The Parquet file, its footer read; `DatasetError` naming the file and why otherwise."""
    try:
        return pq.ParquetFile(file.filesystem.open_input_file(file.path))
    except (OSError, pa.ArrowException) as error:
        raise DatasetError(
            f"cannot read {shown(file.uri)} as Parquet: {error}", file.uri
        ) from None


def _refuse_int96(source: pq.ParquetFile, file: Location) -> None:
    # pyarrow reads INT96 timestamps as local times, Spark as instants: the types would differ.
    parquet = source.metadata.schema
    for i in range(len(parquet)):
        if parquet.column(i).physical_type == "INT96":
            raise DatasetError(
                f"{shown(file.uri)!r} has INT96 timestamps ({parquet.column(i).path}): {_ASK_SPARK}",
                file.uri,
            )


def spark_schema(schema: pa.Schema) -> Any:
    """Spark's StructType of the records, as its reader and the job's naming columns make it."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    if len(set(schema.names)) != len(schema.names):
        raise DatasetError(f"the dataset has a repeated column name: {_ASK_SPARK}", "")
    fields = [StructField(f.name, spark_type(f.type, f.name), True) for f in schema]
    fields.append(StructField(FILE_COLUMN, StringType(), False))
    fields.append(StructField(ROW_COLUMN, LongType(), False))
    return StructType(fields)


def spark_type(arrow: pa.DataType, column: str) -> Any:
    """The Spark type Spark's Parquet reader gives a column that pyarrow reads as ``arrow``;
    everything read from files is nullable, as Spark makes it."""
    from pyspark.sql import types as T

    plain = {
        pa.string(): T.StringType(),
        pa.large_string(): T.StringType(),
        pa.binary(): T.BinaryType(),
        pa.large_binary(): T.BinaryType(),
        pa.bool_(): T.BooleanType(),
        pa.int8(): T.ByteType(),
        pa.int16(): T.ShortType(),
        pa.int32(): T.IntegerType(),
        pa.int64(): T.LongType(),
        pa.float32(): T.FloatType(),
        pa.float64(): T.DoubleType(),
        pa.date32(): T.DateType(),
    }
    if arrow in plain:
        return plain[arrow]
    if pa.types.is_dictionary(arrow):
        return spark_type(arrow.value_type, column)
    if pa.types.is_decimal128(arrow):
        return T.DecimalType(arrow.precision, arrow.scale)
    if pa.types.is_timestamp(arrow):
        # Parquet's isAdjustedToUTC: an instant when pyarrow gives a time zone, else local time.
        # Spark keeps microseconds; nanoseconds (pandas' default), which its own reader
        # refuses, are cut to them (`_cast`).
        return T.TimestampType() if arrow.tz else T.TimestampNTZType()
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        return T.ArrayType(spark_type(arrow.value_type, column), True)
    if pa.types.is_map(arrow):
        key, item = spark_type(arrow.key_type, column), spark_type(arrow.item_type, column)
        return T.MapType(key, item, True)
    if pa.types.is_struct(arrow):
        return T.StructType(
            [T.StructField(f.name, spark_type(f.type, column), True) for f in arrow]
        )
    raise DatasetError(
        f"column {column!r} has type {arrow}, which Spark reads by rules of its own: {_ASK_SPARK}",
        column,
    )


def arrow_schema(dataset: Dataset, timezone: str) -> pa.Schema:
    """The Arrow schema of the batches Spark hands to ``mapInArrow`` for this dataset
    (``timezone``: the session's, which Spark gives its timestamps)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(dataset.schema, timezone=timezone)


def plan_splits(footers: Sequence[ParquetFooter], tasks: int) -> list[tuple[Split, ...]]:
    """The input of about ``tasks`` tasks of nearly equal rows: each the splits it reads, in
    file order. A row group is never cut; many small files share a task; files without a row
    group give one task that reads nothing, so that the job still runs and counts zero."""
    target = max(1, -(-sum(sum(f.row_groups) for f in footers) // max(1, tasks)))
    plan: list[tuple[Split, ...]] = []
    current: list[Split] = []
    gathered = 0  # rows of the task being gathered

    def close(footer: ParquetFooter, groups: list[int], first_row: int, rows: int) -> None:
        if groups:
            current.append(Split(footer.uri, tuple(groups), first_row, rows))

    for footer in footers:
        groups, first_row, rows, row = [], 0, 0, 0
        for index, size in enumerate(footer.row_groups):
            if size and gathered >= target:  # the task has its share: this row group starts one
                close(footer, groups, first_row, rows)
                plan.append(tuple(current))
                current, groups, rows, gathered = [], [], 0, 0
            if not groups:
                first_row = row
            groups.append(index)
            rows += size
            gathered += size
            row += size
        close(footer, groups, first_row, rows)
    if current or not plan:
        plan.append(tuple(current))
    return plan


def read_split(split: Split, schema: pa.Schema, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The split's records as Spark's reader would hand them to ``mapInArrow``: the dataset's
    columns cast to ``schema``, then the file (one dictionary entry) and each row's number."""
    columns = [f.name for f in schema if f.name not in (FILE_COLUMN, ROW_COLUMN)]
    file = locate(split.uri)
    source = open_parquet(file)
    file_name = pa.array([split.uri], pa.string())
    row = split.first_row
    for batch in _named_errors(
        source.iter_batches(batch_size=batch_rows, row_groups=list(split.row_groups), columns=columns),
        file,
    ):
        size = batch.num_rows
        arrays = [_cast(batch.column(name), schema.field(name).type, name) for name in columns]
        arrays.append(pa.DictionaryArray.from_arrays(pa.array(np.zeros(size, np.int32)), file_name))
        arrays.append(pa.array(np.arange(row, row + size, dtype=np.int64)))
        row += size
        yield pa.RecordBatch.from_arrays(arrays, names=[*columns, FILE_COLUMN, ROW_COLUMN])


def _named_errors(batches: Iterator[pa.RecordBatch], file: Location) -> Iterator[pa.RecordBatch]:
    """The batches; a file that breaks while being read (a corrupt page) is named."""
    try:
        yield from batches
    except (OSError, pa.ArrowException) as error:
        raise DatasetError(f"cannot read {shown(file.uri)} as Parquet: {error}", file.uri) from None


def _cast(column: pa.Array, wanted: pa.DataType, name: str) -> pa.Array:
    if column.type == wanted:
        return column
    try:
        # Unchecked: these casts only relabel or widen, but for nanoseconds cut to microseconds.
        return column.cast(wanted, safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise DatasetError(
            f"column {name!r} is {column.type}, which does not read as {wanted}: {error}", name
        ) from None


def splits_frame(spark: Any, tasks: int) -> Any:
    """A DataFrame of the numbers ``0..tasks-1``, one per partition: the input of functions
    that read split ``i`` of a plan (a DataFrame, not an RDD, so that Spark Connect runs it)."""
    return spark.range(0, tasks, 1, tasks)


def read_frame(spark: Any, dataset: Dataset, batch_rows: int) -> Any:
    """The surveyed ``dataset`` as a lazy DataFrame of Spark's records (the two naming columns
    included) whose tasks read their splits with pyarrow: for code that wants a DataFrame on
    storage that Spark reads only with a Hadoop connector (s3://, gs://)."""
    from xroute.spark.session import default_parallelism

    schema = arrow_schema(dataset, spark.conf.get("spark.sql.session.timeZone"))
    plan = plan_splits(dataset.footers, TASKS_PER_CORE * default_parallelism(spark))
    file_at = schema.get_field_index(FILE_COLUMN)

    def read(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in ids:
            for task in batch.column(0).to_pylist():
                for split in plan[task]:
                    for records in read_split(split, schema, batch_rows):
                        # Spark takes plain strings back from mapInArrow, not a dictionary.
                        file = records.column(file_at).dictionary_decode()
                        yield records.set_column(file_at, FILE_COLUMN, file)

    return splits_frame(spark, len(plan)).mapInArrow(read, dataset.schema)
