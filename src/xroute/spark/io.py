"""Reading a message dataset with Spark, and the checks made before any routing starts.

A dataset is a Parquet, JSON Lines or CSV file, or a folder of them. Its columns:
``routing_key`` (required), ``exchange`` (else ``--exchange``), ``headers`` (a map, or a JSON
object as text; optional), ``message_id`` (optional) and anything else, carried along.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlparse

from pyarrow.fs import FileType

from xroute.core.errors import DatasetError
from xroute.pipeline.names import (  # noqa: F401 - the readers' names, as io.NAME
    CORRUPT,
    EXCHANGE,
    FILE_COLUMN,
    HEADERS,
    KEY,
    MESSAGE_ID,
    QUEUE,
    REASON,
    ROW_COLUMN,
    local_path,
)
from xroute.sources.storage import Location, locate

FORMATS = ("parquet", "json", "csv")
SUFFIXES = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".csv": "csv",
}
_EMPTY_MARK = "\u0001xroute-empty\u0001"  # a quoted empty CSV field, until it is made ""
# Where Spark's file stream source can read without extra jars.
STREAM_SCHEMES = ("", "file", "hdfs")
# Files older than this (relative to the newest seen) are ignored by Spark's file stream source.
STREAM_MAX_FILE_AGE = "36500d"
TASKS_PER_CORE = 4  # Parquet input is split into about this many tasks per core
# For text formats: one task reads each file from its start, so rows can be counted.
WHOLE_FILES = {
    "spark.sql.files.maxPartitionBytes": str(1 << 40),
    "spark.sql.files.minPartitionNum": "1",
}


@dataclass(frozen=True)
class ParquetFooter:
    """What a Parquet file's footer says of its rows."""

    uri: str
    row_groups: tuple[int, ...]  # the rows of each row group, in order


@dataclass(frozen=True)
class Dataset:
    """A dataset as read: its format, columns and schema, and either the DataFrame Spark reads
    it as or, for the pyarrow reader, its Parquet footers (`xroute.spark.pyarrow_reader`)."""

    format: str
    columns: tuple[str, ...]  # the dataset's own columns, in order
    root: str  # the URI prefix stripped from file paths in generated message ids
    schema: Any  # Spark's StructType of each record: the columns, then the two naming ones
    frame: Any = None  # Spark's DataFrame of the records, with the two naming columns
    footers: tuple[ParquetFooter, ...] = ()  # when the tasks read the files themselves


def data_files(target: Location) -> list[Location]:
    """The files of a dataset, as Spark lists them: the file itself, or every file under the
    folder whose path has no part starting with ``_`` or ``.``, in path order."""
    if target.info().type == FileType.File:
        return [target]
    base = target.path.rstrip("/") + "/"
    found = []
    for path in target.files():
        parts = path[len(base) :].split("/")
        if not any(part.startswith(("_", ".")) for part in parts):
            found.append(target.child(*parts))
    return found


def dataset_root(target: Location) -> str:
    """The URI that generated message ids name files under: the folder, or the file's own."""
    return target.uri if target.is_dir() else target.uri.rsplit("/", 1)[0]


def detect_format(path: str, fmt: str = "auto") -> str:
    """``fmt``, or for ``auto`` the format named by the file suffixes under ``path`` (a local
    path or a storage URI)."""
    target = locate(path)
    if not target.exists():
        raise DatasetError(f"message dataset {path!r} does not exist", path)
    if fmt != "auto":
        if fmt not in FORMATS:
            raise DatasetError(f"unknown format {fmt!r}; use auto, {', '.join(FORMATS)}", path)
        return fmt
    found = {SUFFIXES.get(PurePosixPath(f.path).suffix.lower()) for f in data_files(target)}
    found -= {None}
    if len(found) == 1:
        return found.pop()
    if not found:
        raise DatasetError(
            f"cannot tell the format of {path!r}: no file ends in "
            f"{', '.join(sorted(SUFFIXES))}; pass --format",
            path,
        )
    raise DatasetError(f"{path!r} mixes formats {sorted(found)}; pass --format", path)


def read_messages(
    spark: Any, path: str, fmt: str = "auto", names: Columns | None = None
) -> Dataset:
    """The dataset at ``path`` as a DataFrame, with the columns that name each record
    (``names``: the routing columns, read as text from JSON)."""
    fmt = detect_format(path, fmt)
    target = locate(path)
    reader = spark.read
    if not partitioned(target):
        # Files in plain subfolders (2026/01/part.parquet) are read too; Spark would refuse
        # them, expecting key=value folders, which name columns and are left to it.
        reader = reader.option("recursiveFileLookup", True)
    return _dataset(reader, path, fmt, dataset_root(target), names=names)


