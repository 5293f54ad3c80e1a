"""RabbitMQ's own traces as the messages of ``xroute pipeline``, ``xroute diff -m`` and
``xroute stream`` (``--format firehose|rabbitmq-tracing``, or detected with ``auto``).

The records are read by `xroute.traces.read` (through `xroute.spark.trace_frame` on Spark).
Only *publish* records are messages: each is routed once, to its exchange with its routing key
and, as ``CC``, the record's other routing keys (the broker's CC and BCC, in order), so that one
message fans out exactly as the broker routed it. *deliver* and *event* records are counted
apart, never routed: ``input`` counts publishes, and ``trace_records_skipped`` (summary.json)
the rest, so that input = delivered + unroutable + rejected still holds.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from typing import Any

import pyarrow.parquet as pq

from xroute.core.errors import DatasetError, TraceFormatError
from xroute.sources.storage import Location, locate
from xroute.spark import io
from xroute.traces.read import FORMATS as TRACE_FORMATS
from xroute.traces.read import check_files, detect, trace_files
from xroute.traces.records import PUBLISH, SCHEMA

__all__ = [
    "TRACE_FORMATS", "check_trace", "is_trace", "message_format", "read_trace_dataset",
    "publish_records", "read_trace_stream", "refuse_schema", "skipped_records",
]

# Fields of deliver records only (null on a publish); ``queue`` also names an output column.
DELIVERY_FIELDS = ("queue", "redelivered")
# The columns of a trace as a message dataset (what --keep-columns may name).
TRACE_COLUMNS = tuple(name for name in SCHEMA.names if name not in DELIVERY_FIELDS)
HEAD_BYTES = 1 << 20  # of the first file, read to detect a trace (a JSON line whole, mostly)
# The keys that tell a JSON line of a trace from a message of the user's own.
_FIREHOSE_KEYS = {"record_type", "routing_keys", "routed_queues"}
_TRACING_KEYS = {"type", "routing_keys", "exchange"}


def is_trace(fmt: str) -> bool:
    """Whether ``fmt`` names one of RabbitMQ's trace formats."""
    return fmt in TRACE_FORMATS


def message_format(path: str, fmt: str = "auto") -> str:
    """The format of the messages at ``path``: ``fmt`` itself, or for ``auto`` a trace format
    when the first file is certainly a trace, else the format its suffixes name
    (`xroute.spark.io.detect_format`)."""
    if is_trace(fmt):
        return fmt
    if fmt != "auto" and fmt not in io.FORMATS:
        raise DatasetError(
            f"unknown format {fmt!r}; use auto, {', '.join((*io.FORMATS, *TRACE_FORMATS))}", fmt
        )
    if fmt == "auto":
        found = detect_trace(path)
        if found is not None:
            return found
    return io.detect_format(path, fmt)


def detect_trace(path: str) -> str | None:
    """``firehose`` or ``rabbitmq-tracing`` when the first data file under ``path`` is certainly
    such a trace (a Parquet file with every trace column, a JSON line with a trace record's keys,
    or the tracing plugin's text log), else None: a dataset of the user's own stays one."""
    target = locate(path)
    if not target.exists():
        return None
    files = io.data_files(target)
    if not files:
        return None
    first = files[0]
    with first.filesystem.open_input_file(first.path) as stream:
        head = stream.read(HEAD_BYTES)
        try:
            kind = detect(head) if head.strip() else None
        except TraceFormatError:
            return None
        if kind == "parquet":
            stream.seek(0)
            try:
                names = set(pq.ParquetFile(stream).schema_arrow.names)
            except Exception:  # not readable as Parquet: the dataset's reader says why
                return None
            return "firehose" if set(SCHEMA.names) <= names else None
    if kind == "tracing-text":
        return "rabbitmq-tracing"
    if kind in ("firehose-json", "tracing-json"):
        try:
            record = json.loads(head.lstrip().split(b"\n", 1)[0])
        except ValueError:
            return None
        if isinstance(record, dict) and _FIREHOSE_KEYS <= record.keys():
            return "firehose"
        if (
            isinstance(record, dict)
            and _TRACING_KEYS <= record.keys()
            and record["type"] in ("published", "received")
        ):
            return "rabbitmq-tracing"
    return None


def check_trace(
    path: str, fmt: str, keep_columns: tuple[str, ...] = (), names: io.Columns = io.Columns()
) -> None:
    """Refuse, before Spark starts, a trace with a file not in ``fmt`` (`TraceFormatError`
    naming the file), or ``keep_columns`` or routing columns it does not have."""
    check_files(trace_files(path), fmt)
    io.check_column_names(TRACE_COLUMNS, None, keep_columns, names, source=f"the trace {path!r}")


