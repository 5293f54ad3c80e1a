"""The routing step of the pipeline, pure: an Arrow RecordBatch of messages in, its deliveries,
unroutable and rejected records out, with the counts the summary needs.

Routing is `xroute.core.batch.BatchRouter` (equal to `Topology.route_message`, message by message);
a record it cannot route is rejected with the library's own error as its reason. Every input
row ends in exactly one of: delivered (one delivery row per queue), unroutable, rejected.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from xroute.arrow_values import header_tables
from xroute.core.batch import BatchRouter, check_key
from xroute.core.errors import DatasetError, InvalidHeaders, UnknownExchange, XRouteError
from xroute.pipeline.names import (
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

# The columns the routing step adds (`route_columns`), as `xroute.spark.route` names them;
# the job names them apart from any dataset column.
QUEUES, ERROR = "queues", "error"
ROUTED_QUEUES, ROUTED_ERROR = "_xroute_queues", "_xroute_error"


@dataclass(frozen=True)
class RouteColumns:
    """Where each record's routing fields are, the exchange of records without one, and the
    names of the two columns the routing adds."""

    key: str
    exchange: str | None  # None: no exchange column
    headers: str | None  # None: no headers column
    default_exchange: str | None
    queues: str = QUEUES
    error: str = ERROR


@dataclass(frozen=True)
class Plan:
    """What routing a batch needs besides the topology: small, and shipped to every worker."""

    columns: tuple[str, ...]  # the dataset's own columns, in order
    default_exchange: str | None = None
    keep_columns: tuple[str, ...] = ()
    root: str = ""  # stripped from file URIs to make generated message ids
    key_column: str = KEY  # the columns that hold each record's routing key, exchange, headers
    exchange_column: str = EXCHANGE
    headers_column: str = HEADERS

    @property
    def record_columns(self) -> list[str]:
        """The columns of an unroutable or rejected record: message_id, the exchange, the
        rest (Spark's corrupt-record column aside: a rejected record's reason quotes it)."""
        rest = [c for c in self.columns if c not in (MESSAGE_ID, self.exchange_column, CORRUPT)]
        return [MESSAGE_ID, self.exchange_column, *rest]

    @property
    def route_columns(self) -> RouteColumns:
        """The columns the routing step reads, and the two it adds (named apart)."""
        return RouteColumns(
            self.key_column,
            self.exchange_column if self.exchange_column in self.columns else None,
            self.headers_column if self.headers_column in self.columns else None,
            self.default_exchange,
            ROUTED_QUEUES,
            ROUTED_ERROR,
        )


@dataclass
class Routed:
    """One batch, routed."""

    deliveries: pa.RecordBatch
    unroutable: pa.RecordBatch
    rejected: pa.RecordBatch
    input: int
    delivered: int  # messages with at least one delivery
    queue_counts: np.ndarray  # deliveries per queue, as BatchRouter.queues
    hits: np.ndarray  # messages per binding, as BatchRouter.bindings
    errors: Counter = field(default_factory=Counter)  # rejected records per error type


@dataclass
class Outcome:
    """Where each record of a batch went, by row: the routing without any output shape.

    Record ``delivery_rows[i]`` reached queue ``queue_ids[i]`` (rows ascending; a row once per
    queue). A row in ``errors`` was refused with that error; a row in ``unroutable`` reached
    no queue. Every row is in exactly one of the three.
    """

    delivery_rows: np.ndarray
    queue_ids: np.ndarray
    errors: dict[int, XRouteError]
    unroutable: np.ndarray
    hits: np.ndarray  # messages per binding, as BatchRouter.bindings


# Columns read as the message's basic properties, by exchange types that hash or pick on them.
PROPERTY_COLUMNS = ("message_id", "correlation_id", "timestamp")


def properties_of(
    router: BatchRouter, batch: pa.RecordBatch, message_ids: pa.Array | None = None
) -> list[dict[str, Any]] | None:
    """Each record's basic properties from the columns named as they are (`PROPERTY_COLUMNS`),
    with ``message_ids`` (the pipeline's own, generated where a record has none) as
    ``message_id``; None when the topology has no type that reads them."""
    if not router.reads_properties:
        return None
    names = batch.schema.names
    columns = {name: batch.column(name).to_pylist() for name in PROPERTY_COLUMNS if name in names}
    if message_ids is not None:
        columns["message_id"] = message_ids.to_pylist()
    return [
        {name: values[i] for name, values in columns.items() if values[i] is not None}
        for i in range(batch.num_rows)
    ]


def route_records(
    router: BatchRouter,
    keys: pa.Array,
    exchanges: pa.Array,
    headers: pa.Array | list[Any] | None = None,
    corrupt: pa.Array | None = None,
    properties: list[dict[str, Any]] | None = None,
    refused: dict[int, XRouteError] | None = None,
) -> Outcome:
    """Route the records given as columns: routing keys, exchanges (null: refused), headers
    (a map, a struct or JSON text, or a list of tables already decoded; None: no headers), Spark's corrupt-record column, and
    each record's basic properties (`properties_of`; None: none); ``refused``: rows already
    refused, with their errors.

    When a record has several faults, the one `Topology.route_message` would raise first is
    kept: the exchange, then the key, then the headers.
    """
    size = len(keys)
    errors: dict[int, XRouteError] = dict(refused or {})
    if corrupt is not None:  # a line Spark could not parse has no fields at all: that is all
        for i in _flat(pc.is_valid(corrupt)):
            text = corrupt[i].as_py()
            errors[i] = DatasetError(f"the record is not valid JSON: {text[:80]!r}", text)
    unread: dict[int, XRouteError] = {}  # records whose headers do not parse
    tables = headers if isinstance(headers, list) else None  # already decoded tables
    if headers is not None and tables is None:
        tables = _headers(headers, unread)
    hits = np.zeros(len(router.bindings), dtype=np.int64)
    found_rows: list[np.ndarray] = []
    found_queues: list[np.ndarray] = []
    unroutable: list[np.ndarray] = []
    for exchange, rows in _groups(exchanges, errors):
        if errors:
            refused = np.zeros(size, dtype=bool)
            refused[list(errors)] = True
            rows = rows[~refused[rows]]
        try:
            router.route(exchange, [])  # the exchange itself: unknown, or internal
        except XRouteError as error:
            errors.update((r, error) for r in rows.tolist())
            continue
        if unread:
            bad = np.array([r in unread for r in rows.tolist()], dtype=bool)
            for r in rows[bad].tolist():
                try:
                    check_key(keys[r].as_py())
                    errors[r] = unread[r]
                except XRouteError as error:
                    errors[r] = error
            rows = rows[~bad]
        if not len(rows):
            continue
        routes = router.route(
            exchange,
            keys if len(rows) == size else keys.take(rows),
            None if tables is None else [tables[r] for r in rows.tolist()],
            None if properties is None else [properties[r] for r in rows.tolist()],
        )
        for local, error in routes.errors.items():
            errors[int(rows[local])] = error
        counts = routes.counts()
        hits += routes.hits
        found_rows.append(np.repeat(rows, counts))
        found_queues.append(routes.queue_ids)
        nowhere = counts == 0
        if routes.errors:
            nowhere[list(routes.errors)] = False
        unroutable.append(rows[nowhere])
    delivery_rows = _concat(found_rows, np.int64)
    queue_ids = _concat(found_queues, np.int32)
    order = np.argsort(delivery_rows, kind="stable")
    return Outcome(
        delivery_rows=delivery_rows[order],
        queue_ids=queue_ids[order],
        errors=errors,
        unroutable=np.sort(_concat(unroutable, np.int64)),
        hits=hits,
    )


def reason(error: XRouteError) -> str:
    """How a refused record's error is written: ``ErrorType: message``."""
    return f"{type(error).__name__}: {error}"


def route_columns(
    router: BatchRouter,
    batch: pa.RecordBatch,
    columns: RouteColumns,
    hits: np.ndarray | None = None,
    dictionary: bool = False,
) -> pa.RecordBatch:
    """``batch`` with each record's queues and error as two more columns: THE routing step,
    the one per-batch function of `xroute.spark.route` and of the job, stream and diff.

    ``queues`` (list, never null): the queues the record reaches, sorted by name; empty when
    it is unroutable or refused. ``error`` (text): null, unless the record is refused, then
    ``ErrorType: message`` (`reason`). A text value that is not valid UTF-8 (Spark hands a
    JSON or CSV file's bytes on as they are) is made null and its record refused; a line
    Spark's JSON reader could not parse (`CORRUPT`) is refused. ``hits`` (messages per
    binding, as `BatchRouter.bindings`) is added to when given: a summary's side count that
    has no place in the rows. ``dictionary`` is for the writers in this process, which explode
    the lists: the queue names stay dictionary-encoded (no string copied) and unsorted; Spark
    gets them as sorted text.
    """
    refused: dict[int, XRouteError] = {}
    batch = _text_checked(batch, refused)
    names = batch.schema.names
    size = batch.num_rows
    keys = batch.column(columns.key)
    if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
        keys = keys.cast(pa.string())
    outcome = route_records(
        router,
        keys,
        exchanges_of(
            batch.column(columns.exchange) if columns.exchange else None,
            columns.default_exchange,
            size,
        ),
        batch.column(columns.headers) if columns.headers else None,
        batch.column(CORRUPT) if CORRUPT in names else None,
        properties_of(router, batch),
        refused,
    )
    if hits is not None:
        hits += outcome.hits
    rows, queue_ids = outcome.delivery_rows, outcome.queue_ids
    offsets = np.zeros(size + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=size), out=offsets[1:])
    if dictionary:
        # For a writer in this process, which explodes them: the order would cost a sort of
        # every delivery (a sixth of the job's CPU) for nothing.
        values = pa.DictionaryArray.from_arrays(pa.array(queue_ids, pa.int32()), queue_names(router))
    else:
        order = np.lexsort((_name_ranks(router)[queue_ids], rows))  # each row's queues by name
        values = queue_names(router).take(pa.array(queue_ids[order], pa.int32()))
    queues = pa.ListArray.from_arrays(
        pa.array(offsets), values, type=pa.list_(pa.field("element", values.type, nullable=False))
    )
    if outcome.errors:
        texts: list[str | None] = [None] * size
        for row, error in outcome.errors.items():
            texts[row] = reason(error)
        errors = pa.array(texts, pa.string())
    else:
        errors = pa.nulls(size, pa.string())
    return pa.RecordBatch.from_arrays(
        [*batch.columns, queues, errors],
        names=[*names, columns.queues, columns.error],
    )


