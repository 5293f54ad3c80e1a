"""Checks made before Spark starts: a mistake in the input costs a second, not a Spark start.

Everything that can be known without Spark is checked here, for ``pipeline``, ``diff -m`` and
``stream``: the engine and reader names, the definitions (parsed into a topology), the
messages (they exist, their format, every Parquet footer readable), OUT (`xroute.pipeline.output`)
and the columns: from the Parquet footers, the CSV header lines, or the keys of the JSON lines
of a small dataset. A check here refuses only what is certainly wrong; the job checks again on
what Spark reads (`xroute.spark.io.check_columns`).
"""

from __future__ import annotations

import csv
import json
import posixpath
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from xroute.core.errors import DatasetError
from xroute.core.topology import Topology
from xroute.engines import TopicMatcher
from xroute.pipeline.output import check_apart, check_stream_out, check_writable
from xroute.sources.definitions import read_definitions
from xroute.sources.storage import Location, locate
from xroute.spark import broker_input, io
from xroute.spark.pyarrow_reader import FOOTER_READERS, READERS, open_parquet
from xroute.spark.trace_input import (
    check_trace,
    check_trace_stream,
    detect_trace,
    is_trace,
    message_format,
    refuse_schema,
)

JSON_SAMPLE_BYTES = 4 << 20  # JSON datasets up to this size have their keys read in full
HEADER_BYTES = 1 << 16  # a CSV header line is read from at most this much of each file


def check_pipeline(options: Any) -> Any:
    """`xroute.spark.job.PipelineOptions` checked; the same options with the definitions
    parsed (read once)."""
    TopicMatcher(engine=options.engine)
    if options.reader not in READERS:
        raise DatasetError(
            f"unknown reader {options.reader!r}; use {', '.join(READERS)}", options.reader
        )
    definitions = check_definitions(options.definitions, options.vhost)
    if broker_input.is_broker(options.messages):
        broker_input.refuse_format(options.format, options.messages)
        if options.reader == "pyarrow":
            raise DatasetError("--reader pyarrow reads Parquet files, not a broker's streams",
                               options.reader)
        given = options.definitions if isinstance(options.definitions, str) else None
        check_apart(options.out, [given])
        check_writable(locate(options.out), options.out, options.overwrite)
        options = broker_input.pinned_options(options)
        return replace(options, definitions=definitions)
    fmt = message_format(options.messages, options.format)
    if options.reader == "pyarrow" and fmt != "parquet":
        # Said here, before Spark starts, not after (the job checks it again).
        raise DatasetError(
            f"--reader pyarrow reads Parquet only; {options.messages!r} is {fmt}", options.reader
        )
    given = options.definitions if isinstance(options.definitions, str) else None
    check_apart(options.out, [options.messages, given])
    check_writable(locate(options.out), options.out, options.overwrite)
    if is_trace(fmt):
        check_trace(options.messages, fmt, options.keep_columns, options.columns)
    else:
        _check_columns(options.messages, fmt, options, f"message dataset {options.messages!r}")
    return replace(options, definitions=definitions)


def check_diff(
    messages: str,
    fmt: str,
    out: str,
    overwrite: bool,
    definitions: Iterable[Any],
    names: io.Columns = io.Columns(),
) -> Any:
    """``diff -m``'s checks: the log, OUT, and the routing key column. From a broker's
    streams: the range pinned (`xroute.spark.broker_input.BrokerRange`; None for files)."""
    if broker_input.is_broker(messages):
        broker_input.refuse_format(fmt, messages)
        check_apart(out, [d for d in definitions if isinstance(d, str)])
        check_writable(locate(out), out, overwrite)
        return broker_input.pinned_range(messages)
    fmt = message_format(messages, fmt)
    check_apart(out, [messages, *(d for d in definitions if isinstance(d, str))])
    check_writable(locate(out), out, overwrite)
    if is_trace(fmt):
        check_trace(messages, fmt, names=names)
        return None
    columns = dataset_columns(messages, fmt)
    if columns is not None and names.key not in columns:
        raise DatasetError(
            f"message dataset {messages!r} has no {names.key!r} column; its columns are "
            f"{columns}",
            messages,
        )
    return None


