"""Parquet input read by the Python workers themselves, in splits of whole row groups.

Spark's own reader decodes Parquet in the JVM, turns the rows into Arrow and streams them to the
Python worker over a socket: on a 2-core machine that costs about as much CPU as the routing,
so Spark lost to one Python process (docs/pipeline.md). With this reader the driver cuts the
files into splits from their footers, Spark schedules one task per split, and each task reads
its row groups with pyarrow: the JVM moves a few hundred bytes per task, not the data.

A split is a run of consecutive row groups of one file, so that its rows keep their numbers in
the file (for generated message ids) exactly as Spark's ``_metadata.row_index`` numbers them;
batches are cast to the Arrow schema Spark would have handed over, so both readers give the
same records and the same outputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xroute.errors import DatasetError
from xroute.pipeline.io import FILE_COLUMN, ROW_COLUMN, local_path

READERS = ("auto", "pyarrow", "spark")


@dataclass(frozen=True)
class Split:
    """Consecutive row groups of one Parquet file: one task's input."""

    path: str  # the file on a filesystem every executor sees at this path
    uri: str  # the file as Spark's ``_metadata.file_path`` names it
    row_groups: tuple[int, ...]
    first_row: int  # the file's row number of the split's first row
    rows: int


def plan_splits(files: Sequence[str], columns: Sequence[str], tasks: int) -> list[Split]:
    """Cut ``files`` (``file:`` URIs, in Spark's order) into about ``tasks`` splits of nearly
    equal rows; a row group is never cut, and a split never spans two files.

    A file that lacks one of ``columns`` is refused (`DatasetError`): Spark fills such a
    column with nulls, or takes it from the folder names (``key=value`` partitions), and this
    reader does neither.
    """
    groups = []  # (uri, row group, first row in its file, rows)
    for uri in files:
        metadata = pq.ParquetFile(local_path(uri)).metadata
        lacking = [c for c in columns if c not in metadata.schema.to_arrow_schema().names]
        if lacking:
            raise DatasetError(
                f"{local_path(uri)!r} has no column {lacking[0]!r}: read this dataset with "
                "--reader spark",
                lacking[0],
            )
        first = 0
        for index in range(metadata.num_row_groups):
            rows = metadata.row_group(index).num_rows
            groups.append((uri, index, first, rows))
            first += rows
    total = sum(g[3] for g in groups)
    target = max(1, -(-total // max(1, tasks)))
    splits: list[Split] = []
    start, gathered = 0, 0  # the split being gathered: its first row group, its rows
    for end, (uri, _, _, rows) in enumerate(groups, 1):
        gathered += rows
        if end == len(groups) or groups[end][0] != uri or gathered >= target:
            splits.append(
                Split(
                    path=local_path(uri),
                    uri=uri,
                    row_groups=tuple(g[1] for g in groups[start:end]),
                    first_row=groups[start][2],
                    rows=gathered,
                )
            )
            start, gathered = end, 0
    return splits


def read_split(split: Split, schema: pa.Schema, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The split's records as Spark's reader would hand them to ``mapInArrow``: the dataset's
    columns cast to ``schema``, then the file (one dictionary entry) and each row's number."""
    columns = [f.name for f in schema if f.name not in (FILE_COLUMN, ROW_COLUMN)]
    source = pq.ParquetFile(split.path)
    file_name = pa.array([split.uri], pa.string())
    row = split.first_row
    for batch in source.iter_batches(
        batch_size=batch_rows, row_groups=list(split.row_groups), columns=columns
    ):
        size = batch.num_rows
        arrays = []
        for name in columns:
            column = batch.column(name)
            wanted = schema.field(name).type
            if column.type != wanted:
                try:
                    column = column.cast(wanted)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                    raise DatasetError(
                        f"column {name!r} of {split.path!r} is {column.type}, which does not "
                        f"read as the dataset's {wanted}: {error}",
                        name,
                    ) from None
            arrays.append(column)
        arrays.append(pa.DictionaryArray.from_arrays(pa.array(np.zeros(size, np.int32)), file_name))
        arrays.append(pa.array(np.arange(row, row + size, dtype=np.int64)))
        row += size
        yield pa.RecordBatch.from_arrays(arrays, names=[*columns, FILE_COLUMN, ROW_COLUMN])