def name_records(
    batch: pa.RecordBatch,
    plan: Plan,
    rows_seen: dict[str, int] | None = None,
    prefix: str = "",
) -> pa.RecordBatch:
    """``batch`` with its ``message_id`` column as text, a record without one named
    ``file:row`` (the pipeline's reading step: the routing reads the ids, for the exchange
    types that hash on them, and the outputs carry them). Records that come with no file
    (any DataFrame) are named ``prefix:row``, rows counted from 0 per prefix.

    ``rows_seen`` counts the rows read so far per file, for text formats whose rows Spark does
    not number (the caller keeps it across the batches of one task).
    """
    if FILE_COLUMN not in batch.schema.names:
        rows_seen = {} if rows_seen is None else rows_seen
        first = rows_seen.get(prefix, 0)
        rows_seen[prefix] = first + batch.num_rows
        numbers = pa.array(np.arange(first, first + batch.num_rows)).cast(pa.string())
        made = pc.binary_join_element_wise(pa.scalar(prefix), numbers, ":")
        given = batch.column(MESSAGE_ID).cast(pa.string()) if MESSAGE_ID in plan.columns else None
        ids = made if given is None else pc.if_else(pc.is_valid(given), given, made)
    else:
        ids = _message_ids(batch, plan, rows_seen)
    names = batch.schema.names
    if MESSAGE_ID in names:
        columns = list(batch.columns)
        columns[names.index(MESSAGE_ID)] = ids
        return pa.RecordBatch.from_arrays(columns, names=names)
    return _with_column(batch, MESSAGE_ID, ids)