def read_message_stream(
    spark: Any,
    path: str,
    fmt: str = "auto",
    schema: Any = None,
    max_files: int = 10,
    names: Columns | None = None,
) -> Dataset:
    """The files arriving under the folder ``path`` as a streaming DataFrame (Spark's file
    stream source, at most ``max_files`` new files per micro-batch), with the columns that
    name each record. ``schema`` is a DDL string or a StructType; without one it is taken
    from the files present now, as `read_messages` reads them. JSON lines that do not parse
    keep their text in ``_corrupt_record``, to be rejected with a reason."""
    from pyspark.sql.types import StringType, StructField, StructType

    scheme = urlparse(path).scheme if "://" in path else ""
    if scheme not in STREAM_SCHEMES:
        # Spark's JVM lists and reads the source itself (xroute's tasks only write the output).
        raise DatasetError(
            f"the stream source {path!r} is on {scheme}://, which Spark's file stream source "
            "reads only with its Hadoop connector on the classpath (hadoop-aws for s3a://, "
            "not installed here): use a local folder (or HDFS); OUT may be on any storage",
            path,
        )
    target = locate(path)
    if not target.is_dir():
        raise DatasetError(f"the stream source {path!r} must be an existing folder", path)
    present = data_files(target)
    if fmt == "auto" and present:
        fmt = detect_format(path, fmt)
    if schema is None:
        if not present:
            raise DatasetError(
                f"the stream source {path!r} has no files yet to take a schema from; pass "
                "--schema (e.g. 'routing_key string, exchange string, headers string')",
                path,
            )
        found = read_messages(spark, path, fmt, names).schema
        schema = StructType([f for f in found.fields if f.name not in (FILE_COLUMN, ROW_COLUMN)])
    elif isinstance(schema, str):
        try:
            schema = spark.createDataFrame([], schema).schema
        except Exception as error:
            raise DatasetError(
                f"--schema {schema!r} is not a Spark DDL schema: {_first_line(error)}", schema
            ) from None
    if fmt == "auto":
        raise DatasetError(
            f"cannot tell the format of the stream {path!r} before files arrive; pass --format",
            path,
        )
    if fmt == "json" and CORRUPT not in schema.fieldNames():
        # A file that arrives later may hold lines that do not parse: they must be kept.
        schema = StructType([*schema.fields, StructField(CORRUPT, StringType())])
    # Spark's default ignores, after the first batch, a file whose modification time is a
    # week older than the newest one seen (one copied with its old time kept): never skip.
    reader = spark.readStream.option("maxFilesPerTrigger", max_files).option(
        "maxFileAge", STREAM_MAX_FILE_AGE
    )
    return _dataset(reader, path, fmt, dataset_root(target), schema, names)


