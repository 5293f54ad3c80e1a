"""Delta Lake tables as the outputs (``--table-format delta``): ``deliveries``, ``unroutable``
and ``rejected`` committed by delta-rs (the ``deltalake`` package: no JVM, no jars).

The tasks stage Parquet parts exactly as for Parquet folders (`xroute.pipeline.commit`), and
the counts are proven on them the same way. Only the last step differs: the proven parts are
moved into the table's folder and added to the table by ONE Delta transaction per table. A
reader of a Delta table reads its log, never a listing, so a part that was never committed (a
failed run, a task retried, a batch that died) is invisible, with no xroute code on the
reading side: pandas, Polars or pyarrow through ``deltalake``, Spark with Delta, DuckDB...

- The batch job (`DeltaCommit`) commits each table once, after the invariant holds; a failed
  run commits nothing (``--overwrite`` removes earlier tables as it removes folders, before
  the new ones are made).
- Each stream batch (`DeltaBatchCommit`) appends with an app transaction
  (``app_id`` = the stream's checkpoint id, ``version`` = the batch id): a batch replayed after
  a crash is recognised table by table, and a table that already holds it is left alone.

On S3 a Delta commit must not overwrite a concurrent writer's log entry: delta-rs needs either a
lock (DynamoDB) or a store that honours conditional puts (``If-None-Match: *``). xroute asks for
the conditional put (``aws_conditional_put=etag``) unless ``AWS_S3_LOCKING_PROVIDER`` names a
lock; see docs/pipeline.md for what was checked on SeaweedFS.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

import pyarrow.parquet as pq

from xroute.core.errors import DatasetError
from xroute.pipeline.commit import Commit
from xroute.pipeline.stream_commit import BatchCommit
from xroute.sources.storage import Location

TABLE_FORMATS = ("parquet", "delta")
DELTA_LOG = "_delta_log"


def check_table_format(name: str) -> None:
    """`DatasetError` unless ``name`` is a table format xroute writes, and its library is
    installed."""
    if name not in TABLE_FORMATS:
        raise DatasetError(
            f"unknown table format {name!r}; use {', '.join(TABLE_FORMATS)}", name
        )
    if name == "delta":
        try:
            import deltalake  # noqa: F401
        except ImportError:
            raise DatasetError(
                "--table-format delta needs the deltalake package: pip install 'xroute[delta]'",
                name,
            ) from None


def storage_options(table: Location) -> dict[str, str] | None:
    """What delta-rs needs besides the ``AWS_*`` variables it reads itself: plain HTTP for an
    ``http://`` endpoint, and safe concurrent commits (module docstring)."""
    if table.local or not table.uri.startswith("s3://"):
        return None
    options: dict[str, str] = {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3")
    if endpoint:
        options["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    if not os.environ.get("AWS_S3_LOCKING_PROVIDER"):
        options["aws_conditional_put"] = "etag"
    return options


def table_uri(table: Location) -> str:
    """The table as delta-rs names it: a plain path on a local disk, else the URI."""
    return table.path if table.local else table.uri


def is_table(table: Location) -> bool:
    """Whether a Delta table is there (its log exists)."""
    return table.child(DELTA_LOG).exists()


def commit_table(
    table: Location,
    files: Iterable[Location],
    app: tuple[str, int] | None = None,
) -> None:
    """Add ``files`` (Parquet parts already inside ``table``'s folder) to the Delta table in
    one transaction, making the table if it is not there; ``app`` = (app id, version) records
    an app transaction with it. No files and no table: nothing to do (a stream batch with no
    rows of this output)."""
    from deltalake import DeltaTable, Schema
    from deltalake.transaction import CommitProperties, Transaction, create_table_with_add_actions

    files = list(files)
    uri, options = table_uri(table), storage_options(table)
    exists = is_table(table)
    if not files and not exists:
        return
    properties = CommitProperties(
        app_transactions=[Transaction(app_id=app[0], version=app[1])] if app else None
    )
    actions = [_add_action(table, part) for part in files]
    if files:
        with table.filesystem.open_input_file(files[0].path) as source:
            schema = Schema.from_arrow(pq.read_schema(source))
    if exists:
        current = DeltaTable(uri, storage_options=options)
        current.create_write_transaction(
            actions,
            mode="append",
            schema=schema if files else current.schema(),
            commit_properties=properties,
        )
    else:
        create_table_with_add_actions(
            uri, schema, actions, mode="error", storage_options=options,
            commit_properties=properties,
        )


def app_version(table: Location, app_id: str) -> int | None:
    """The last version that app ``app_id`` committed to the table (None: none, or no
    table)."""
    if not is_table(table):
        return None
    from deltalake import DeltaTable

    return DeltaTable(table_uri(table), storage_options=storage_options(table)).transaction_version(
        app_id
    )


def _add_action(table: Location, part: Location) -> Any:
    from deltalake.transaction import AddAction

    info = part.info()
    with part.filesystem.open_input_file(part.path) as source:
        rows = pq.ParquetFile(source).metadata.num_rows
    relative = part.path[len(table.path.rstrip("/")) + 1 :]
    mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
    return AddAction(
        path=quote(relative, safe="/="),
        size=info.size,
        partition_values={},
        modification_time=int(mtime * 1000),
        data_change=True,
        stats=json.dumps({"numRecords": rows}),
    )


def _locations(out: Location, moved: list[str]) -> list[Location]:
    return [out.child(*name.split("/")) for name in moved]


class DeltaCommit(Commit):
    """The batch job's way into OUT with Delta tables: staged, counted and published as
    `Commit` does, each output's parts then added to ``OUT/<output>`` in one transaction
    (before ``summary.json`` and ``_SUCCESS``)."""

    def move_staged(self, target: Callable[[str], Location]) -> dict[str, list[str]]:
        """Move the staged parts into their tables, and commit each table. The tables' logs
        are named with the parts, so that ``--overwrite`` (which removes only what
        ``_SUCCESS`` names) replaces a table whole rather than leaving its old log behind."""
        moved = super().move_staged(target)
        prefix = self.out.path.rstrip("/") + "/"
        for output in self.outputs:
            table = target(output)
            commit_table(table, _locations(self.out, moved[output]))
            log = table.child("_delta_log")
            moved[output] = moved[output] + [path[len(prefix):] for path in log.files()]
        return moved


class DeltaBatchCommit(BatchCommit):
    """One stream batch's way into OUT with Delta tables: its parts go to
    ``OUT/<output>/batch_id=N/`` inside each table, added by an app transaction
    (``app_id``, batch id). A table that already holds batch N (a replay after a crash between
    two tables' commits, or before the marker) is left alone and the replay's parts for it are
    deleted."""

    def __init__(
        self, out: str | Location, outputs: tuple[str, ...], batch_id: int, app_id: str
    ) -> None:
        super().__init__(out, outputs, batch_id)
        self.app_id = app_id

    def holds_batch(self, output: str) -> bool:
        """Whether the table of ``output`` already holds this batch."""
        version = app_version(self.out.child(output), self.app_id)
        return version is not None and version >= self.batch_id

    def clear(self) -> None:
        """Delete what an unfinished attempt left, but never a committed table's parts."""
        self.staging.delete()
        for output in self.outputs:
            if not self.holds_batch(output):
                self.target(output).delete()

    def move_staged(self, target: Callable[[str], Location]) -> dict[str, list[str]]:
        """Commit each table that does not hold this batch yet; drop the replay's parts of
        those that do."""
        done = {output for output in self.outputs if self.holds_batch(output)}
        for output in done:
            self.folder(output).delete()
        moved = super().move_staged(target)
        for output in self.outputs:
            if output not in done:
                commit_table(
                    self.out.child(output),
                    _locations(self.out, moved[output]),
                    app=(self.app_id, self.batch_id),
                )
        return moved