def outputs_of(
    routed: pa.RecordBatch,
    plan: Plan,
    router: BatchRouter,
    hits: np.ndarray | None = None,
    columns: RouteColumns | None = None,
) -> Routed:
    """A routed batch (`route_columns` over `name_records`) as the three outputs of the job:
    one delivery row per (message, queue), the unroutable and the rejected records, with
    their counts (``hits``: what `route_columns` added up for this batch, zeros if None)."""
    columns = columns or plan.route_columns
    queues = routed.column(columns.queues)
    errors = routed.column(columns.error)
    size = routed.num_rows
    offsets = queues.offsets.to_numpy(zero_copy_only=False)
    counts = np.diff(offsets)
    names = queues.values
    if pa.types.is_dictionary(names.type) and names.dictionary.equals(queue_names(router)):
        queue_ids = names.indices.to_numpy(zero_copy_only=False)
    else:  # plain names (a DataFrame routed by Spark): numbered as the router numbers them
        names = names.dictionary_decode() if pa.types.is_dictionary(names.type) else names
        queue_ids = pc.index_in(names, queue_names(router)).to_numpy(zero_copy_only=False)
    queue_ids = queue_ids[offsets[0] : offsets[-1]].astype(np.int32, copy=False)
    delivery_rows = np.repeat(np.arange(size, dtype=np.int32), counts)
    refused = (
        np.zeros(size, dtype=bool)
        if errors.null_count == size
        else pc.is_valid(errors).to_numpy(zero_copy_only=False)
    )
    rejected_rows = np.flatnonzero(refused)
    unroutable_rows = np.flatnonzero((counts == 0) & ~refused)
    message_ids = routed.column(MESSAGE_ID)
    reasons = errors.take(pa.array(rejected_rows))
    records = _records(routed, plan, message_ids, _exchanges(routed, plan, size))
    return Routed(
        # Dictionary columns: a message's id is stored once per batch, however many queues
        # it reached, and Parquet writes them as dictionary pages without copying strings.
        deliveries=pa.RecordBatch.from_arrays(
            [
                pa.DictionaryArray.from_arrays(pa.array(delivery_rows), message_ids),
                pa.DictionaryArray.from_arrays(pa.array(queue_ids), queue_names(router)),
                *[routed.column(c).take(delivery_rows) for c in plan.keep_columns],
            ],
            names=[MESSAGE_ID, QUEUE, *plan.keep_columns],
        ),
        unroutable=records.take(unroutable_rows),
        rejected=_with_column(records.take(rejected_rows), REASON, reasons),
        input=size,
        delivered=int(np.count_nonzero(counts)),
        queue_counts=np.bincount(queue_ids, minlength=len(router.queues)),
        hits=hits if hits is not None else np.zeros(len(router.bindings), dtype=np.int64),
        # The error type is the reason's first word (`reason`).
        errors=Counter(text.split(":", 1)[0] for text in reasons.to_pylist()),
    )