def read_trace_dataset(spark: Any, path: str, fmt: str) -> io.Dataset:
    """The publish records of the trace at ``path`` as a message dataset: columns
    `TRACE_COLUMNS` (``routing_key``, ``exchange``, ``headers`` with the extra keys as ``CC``,
    ``message_id``, ``correlation_id``, ``timestamp``, ...), each record named by its file
    and its row there."""
    from xroute.spark.trace_frame import read_trace_frame

    frame = read_trace_frame(spark, path, fmt, (PUBLISH,), name_rows=True).drop(*DELIVERY_FIELDS)
    return io.Dataset(
        fmt, TRACE_COLUMNS, io.dataset_root(locate(path)), frame.schema, frame=frame
    )


def skipped_records(spark: Any, path: str, fmt: str) -> tuple[int, dict[str, int]]:
    """The trace's publish records, and the records of every other type (not routed),
    counted apart from the routing."""
    from xroute.spark.trace_frame import count_trace_records

    counts: Counter = count_trace_records(spark, path, fmt)
    published = counts.pop(PUBLISH, 0)
    return published, {kind: counts[kind] for kind in sorted(counts)}


def read_trace_stream(
    spark: Any, path: str, fmt: str, max_files: int = 10, names: io.Columns = io.Columns()
) -> io.Dataset:
    """The capture files arriving under the folder ``path`` as a streaming dataset of every
    record (`publish_records` takes each micro-batch's messages apart): Spark's file stream
    source reads `xroute capture`'s Parquet files, each once, when it appears, which a capture
    writes whole (under a ``_`` name, then renamed). The tracing plugin's logs cannot be
    streamed: the plugin appends to a log in place, and a file read when it appears would be
    read half (route finished logs with ``xroute pipeline``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from xroute.spark.trace_frame import FRAME_SCHEMA

    check_trace_stream(path, fmt)
    dataset = io.read_message_stream(
        spark, path, "parquet", from_arrow_schema(FRAME_SCHEMA), max_files, names
    )
    return replace(dataset, format=fmt, columns=TRACE_COLUMNS)


def check_trace_stream(
    path: str, fmt: str, keep_columns: tuple[str, ...] = (), names: io.Columns = io.Columns()
) -> None:
    """Refuse a trace the stream cannot read (`TraceFormatError` saying why): the tracing
    plugin's logs, and a file present that is not a capture's Parquet file."""
    if fmt != "firehose":
        raise TraceFormatError(
            f"the stream cannot read {fmt} traces: the tracing plugin appends to its log files "
            "in place, and the stream reads each file once, when it appears, so a log still "
            "being written would be routed half. Route finished logs with xroute pipeline "
            "--format rabbitmq-tracing, or stream the firehose captured by xroute capture"
        )
    target = locate(path)
    if target.is_dir():
        for file in io.data_files(target):
            check_stream_file(file)
    io.check_column_names(
        TRACE_COLUMNS, None, keep_columns, names, source=f"the stream source {path!r}"
    )


def refuse_schema(schema: str | None) -> None:
    """A trace's records have the trace's own schema: a ``--schema`` for one is a mistake."""
    if schema is not None:
        raise DatasetError(
            "--schema does not apply to a RabbitMQ trace: its records have the trace's own "
            "columns (docs/traces.md)",
            schema,
        )


def check_stream_file(file: Location) -> None:
    """Refuse a file the trace stream cannot read: only `xroute capture`'s Parquet files
    stream (a JSON Lines capture is read whole by ``xroute pipeline``)."""
    name = io.shown(file.uri)
    check_files([(file, name)], "firehose")
    with file.filesystem.open_input_file(file.path) as stream:
        if stream.read(4) != b"PAR1":  # an empty file too: Spark cannot read it as Parquet
            raise TraceFormatError(
                f"{name}: the stream reads firehose captures as Parquet (xroute capture's "
                "files); route a JSON Lines capture with xroute pipeline --format firehose"
            )


def publish_records(frame: Any) -> tuple[Any, dict[str, int], list[str]]:
    """A micro-batch of trace records split: its publish records as messages (without the
    deliveries' fields), the count of every other record type (not routed), and the files the
    batch read (a file of deliveries only is read all the same)."""
    from pyspark.sql import functions as F

    kinds = frame.groupBy("record_type", io.FILE_COLUMN).count().collect()
    skipped: Counter = Counter()
    for kind, _, n in kinds:
        if kind != PUBLISH:
            skipped[kind or "unknown"] += n
    files = sorted({row[1] for row in kinds})
    messages = frame.filter(F.col("record_type") == PUBLISH).drop(*DELIVERY_FIELDS)
    return messages, {kind: skipped[kind] for kind in sorted(skipped)}, files