def check_stream(options: Any) -> str | None:
    """`xroute.spark.stream.StreamOptions` checked (the definitions, OUT, the source and,
    when it has files and no --schema is given, their columns). From a broker's streams: each
    stream there and readable; a line saying so (None for files)."""
    TopicMatcher(engine=options.engine)
    check_definitions(options.definitions, options.vhost)
    if broker_input.is_broker(options.source):
        broker_input.refuse_format(options.format, options.source)
        if options.schema is not None:
            raise DatasetError("--schema is for files; a broker's streams have theirs", "--schema")
        check_apart(options.out, [options.definitions])
        check_stream_out(locate(options.out), options.out)
        return broker_input.check_broker(options.source)
    source = locate(options.source)
    if source.exists() and not source.is_dir():
        raise DatasetError(f"the stream source {options.source!r} must be a folder", options.source)
    check_apart(options.out, [options.source, options.definitions])
    check_stream_out(locate(options.out), options.out)
    fmt = options.format
    if fmt == "auto" and source.is_dir():
        fmt = detect_trace(options.source) or fmt
    if is_trace(fmt):
        refuse_schema(options.schema)
        if fmt != "firehose" or source.is_dir():
            check_trace_stream(options.source, fmt, options.keep_columns, options.columns)
    elif options.schema is None and source.is_dir() and io.data_files(source):
        fmt = io.detect_format(options.source, options.format)
        _check_columns(options.source, fmt, options, f"the stream source {options.source!r}")
    return None


def _check_columns(path: str, fmt: str, options: Any, source: str) -> None:
    """The routing columns and --keep-columns of the dataset at ``path``, where known."""
    columns = dataset_columns(path, fmt)
    if columns is not None:
        io.check_column_names(
            columns, options.exchange, options.keep_columns, options.columns, source=source
        )


def check_definitions(definitions: str | Mapping[str, Any], vhost: str | None) -> dict[str, Any]:
    """The definitions parsed, and proven to make a topology (their errors name the file)."""
    parsed = read_definitions(definitions, vhost)
    Topology.from_definitions(parsed, vhost=vhost, engine="reference")
    return parsed


def dataset_columns(path: str, fmt: str) -> list[str] | None:
    """The columns Spark will find in the dataset at ``path`` (``key=value`` folder names
    included), as far as they can be known cheaply; None when they cannot (a large JSON
    dataset: Spark infers its columns from every line). A file that cannot be read is named."""
    target = locate(path)
    files = io.data_files(target)
    if not files:
        raise DatasetError(f"message dataset {path!r} holds no data file", path)
    if fmt == "parquet":
        with ThreadPoolExecutor(FOOTER_READERS) as pool:
            schemas = [source.schema_arrow.names for source in pool.map(open_parquet, files)]
    elif fmt == "csv":
        with ThreadPoolExecutor(FOOTER_READERS) as pool:
            schemas = list(pool.map(_csv_header, files))
    else:
        if sum(file.info().size or 0 for file in files) > JSON_SAMPLE_BYTES:
            return None
        schemas = [_json_keys(file) for file in files]
    columns: dict[str, None] = {}
    for names in schemas:
        columns.update(dict.fromkeys(names))
    columns.update(dict.fromkeys(_partition_columns(target, files)))
    return list(columns)


def _csv_header(file: Location) -> list[str]:
    with _open_text(file) as stream:
        line = stream.read(HEADER_BYTES).split(b"\n", 1)[0]
    text = _decode(line, file)
    return next(csv.reader([text.rstrip("\r")]), [])


def _json_keys(file: Location) -> list[str]:
    keys: dict[str, None] = {}
    for number, line in enumerate(file.read_bytes().splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a malformed line is the job's to reject, with its reason
        if isinstance(record, dict):
            keys.update(dict.fromkeys(record))
    return list(keys)


def _open_text(file: Location) -> Any:
    try:
        return file.filesystem.open_input_stream(file.path)
    except OSError as error:
        raise DatasetError(f"cannot read {io.shown(file.uri)}: {error}", file.uri) from None


def _decode(data: bytes, file: Location) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DatasetError(
            f"cannot read {io.shown(file.uri)}: its header line is not UTF-8 ({error.reason} at "
            f"byte {error.start})",
            file.uri,
        ) from None


def _partition_columns(target: Location, files: list[Location]) -> list[str]:
    base = target.path.rstrip("/") + "/"
    names: dict[str, None] = {}
    for file in files:
        for part in posixpath.dirname(file.path[len(base) :]).split("/"):
            if "=" in part:
                names[part.split("=", 1)[0]] = None
    return list(names)
