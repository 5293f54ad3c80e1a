"""RabbitMQ traces as a Spark DataFrame: the records of `xroute.traces.read` (one row a record,
`xroute.traces.records.SCHEMA`), read by the tasks with pyarrow from any storage.

The frame is made by `mapInArrow` over a small frame of file names (no RDD, no JVM reader), so
it works on Spark Connect as on classic Spark. Its ``routing_key``, ``exchange``, ``headers``
and ``message_id`` columns are what `xroute.spark.route` reads: publish records route as they
are.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from xroute.errors import TraceFormatError
from xroute.storage import locate
from xroute.traces.read import FORMATS, check_files, read_file, trace_files
from xroute.traces.records import SCHEMA

FILE_SEQ_STRIDE = 1 << 32  # a tracing-plugin log's records: file index * 2**32 + line
# Spark hands timestamps over in microseconds.
FRAME_SCHEMA = pa.schema(
    [pa.field(f.name, pa.timestamp("us", tz="UTC")) if f.name == "traced_at" else f for f in SCHEMA]
)


def read_trace_frame(
    spark: Any,
    source: str,
    format: str | None = None,
    record_types: Iterable[str] | None = ("publish",),
) -> Any:
    """The trace at ``source`` (a file or a folder, any storage) as a DataFrame of records of
    ``record_types`` (publish records by default; None: every record). Files that are not
    traces are refused, by name, before any task runs."""
    if format is not None and format not in FORMATS:
        raise TraceFormatError(f"unknown trace format {format!r}; known: {', '.join(FORMATS)}")
    files = trace_files(source)
    check_files(files, format)
    kinds = None if record_types is None else sorted(set(record_types))
    from pyspark.sql.pandas.types import from_arrow_schema

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for uri, name, index in zip(*(c.to_pylist() for c in batch.columns)):
                table = read_file(locate(uri), format, index * FILE_SEQ_STRIDE, name)
                if kinds is not None:
                    table = table.filter(pc.is_in(table.column("record_type"), pa.array(kinds)))
                yield from table.cast(FRAME_SCHEMA).to_batches()

    return file_frame(spark, files).mapInArrow(read, from_arrow_schema(FRAME_SCHEMA))


def file_frame(spark: Any, files: list[tuple[Any, str]]) -> Any:
    """A frame of the trace's files (``uri``, ``name`` as typed, ``file_index``), spread over
    the tasks: each task reads its own files."""
    return spark.createDataFrame(
        [(location.uri, name, i) for i, (location, name) in enumerate(files)],
        "uri string, name string, file_index long",
    ).repartition(max(1, min(len(files), 64)))