def route_batch(
    router: BatchRouter, batch: pa.RecordBatch, plan: Plan, rows_seen: dict[str, int] | None = None
) -> Routed:
    """Route every record of ``batch`` into the job's three outputs: named, routed by
    `route_columns` (the one routing step), split by `outputs_of`; see the module docstring."""
    hits = np.zeros(len(router.bindings), dtype=np.int64)
    named = name_records(batch, plan, rows_seen)
    routed = route_columns(router, named, plan.route_columns, hits, dictionary=True)
    return outputs_of(routed, plan, router, hits)


_RANKS: dict[int, tuple[BatchRouter, np.ndarray]] = {}


def _name_ranks(router: BatchRouter) -> np.ndarray:
    """Each queue id's rank in name order, computed once per router."""
    cached = _RANKS.get(id(router))
    if cached is None or cached[0] is not router:
        ranks = np.empty(len(router.queues), dtype=np.int64)
        ranks[np.argsort(np.array(router.queues, dtype=object), kind="stable")] = np.arange(
            len(router.queues)
        )
        cached = _RANKS[id(router)] = (router, ranks)
    return cached[1]


# ---------------------------------------------------------------------- the columns


def _text_checked(batch: pa.RecordBatch, refused: dict[int, XRouteError]) -> pa.RecordBatch:
    """The batch with every text value that is not valid UTF-8 (Spark hands a JSON or CSV
    file's bytes on as they are) made null, its record refused with the bytes in the reason:
    one bad record is rejected, the job goes on."""
    columns = list(batch.columns)
    for index, field in enumerate(batch.schema):
        column = columns[index]
        if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
            continue
        try:
            column.validate(full=True)  # a scan in C++: the usual case costs nothing more
            continue
        except pa.ArrowInvalid:
            pass
        raw = column.cast(pa.large_binary() if pa.types.is_large_string(field.type) else pa.binary())
        bad = np.zeros(len(raw), dtype=bool)
        for row, value in enumerate(raw.to_pylist()):
            if value is None:
                continue
            try:
                value.decode("utf-8")
            except UnicodeDecodeError as error:
                bad[row] = True
                what = "the record" if field.name == CORRUPT else f"the record's {field.name!r}"
                refused.setdefault(
                    row,
                    DatasetError(
                        f"{what} is not valid UTF-8 ({error.reason} at byte {error.start}): "
                        f"{value[:80]!r}",
                        field.name,
                    ),
                )
        cleaned = pc.if_else(pa.array(bad), pa.scalar(None, raw.type), raw)
        columns[index] = cleaned.cast(field.type)
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def _message_ids(batch: pa.RecordBatch, plan: Plan, rows_seen: dict[str, int] | None) -> pa.Array:
    """The message_id column as text; a record without one is named ``file:row``."""
    given = batch.column(MESSAGE_ID).cast(pa.string()) if MESSAGE_ID in plan.columns else None
    if given is not None and given.null_count == 0:
        return given
    made = _generated_ids(batch, plan, rows_seen)
    return made if given is None else pc.if_else(pc.is_valid(given), given, made)


