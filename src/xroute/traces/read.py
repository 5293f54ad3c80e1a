"""Read a trace, whatever its RabbitMQ format, as one Arrow table (`records.SCHEMA`).

Formats (``format=`` or detected from the first bytes of the first file):
- ``firehose``: `xroute capture`'s Parquet files, or JSON Lines with the same fields;
- ``rabbitmq-tracing``: the tracing plugin's log files, ``json`` or ``text`` format.
A folder is read file by file in name order (files whose names begin with ``_`` or ``.`` are
skipped); records are numbered in that order unless they carry their own ``seq``.
"""

from __future__ import annotations

import io
import json
import posixpath

import pyarrow as pa
import pyarrow.parquet as pq

from xroute.core.errors import TraceFormatError
from xroute.sources.storage import Location, locate
from xroute.traces.records import SCHEMA, to_table

# Columns that captures written by earlier versions lack (read as nulls).
OPTIONAL = ("amqp_headers",)
from xroute.traces.tracing_log import read_json_lines, read_text

FORMATS = ("firehose", "rabbitmq-tracing")


def trace_files(source: str) -> list[tuple[Location, str]]:
    """The files of a trace, each with its name as the user would type it: ``source`` itself,
    or the files under a folder, in name order."""
    where = locate(source)
    if not where.exists():
        raise TraceFormatError(f"no trace at {source!r}")
    if not where.is_dir():
        return [(where, source)]
    files = []
    for path in where.files():
        if posixpath.basename(path).startswith(("_", ".")):
            continue
        relative = posixpath.relpath(path, where.path)
        uri = where.uri.rstrip("/") + "/" + relative
        files.append((Location(where.filesystem, path, uri), source.rstrip("/") + "/" + relative))
    return files


def detect(data: bytes) -> str:
    """``parquet``, ``firehose-json``, ``tracing-json`` or ``tracing-text``, from a file's start."""
    if data[:4] == b"PAR1":
        return "parquet"
    head = data.lstrip()[:1]
    if head == b"{":  # JSON Lines: ours name a record_type, the tracing plugin's a type
        first = data.lstrip().split(b"\n", 1)[0]
        return "firehose-json" if b'"record_type"' in first else "tracing-json"
    if data.startswith(b"\n" + b"=" * 80) or data.startswith(b"=" * 80):
        return "tracing-text"
    raise TraceFormatError("not a trace: neither Parquet, JSON Lines nor a tracing-plugin text log")


def read_file(
    location: Location,
    format: str | None = None,
    first_seq: int = 0,
    name: str | None = None,
    columns: list[str] | None = None,
) -> pa.Table:
    """One trace file as a table of `SCHEMA` (only ``columns``, when given): a capture's
    records keep their own ``seq``; a tracing-plugin log's are numbered from ``first_seq`` in
    file order."""
    table = _read_file(location, format, first_seq, name or location.uri, columns)
    return table if columns is None else table.select(columns)


def _read_file(
    location: Location, format: str | None, first_seq: int, name: str, columns: list[str] | None
) -> pa.Table:
    data = location.read_bytes()
    if not data.strip():
        return SCHEMA.empty_table()
    try:
        kind = detect(data)
        if format == "firehose" and kind.startswith("tracing"):
            raise TraceFormatError("a tracing-plugin log, read with --format firehose")
        if format == "rabbitmq-tracing" and not kind.startswith("tracing"):
            raise TraceFormatError("not a tracing-plugin log, read with --format rabbitmq-tracing")
        if kind == "parquet":
            wanted = columns or SCHEMA.names
            file = pq.ParquetFile(io.BytesIO(data))
            present = file.schema_arrow.names
            missing = [c for c in wanted if c not in present and c not in OPTIONAL]
            if missing:
                raise TraceFormatError(f"a Parquet file without the trace columns {missing}")
            table = file.read(columns=[c for c in wanted if c in present])
            for name in wanted:  # a capture written before a column came: null there
                if name not in present:
                    nulls = pa.nulls(table.num_rows, SCHEMA.field(name).type)
                    table = table.append_column(name, nulls)
            return table.select(wanted).cast(pa.schema([SCHEMA.field(c) for c in wanted]))
        if kind == "firehose-json":
            rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
            return pa.Table.from_pylist(rows, schema=SCHEMA)
        if kind == "tracing-json":
            return to_table(list(read_json_lines(data.decode("utf-8").splitlines(), name)), first_seq)
        text = data.decode("latin-1")  # one character a byte: see tracing_log.read_text
        return to_table(list(read_text(text, name)), first_seq)
    except TraceFormatError as error:
        message = str(error)
        raise TraceFormatError(message if message.startswith(name) else f"{name}: {message}") from None
    except (ValueError, pa.ArrowException) as error:
        raise TraceFormatError(f"{name}: not a readable trace ({error})") from None


def check_files(files: list[tuple[Location, str]], format: str | None = None) -> None:
    """Refuse, naming it, a file that is no trace of ``format``, from its first bytes (and a
    capture's Parquet footer): a cheap look before any job reads the files whole."""
    for location, name in files:
        with location.filesystem.open_input_file(location.path) as stream:
            head = stream.read(1 << 16)
            try:
                kind = detect(head) if head.strip() else None
            except TraceFormatError as error:
                raise TraceFormatError(f"{name}: {error}") from None
            if kind == "parquet":
                stream.seek(0)
                names = pq.ParquetFile(stream).schema_arrow.names
                missing = [c for c in SCHEMA.names if c not in names and c not in OPTIONAL]
                if missing:
                    raise TraceFormatError(f"{name}: a Parquet file without the trace columns {missing}")
        if kind and format == "firehose" and kind.startswith("tracing"):
            raise TraceFormatError(f"{name}: a tracing-plugin log, read with --format firehose")
        if kind and format == "rabbitmq-tracing" and not kind.startswith("tracing"):
            raise TraceFormatError(f"{name}: not a tracing-plugin log, read with --format rabbitmq-tracing")


def read_traces(source: str, format: str | None = None) -> pa.Table:
    """Every record of the trace at ``source`` (a file or a folder) as one table; records from
    files without their own order are numbered after the ones before them."""
    if format is not None and format not in FORMATS:
        raise TraceFormatError(f"unknown trace format {format!r}; known: {', '.join(FORMATS)}")
    tables = []
    for location, name in trace_files(source):
        tables.append(read_file(location, format, sum(t.num_rows for t in tables), name))
    return pa.concat_tables(tables) if tables else SCHEMA.empty_table()
