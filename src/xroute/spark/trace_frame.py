"""RabbitMQ traces as a Spark DataFrame: the records of `xroute.traces.read` (one row a record,
`xroute.traces.records.SCHEMA`), read by the tasks with pyarrow from any storage.

The frame is made by `mapInArrow` over a small frame of file names (no RDD, no JVM reader), so
it works on Spark Connect as on classic Spark. Its ``routing_key``, ``exchange``, ``headers``
and ``message_id`` columns are what `xroute.spark.route` reads: publish records route as they
are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from xroute.core.errors import TraceFormatError
from xroute.sources.storage import locate
from xroute.spark.io import FILE_COLUMN, ROW_COLUMN
from xroute.traces.read import FORMATS, check_files, read_file, trace_files
from xroute.traces.records import SCHEMA

FILE_SEQ_STRIDE = 1 << 32  # a tracing-plugin log's records: file index * 2**32 + line
# Spark hands timestamps over in microseconds.
FRAME_SCHEMA = pa.schema(
    [pa.field(f.name, pa.timestamp("us", tz="UTC")) if f.name == "traced_at" else f for f in SCHEMA]
)
# With each record's file and its row in that file, as the pipeline names records.
NAMED_SCHEMA = FRAME_SCHEMA.append(pa.field(FILE_COLUMN, pa.string())).append(
    pa.field(ROW_COLUMN, pa.int64())
)


def read_trace_frame(
    spark: Any,
    source: str,
    format: str | None = None,
    record_types: Iterable[str] | None = ("publish",),
    name_rows: bool = False,
) -> Any:
    """The trace at ``source`` (a file or a folder, any storage) as a DataFrame of records of
    ``record_types`` (publish records by default; None: every record); with ``name_rows``,
    also each record's file URI and row in it (the pipeline's ``_xroute_file`` and
    ``_xroute_row``, from which it names records that have no message_id). Files that are not
    traces are refused, by name, before any task runs."""
    if format is not None and format not in FORMATS:
        raise TraceFormatError(f"unknown trace format {format!r}; known: {', '.join(FORMATS)}")
    files = trace_files(source)
    check_files(files, format)
    kinds = None if record_types is None else sorted(set(record_types))
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = NAMED_SCHEMA if name_rows else FRAME_SCHEMA

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for uri, name, index in zip(*(c.to_pylist() for c in batch.columns)):
                table = read_file(locate(uri), format, index * FILE_SEQ_STRIDE, name)
                if name_rows:  # numbered before the filter: the row in the file
                    size = table.num_rows
                    table = table.append_column(FILE_COLUMN, pa.array([uri] * size, pa.string()))
                    table = table.append_column(ROW_COLUMN, pa.array(np.arange(size, dtype=np.int64)))
                if kinds is not None:
                    table = table.filter(pc.is_in(table.column("record_type"), pa.array(kinds)))
                yield from table.cast(schema).to_batches()

    return file_frame(spark, files).mapInArrow(read, from_arrow_schema(schema))


def count_trace_records(spark: Any, source: str, format: str | None = None) -> Counter:
    """The records of the trace at ``source`` by ``record_type`` (publish, deliver, event),
    counted by the tasks apart from any routing (only the ``record_type`` column is read
    where the format allows)."""
    files = trace_files(source)
    check_files(files, format)

    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for uri, name, index in zip(*(c.to_pylist() for c in batch.columns)):
                table = read_file(locate(uri), format, index * FILE_SEQ_STRIDE, name, ["record_type"])
                found = pc.value_counts(table.column("record_type").combine_chunks()).flatten()
                yield pa.RecordBatch.from_arrays(
                    [found[0].cast(pa.string()), found[1].cast(pa.int64())],
                    ["record_type", "records"],
                )

    counted = file_frame(spark, files).mapInArrow(count, "record_type string, records long")
    rows = counted.groupBy("record_type").sum("records").collect()
    return Counter({row[0]: int(row[1]) for row in rows})


def file_frame(spark: Any, files: list[tuple[Any, str]]) -> Any:
    """A frame of the trace's files (``uri``, ``name`` as typed, ``file_index``), spread over
    the tasks: each task reads its own files."""
    return spark.createDataFrame(
        [(location.uri, name, i) for i, (location, name) in enumerate(files)],
        "uri string, name string, file_index long",
    ).repartition(max(1, min(len(files), 64)))
