"""Reading a message dataset with Spark, and the checks made before any routing starts.

A dataset is a Parquet, JSON Lines or CSV file, or a folder of them. Its columns:
``routing_key`` (required), ``exchange`` (else ``--exchange``), ``headers`` (a map, or a JSON
object as text; optional), ``message_id`` (optional) and anything else, carried along.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from xroute.errors import DatasetError

FORMATS = ("parquet", "json", "csv")
SUFFIXES = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".csv": "csv",
}
KEY, EXCHANGE, HEADERS, MESSAGE_ID = "routing_key", "exchange", "headers", "message_id"
QUEUE, REASON = "queue", "reason"
# Columns the job adds to each record to name it when it has no message_id: its file, and
# its row in that file (Parquet gives it; for text formats each file is read whole, in order).
FILE_COLUMN, ROW_COLUMN = "_xroute_file", "_xroute_row"
CORRUPT = "_corrupt_record"  # Spark's column for a JSON line that does not parse
_EMPTY_MARK = "\u0001xroute-empty\u0001"  # a quoted empty CSV field, until it is made ""
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
    it as or, for the pyarrow reader, its Parquet footers (`xroute.pipeline.pyarrow_reader`)."""

    format: str
    columns: tuple[str, ...]  # the dataset's own columns, in order
    root: str  # the URI prefix stripped from file paths in generated message ids
    schema: Any  # Spark's StructType of each record: the columns, then the two naming ones
    frame: Any = None  # Spark's DataFrame of the records, with the two naming columns
    footers: tuple[ParquetFooter, ...] = ()  # when the tasks read the files themselves


def data_files(target: Path) -> list[Path]:
    """The files of a dataset, as Spark lists them: the file itself, or every file under the
    folder whose path has no part starting with ``_`` or ``.``, in path order."""
    if target.is_file():
        return [target]
    return sorted(
        p
        for p in target.rglob("*")
        if p.is_file()
        and not any(part.startswith(("_", ".")) for part in p.relative_to(target).parts)
    )


def dataset_root(path: str) -> str:
    """The URI that generated message ids name files under: the folder, or the file's own."""
    uri = Path(path).resolve().as_uri()
    return uri if Path(path).is_dir() else uri.rsplit("/", 1)[0]


def detect_format(path: str, fmt: str = "auto") -> str:
    """``fmt``, or for ``auto`` the format named by the file suffixes under ``path``."""
    target = Path(path)
    if not target.exists():
        raise DatasetError(f"message dataset {path!r} does not exist", path)
    if fmt != "auto":
        if fmt not in FORMATS:
            raise DatasetError(f"unknown format {fmt!r}; use auto, {', '.join(FORMATS)}", path)
        return fmt
    found = {SUFFIXES.get(p.suffix.lower()) for p in data_files(target)} - {None}
    if len(found) == 1:
        return found.pop()
    if not found:
        raise DatasetError(
            f"cannot tell the format of {path!r}: no file ends in "
            f"{', '.join(sorted(SUFFIXES))}; pass --format",
            path,
        )
    raise DatasetError(f"{path!r} mixes formats {sorted(found)}; pass --format", path)


def read_messages(spark: Any, path: str, fmt: str = "auto") -> Dataset:
    """The dataset at ``path`` as a DataFrame, with the columns that name each record."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    fmt = detect_format(path, fmt)
    reader = spark.read
    if not partitioned(Path(path)):
        # Files in plain subfolders (2026/01/part.parquet) are read too; Spark would refuse
        # them, expecting key=value folders, which name columns and are left to it.
        reader = reader.option("recursiveFileLookup", True)
    try:
        if fmt == "parquet":
            frame = reader.parquet(path)
            row = F.col("_metadata.row_index")
        else:
            if fmt == "json":
                inferred = reader.json(path).schema
                # Text is what the job wants for these columns: a JSON object under "headers"
                # stays its JSON text, and a number under "routing_key" stays its digits.
                text = {KEY, EXCHANGE, HEADERS, MESSAGE_ID}
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
            raise DatasetError(
                f"cannot read {fmt} dataset {path!r}: {_first_line(error)}", path
            ) from None
        raise
    columns = tuple(frame.columns)
    frame = frame.select(
        *[F.col(f"`{c}`") for c in columns],
        F.col("_metadata.file_path").alias(FILE_COLUMN),
        row.alias(ROW_COLUMN),
    )
    return Dataset(fmt, columns, dataset_root(path), frame.schema, frame=frame)


def check_columns(
    dataset: Dataset, default_exchange: str | None, keep_columns: Sequence[str]
) -> None:
    """Refuse, before any work, a dataset the job cannot route: `DatasetError` naming why."""
    from pyspark.sql.types import MapType, StringType

    columns = dataset.columns
    types = {f.name: f.dataType for f in dataset.schema.fields}
    if KEY not in columns:
        raise DatasetError(
            f"the dataset has no {KEY!r} column; its columns are {list(columns)}", KEY
        )
    if EXCHANGE not in columns and default_exchange is None:
        raise DatasetError(
            f"the dataset has no {EXCHANGE!r} column: name the exchange with --exchange", EXCHANGE
        )
    if HEADERS in columns and not isinstance(types[HEADERS], (StringType, MapType)):
        raise DatasetError(
            f"column {HEADERS!r} must be a map or a JSON object as text, not "
            f"{types[HEADERS].simpleString()}",
            HEADERS,
        )
    for reserved in (FILE_COLUMN, ROW_COLUMN, REASON, QUEUE):
        if reserved in columns:
            raise DatasetError(
                f"the dataset has a column {reserved!r}, a name the outputs use; rename it",
                reserved,
            )
    for name in keep_columns:
        if name not in columns:
            raise DatasetError(
                f"--keep-columns names {name!r}, which the dataset does not have; its columns "
                f"are {list(columns)}",
                name,
            )
        if name == MESSAGE_ID:
            raise DatasetError(f"{MESSAGE_ID!r} is always in deliveries; do not keep it", name)


def partitioned(path: Path) -> bool:
    """Whether a dataset folder has Hive-style ``key=value`` subfolders."""
    return path.is_dir() and any(p.is_dir() and "=" in p.name for p in path.rglob("*"))


def local_path(uri: str) -> str:
    """The path of a file URI, in any of the forms Spark writes (``file:/a%20b``,
    ``file:///a%20b``)."""
    return unquote(urlparse(uri).path)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