def _generated_ids(batch: pa.RecordBatch, plan: Plan, rows_seen: dict[str, int] | None) -> pa.Array:
    files = batch.column(FILE_COLUMN)
    rows = batch.column(ROW_COLUMN)
    if rows.null_count:
        # Text formats: each file is read whole and in order by one task, so counting the
        # rows of each file as they pass numbers them as the file does.
        if rows_seen is None:
            rows_seen = {}
        numbers = np.empty(batch.num_rows, dtype=np.int64)
        for i, path in enumerate(files.to_pylist()):
            numbers[i] = rows_seen.get(path, 0)
            rows_seen[path] = numbers[i] + 1
        rows = pa.array(numbers)
    encoded = files.dictionary_encode()
    names = pa.array(
        [relative_path(path, plan.root) for path in encoded.dictionary.to_pylist()], pa.string()
    )
    return pc.binary_join_element_wise(names.take(encoded.indices), rows.cast(pa.string()), ":")


_QUEUE_NAMES: dict[int, tuple[BatchRouter, pa.Array]] = {}


def queue_names(router: BatchRouter) -> pa.Array:
    """The router's queue names as an Arrow array, made once per router."""
    cached = _QUEUE_NAMES.get(id(router))
    if cached is None or cached[0] is not router:
        cached = _QUEUE_NAMES[id(router)] = (router, pa.array(router.queues, pa.string()))
    return cached[1]


def relative_path(uri: str, root: str) -> str:
    """The file's path under the dataset's folder (Spark and `Path.as_uri` spell file URIs
    differently, so both are compared as paths)."""
    path, prefix = local_path(uri), local_path(root).rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path.rsplit("/", 1)[-1]


def _exchanges(batch: pa.RecordBatch, plan: Plan, size: int) -> pa.Array:
    """The exchange each record is published to: its own, else ``--exchange``."""
    column = batch.column(plan.exchange_column) if plan.exchange_column in plan.columns else None
    return exchanges_of(column, plan.default_exchange, size)


def exchanges_of(column: pa.Array | None, default: str | None, size: int) -> pa.Array:
    """Each record's exchange as text: ``column``'s value, else ``default`` (None: refused)."""
    if column is not None:
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            column = column.cast(pa.string())
        if default is not None and column.null_count:
            column = column.fill_null(default)
        return column
    # Every record goes to the default: one dictionary entry, no string per row.
    return pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(size, dtype=np.int32)), pa.array([default], pa.string())
    )