def _dataset(
    reader: Any,
    path: str,
    fmt: str,
    root: str,
    schema: Any = None,
    names: Columns | None = None,
) -> Dataset:
    """Open ``path`` with ``reader`` (Spark's batch or stream reader) as ``fmt``; ``schema``
    (a StructType) when known, else inferred (batch only)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    try:
        if fmt == "parquet":
            frame = (reader if schema is None else reader.schema(schema)).parquet(path)
            row = F.col("_metadata.row_index")
        else:
            if fmt == "json":
                inferred = reader.json(path).schema if schema is None else schema
                # Text is what the job wants for these columns: a JSON object under "headers"
                # stays its JSON text, and a number under "routing_key" stays its digits.
                text = (names or Columns()).as_text
                schema = StructType(
                    [
                        StructField(f.name, StringType()) if f.name in text else f
                        for f in inferred.fields
                    ]
                )
                frame = reader.schema(schema).json(path)
            else:
                # RFC 4180 quoting ("" inside quotes); an empty unquoted field is a missing
                # value, a quoted "" an empty string. Spark reads both as null unless the
                # quoted one is told apart: it comes back as a marker, then made "".
                if schema is not None:
                    reader = reader.schema(schema)
                frame = (
                    reader.option("header", True)
                    .option("escape", '"')
                    .option("emptyValue", _EMPTY_MARK)
                    .csv(path)
                )
                frame = frame.select(
                    *[
                        F.when(F.col(f"`{c}`") == _EMPTY_MARK, F.lit(""))
                        .otherwise(F.col(f"`{c}`"))
                        .alias(c)
                        for c in frame.columns
                    ]
                )
            row = F.lit(None).cast("long")
    except Exception as error:  # Spark's AnalysisException and friends: say it our way
        if type(error).__module__.startswith("pyspark"):
            hint = ""
            if "No FileSystem for scheme" in str(error):
                hint = (
                    " (Spark itself reads this storage only with its Hadoop connector on the "
                    "classpath, e.g. hadoop-aws for s3a://; xroute's own tasks read Parquet on "
                    "any storage pyarrow reads: --reader pyarrow)"
                )
            raise DatasetError(
                f"cannot read {fmt} dataset {path!r}: {_first_line(error)}{hint}", path
            ) from None
        raise
    columns = tuple(frame.columns)
    frame = frame.select(
        *[F.col(f"`{c}`") for c in columns],
        F.col("_metadata.file_path").alias(FILE_COLUMN),
        row.alias(ROW_COLUMN),
    )
    return Dataset(fmt, columns, root, frame.schema, frame=frame)


@dataclass(frozen=True)
class Columns:
    """Which of a dataset's columns hold each record's routing key, exchange and headers
    (``--routing-key-column``, ``--exchange-column``, ``--headers-column``)."""

    key: str = KEY
    exchange: str = EXCHANGE
    headers: str = HEADERS

    @property
    def as_text(self) -> set[str]:
        """The columns read as text from JSON (a JSON object under headers stays its text,
        a number under the key stays its digits)."""
        return {self.key, self.exchange, self.headers, MESSAGE_ID}


def check_column_names(
    columns: Sequence[str],
    default_exchange: str | None,
    keep_columns: Sequence[str],
    names: Columns = Columns(),
    source: str = "the dataset",
) -> None:
    """Refuse, before any work, a dataset whose columns the job cannot route with:
    `DatasetError` naming why. Names only: `check_columns` checks the types too."""
    columns = list(columns)
    if names.key not in columns:
        hint = "" if names.key != KEY else "; name another with --routing-key-column"
        raise DatasetError(
            f"{source} has no {names.key!r} column{hint}; its columns are {columns}", names.key
        )
    if names.exchange not in columns and default_exchange is None:
        raise DatasetError(
            f"{source} has no {names.exchange!r} column: name the exchange with --exchange "
            "(or the column with --exchange-column)",
            names.exchange,
        )
    for given, option in ((names.exchange, "--exchange-column"), (names.headers, "--headers-column")):
        if given not in (EXCHANGE, HEADERS) and given not in columns:
            raise DatasetError(
                f"{option} names {given!r}, which {source} does not have; its columns are "
                f"{columns}",
                given,
            )
    for reserved in (FILE_COLUMN, ROW_COLUMN, "_xroute_queues", "_xroute_error", REASON, QUEUE):
        if reserved in columns:
            raise DatasetError(
                f"{source} has a column {reserved!r}, a name the outputs use; rename it",
                reserved,
            )
    for name in keep_columns:
        if name not in columns:
            raise DatasetError(
                f"--keep-columns names {name!r}, which {source} does not have; its columns "
                f"are {columns}",
                name,
            )
        if name == MESSAGE_ID:
            raise DatasetError(f"{MESSAGE_ID!r} is always in deliveries; do not keep it", name)


def check_columns(
    dataset: Dataset,
    default_exchange: str | None,
    keep_columns: Sequence[str],
    names: Columns = Columns(),
) -> None:
    """Refuse, before any work, a dataset the job cannot route: `DatasetError` naming why."""
    from pyspark.sql.types import BinaryType, MapType, StringType, StructType

    columns = [c for c in dataset.columns if c != CORRUPT]
    check_column_names(columns, default_exchange, keep_columns, names)
    types = {f.name: f.dataType for f in dataset.schema.fields}
    headers = names.headers
    # Binary: an AMQP field table (a RabbitMQ stream's amqp_headers), or JSON as bytes.
    allowed = (StringType, MapType, StructType, BinaryType)
    if headers in columns and not isinstance(types[headers], allowed):
        raise DatasetError(
            f"column {headers!r} must be a struct, a map, a JSON object as text or an AMQP "
            "field table (binary), not "
            f"{types[headers].simpleString()}",
            headers,
        )


def partitioned(target: Location) -> bool:
    """Whether a dataset folder has Hive-style ``key=value`` subfolders."""
    if not target.is_dir():
        return False
    base = target.path.rstrip("/") + "/"
    return any("=" in part for path in target.files() for part in path[len(base) :].split("/")[:-1])


def shown(uri: str) -> str:
    """A file's URI as a person reads it: a local file as its path, any other as it is."""
    return local_path(uri) if uri.startswith("file:") else uri


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