def _groups(exchanges: pa.Array, errors: dict[int, XRouteError]) -> list[tuple[str, np.ndarray]]:
    """(exchange, rows) for each exchange named in the batch; a null exchange is refused."""
    encoded = exchanges if pa.types.is_dictionary(exchanges.type) else exchanges.dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    groups = []
    if encoded.indices.null_count:
        missing = np.flatnonzero(pc.is_null(encoded.indices).to_numpy(zero_copy_only=False))
        for r in missing.tolist():
            errors.setdefault(
                r, UnknownExchange(None, "the record names no exchange and no --exchange was given")
            )
        codes = np.where(pc.is_null(encoded.indices).to_numpy(zero_copy_only=False), -1, codes)
    names = encoded.dictionary.to_pylist()
    if len(names) == 1:
        rows = np.flatnonzero(codes == 0) if encoded.indices.null_count else np.arange(len(codes))
        return [(names[0], rows)]
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    for code, name in enumerate(names):
        groups.append((name, np.sort(order[bounds[code] : bounds[code + 1]])))
    return groups


def _headers(column: pa.Array, errors: dict[int, XRouteError]) -> list[Any]:
    """Each record's headers as a dict (None when absent); bad JSON is refused here.

    Records with the same headers text share one parsed dict (the router reads, never
    writes, them), so each distinct text is parsed and checked once.
    """
    if pa.types.is_map(column.type) or pa.types.is_struct(column.type):
        # Typed headers from Parquet or Spark: each field's Arrow type says its AMQP type
        # (xroute.arrow_values: int16 a short, float32 a float, timestamp a timestamp, a
        # decimal at the column's scale...). A null field is an absent header.
        return header_tables(column, errors.__setitem__)
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        return _field_tables(column, errors)
    encoded = column.dictionary_encode()
    parsed: list[Any] = []
    refused: dict[int, XRouteError] = {}
    for code, text in enumerate(encoded.dictionary.to_pylist()):
        try:
            parsed.append(json.loads(text))
        except ValueError as error:
            parsed.append(None)
            refused[code] = InvalidHeaders(
                f"headers are not valid JSON ({error}): {text[:80]!r}", HEADERS, text
            )
    codes = encoded.indices.to_pylist()
    if refused:
        errors.update((i, refused[c]) for i, c in enumerate(codes) if c in refused)
    return [None if c is None else parsed[c] for c in codes]


def _field_tables(column: pa.Array, errors: dict[int, XRouteError]) -> list[Any]:
    """Each record's headers from an AMQP field table, encoded (`xroute.core.field_table`, as a
    RabbitMQ stream's ``amqp_headers`` are): every value in its own AMQP type."""
    from xroute.core.field_table import decode_table

    encoded = column.dictionary_encode()
    parsed: list[Any] = []
    refused: dict[int, XRouteError] = {}
    for code, data in enumerate(encoded.dictionary.to_pylist()):
        try:
            if data[:1] in (b"{", b" ", b"\n", b"\t", b"\r"):
                # JSON stored as bytes, as before binary meant a field table (a table starts
                # with its 4-byte length: a first byte of "{" would be over 2 GB).
                parsed.append(json.loads(data))
                continue
            parsed.append(decode_table(data)[0])
        except (XRouteError, ValueError) as error:
            parsed.append(None)
            refused[code] = InvalidHeaders(
                f"headers are not an AMQP field table nor JSON ({error})", HEADERS, data[:40]
            )
    codes = encoded.indices.to_pylist()
    if refused:
        errors.update((i, refused[c]) for i, c in enumerate(codes) if c in refused)
    return [None if c is None else parsed[c] for c in codes]


def _records(
    batch: pa.RecordBatch, plan: Plan, message_ids: pa.Array, exchanges: pa.Array
) -> pa.RecordBatch:
    """The batch as unroutable/rejected records: message_id, exchange, then the rest."""
    arrays, names = [message_ids], [MESSAGE_ID]
    arrays.append(
        batch.column(plan.exchange_column) if plan.exchange_column in plan.columns else exchanges
    )
    names.append(plan.exchange_column)
    for name in plan.record_columns[2:]:
        arrays.append(batch.column(name))
        names.append(name)
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _with_column(batch: pa.RecordBatch, name: str, values: pa.Array) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([*batch.columns, values], names=[*batch.schema.names, name])


def _flat(mask: Any) -> list[int]:
    return np.flatnonzero(mask.to_numpy(zero_copy_only=False)).tolist()


def _concat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)
