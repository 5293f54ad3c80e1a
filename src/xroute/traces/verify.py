"""Does a topology route traced messages where the broker routed them?

Each publish record holds the broker's own answer, ``routed_queues``. It is routed again with
the topology (or, with a `TopologyHistory`, with the topology of its moment) and the two sets
are compared:

- ``agree``: the same queues (an unroutable message agrees when both reached none);
- ``disagree``: ``missing`` lists queues the broker reached and xroute did not, ``extra`` the
  reverse;
- ``missing_exchange``: the message's exchange is not in the topology;
- ``unsupported_exchange``: a plugin exchange type xroute cannot route on the path;
- ``invalid``: the record cannot be routed at all (``reason`` says why);
- ``inexact``: xroute disagrees, but the record's headers came from a log that loses their
  AMQP types (the tracing plugin's JSON format): routed as plain values, the message could
  not be judged exactly, and it is not flagged (``reason`` says so).

None of the last four is ever counted as agreement.

The default exchange's ``routed_queues`` are the message's routing keys, whether or not such
queues exist: RabbitMQ's channel hands the trace the exchange's answer before it looks the
queues up (``rabbit_channel``: ``rabbit_trace:tap_in`` gets ``rabbit_exchange:route``'s names,
3.10.8 and 4.3.5 alike; ``rabbit_exchange:route`` answers the default exchange with every
routing key). So the names there that are no queue of the topology are left out of the
comparison: the trace cannot say whether they were queues of the broker. Pure: Arrow in,
Arrow out, no Spark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from xroute.core.batch import BatchRouter
from xroute.core.errors import (
    InvalidHeaders,
    UnknownExchange,
    UnknownExchangeType,
    UnsupportedExchangeType,
    XRouteError,
)
from xroute.core.field_table import decode_table
from xroute.core.model import Binding
from xroute.core.topology import DEFAULT_EXCHANGE, Exchange, Topology
from xroute.pipeline.transform import PROPERTY_COLUMNS, properties_of, route_records
from xroute.traces.history import TopologyHistory
from xroute.traces.records import PUBLISH

AGREE = "agree"
DISAGREE = "disagree"
MISSING_EXCHANGE = "missing_exchange"
UNSUPPORTED_EXCHANGE = "unsupported_exchange"
INVALID = "invalid"
INEXACT = "inexact"
STATUSES = (AGREE, DISAGREE, MISSING_EXCHANGE, UNSUPPORTED_EXCHANGE, INVALID, INEXACT)
# The record columns a verdict needs (`xroute.traces.records.SCHEMA`).
NEEDED = ["seq", "record_type", "message_id", "correlation_id", "timestamp", "exchange",
          "routing_key", "headers", "amqp_headers", "routed_queues", "traced_at"]
UNTYPED_REASON = (
    "the headers come from a log that loses their AMQP types (the tracing plugin's JSON "
    "format): routed as plain values, this message cannot be judged exactly"
)

VERDICT_SCHEMA = pa.schema(
    [
        pa.field("seq", pa.int64()),
        pa.field("message_id", pa.string()),
        pa.field("status", pa.string()),
        pa.field("exchange", pa.string()),
        pa.field("routing_key", pa.string()),
        pa.field("headers", pa.string()),
        pa.field("routed_queues", pa.list_(pa.string())),  # the broker's
        # For an agreeing message, headers, routed_queues and these are null: it went where the
        # broker put it, and its headers and queues are in the trace.
        pa.field("xroute_queues", pa.list_(pa.string())),
        pa.field("missing", pa.list_(pa.string())),
        pa.field("extra", pa.list_(pa.string())),
        pa.field("suspects", pa.list_(pa.string())),  # the bindings each difference points at
        pa.field("topology_version", pa.int64()),
        pa.field("reason", pa.string()),
    ]
)


@dataclass
class Verdict:
    """The comparison of one published message (see the module docstring)."""

    status: str
    xroute_queues: frozenset[str] = frozenset()
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)
    reason: str | None = None


def binding_name(binding: Binding) -> str:
    """A binding as the summary names it: ``source -> queue q key 'a.#'``."""
    kind, name = binding.destination
    args = f" arguments {json.dumps(binding.arguments, sort_keys=True, default=str)}" if binding.arguments else ""
    return f"{binding.source!r} -> {kind} {name!r} key {binding.routing_key!r}{args}"


def verify_message(
    topology: Topology,
    exchange: str,
    routing_key: str,
    headers: Mapping[str, Any] | None,
    routed_queues: list[str] | None,
    properties: Mapping[str, Any] | None = None,
    typed: bool = True,
) -> Verdict:
    """Route one traced message with ``topology`` and compare with the broker's queues
    (``properties``: its basic properties, for the types that hash or pick on them; not
    ``typed``: the headers lost their AMQP types, and a disagreement is ``inexact``)."""
    try:
        queues = topology.route(exchange, routing_key, headers, properties=properties)
    except UnknownExchange as error:
        return Verdict(MISSING_EXCHANGE, reason=str(error))
    except (UnknownExchangeType, UnsupportedExchangeType) as error:
        return Verdict(UNSUPPORTED_EXCHANGE, reason=str(error))
    except XRouteError as error:
        return Verdict(INVALID, reason=f"{type(error).__name__}: {error}")
    broker = set(routed_queues or ())
    if exchange == DEFAULT_EXCHANGE:  # its names are the keys, queues or not (the docstring)
        broker &= topology.queues.keys()
    if queues == broker:
        return Verdict(AGREE, queues)
    # Only a disagreement pays for the walk that says which bindings took part.
    visited: list[tuple[Exchange, list[Binding]]] = []
    topology.route_message(
        exchange, routing_key, headers, lambda at, matched, via: visited.append((at, matched)),
        properties=properties,
    )
    missing = sorted(broker - queues)
    extra = sorted(queues - broker)
    suspects: list[str] = []
    for queue in extra:  # the bindings that took the message there
        suspects += [
            binding_name(b) for _, matched in visited for b in matched
            if b.destination == ("queue", queue)
        ]
    for queue in missing:  # a binding the broker had and the topology lacks, from an exchange
        suspects += [  # the message visited; its key is not known, only the message's keys
            f"{at.name!r} -> queue {queue!r}: no binding matched (keys {_keys(routing_key, headers)})"
            for at, _ in visited
        ] or [f"queue {queue!r}: not reachable from exchange {exchange!r}"]
    if not typed and any(name != "CC" for name in headers or ()):
        return Verdict(INEXACT, queues, missing, extra, suspects, UNTYPED_REASON)
    return Verdict(DISAGREE, queues, missing, extra, suspects)


def _keys(routing_key: str, headers: Mapping[str, Any] | None) -> list[str]:
    return [routing_key, *((headers or {}).get("CC") or [])]


def verify_batch(
    batch: pa.RecordBatch | pa.Table, against: Topology | BatchRouter | TopologyHistory
) -> pa.Table:
    """The verdicts of a batch of trace records (`xroute.traces.records.SCHEMA`); rows that
    are not publish records are left out (the caller counts them apart).

    Against one topology (give a `BatchRouter` to reuse one) the whole batch is routed at once
    and only the messages that disagree are routed again one by one for their details; against
    a `TopologyHistory`, each message is routed by its version's topology."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    table = table.filter(pc.equal(table.column("record_type"), PUBLISH))
    if isinstance(against, TopologyHistory):
        return _verify_rows(table, against)
    router = against if isinstance(against, BatchRouter) else BatchRouter(against)
    return _verify_routed(table, router)


def _verify_routed(table: pa.Table, router: BatchRouter) -> pa.Table:
    """Route every record at once and compare each row's set of queues in numpy; only the rows
    that differ are routed again, one by one, for their details."""
    size = table.num_rows
    keys = table.column("routing_key").combine_chunks().fill_null("")
    exchanges = table.column("exchange").combine_chunks().fill_null("")
    properties = properties_of(router, table)  # None unless a type reads them
    headers, refused = _tables(table)
    outcome = route_records(
        router, keys, exchanges, headers, properties=properties, refused=refused
    )
    names = pa.array(router.queues, pa.string())
    broker = _known_names(table.column("routed_queues").combine_chunks(), exchanges, names)
    their_ids = pc.index_in(broker.flatten(), value_set=names).fill_null(-1)
    their_ids = their_ids.to_numpy(zero_copy_only=False).astype(np.int64)
    their_rows = pc.list_parent_indices(broker).to_numpy(zero_copy_only=False).astype(np.int64)
    differing = _rows_differing(
        size, outcome.delivery_rows.astype(np.int64), outcome.queue_ids.astype(np.int64),
        their_rows, their_ids, len(names) + 1,
    )
    differing[list(outcome.errors)] = True
    rows = np.flatnonzero(differing)
    status = np.full(size, AGREE, dtype=object)
    ours: list[list[str] | None] = [None] * size
    missing: list[list[str] | None] = [None] * size
    extra: list[list[str] | None] = [None] * size
    suspects: list[list[str] | None] = [None] * size
    reasons: list[str | None] = [None] * size
    if len(rows):
        detail = table.select(["exchange", "routing_key", "headers", "amqp_headers",
                               "routed_queues"])
        parsed: dict[Any, Any] = {}
        for i, record in zip(rows.tolist(), detail.take(rows).to_pylist()):
            verdict = _one(router.topology, record["exchange"], record["routing_key"],
                           record["headers"], record["routed_queues"], parsed,
                           properties[i] if properties is not None else None,
                           record["amqp_headers"])
            status[i], ours[i], reasons[i] = verdict.status, sorted(verdict.xroute_queues), verdict.reason
            missing[i], extra[i], suspects[i] = verdict.missing, verdict.extra, verdict.suspects
    strings = pa.list_(pa.string())
    # An agreeing message is named, not copied: its headers and queues are in the trace.
    agreeing = pa.array(~differing)
    return pa.table(
        {
            "seq": table.column("seq"),
            "message_id": table.column("message_id"),
            "status": pa.array(status, pa.string()),
            "exchange": table.column("exchange"),
            "routing_key": table.column("routing_key"),
            "headers": pc.if_else(agreeing, pa.scalar(None, pa.string()), table.column("headers")),
            "routed_queues": pc.if_else(agreeing, pa.scalar(None, strings), broker),
            "xroute_queues": pa.array(ours, strings),
            "missing": pa.array(missing, strings),
            "extra": pa.array(extra, strings),
            "suspects": pa.array(suspects, strings),
            "topology_version": pa.nulls(size, pa.int64()),
            "reason": pa.array(reasons, pa.string()),
        },
        schema=VERDICT_SCHEMA,
    )


def _tables(table: pa.Table) -> tuple[Any, dict[int, XRouteError]]:
    """The records' headers: the JSON column as it is when no record kept its types, else
    each record's table, typed where the trace kept it (``amqp_headers``), and the records
    whose JSON cannot be read."""
    typed = table.column("amqp_headers").combine_chunks()
    texts = table.column("headers").combine_chunks()
    if typed.null_count == len(typed):
        return texts, {}
    tables: list[Any] = []
    refused: dict[int, XRouteError] = {}
    for row, (data, text) in enumerate(zip(typed.to_pylist(), texts.to_pylist())):
        try:
            tables.append(decode_table(data, 0)[0] if data is not None
                          else json.loads(text) if text else None)
        except ValueError as error:
            tables.append(None)
            refused[row] = InvalidHeaders(f"headers are not valid JSON: {error}", None, text)
    return tables, refused


def _known_names(broker: pa.ListArray, exchanges: pa.Array, queues: pa.Array) -> pa.ListArray:
    """The broker's ``routed_queues`` less the names the default exchange lists that are no
    queue of the topology (the module's docstring)."""
    default = pc.equal(exchanges, DEFAULT_EXCHANGE)
    if not pc.any(default).as_py():
        return broker
    names = broker.flatten()
    parents = pc.list_parent_indices(broker)
    keep = pc.or_(pc.invert(pc.take(default, parents)), pc.is_in(names, value_set=queues))
    kept_rows = parents.filter(keep).to_numpy(zero_copy_only=False)
    counts = np.bincount(kept_rows, minlength=len(broker))
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, names.filter(keep), mask=broker.is_null())


def _rows_differing(
    size: int, our_rows: np.ndarray, our_ids: np.ndarray, their_rows: np.ndarray,
    their_ids: np.ndarray, stride: int,
) -> np.ndarray:
    """Rows whose sets of queue ids differ (an id of -1, a queue the topology lacks, always
    differs). Each side holds a row's queues once, so equal sets are equal sorted runs."""
    ours = np.sort(our_rows * stride + our_ids)
    theirs = np.sort(their_rows * stride + their_ids)
    our_counts = np.bincount(our_rows, minlength=size)
    their_counts = np.bincount(their_rows, minlength=size)
    differing = our_counts != their_counts
    differing[their_rows[their_ids < 0]] = True
    same_size = ~differing
    # Rows with as many queues on both sides line up run by run: compare them element-wise.
    ours_aligned = ours[np.repeat(same_size, our_counts)]
    theirs_aligned = theirs[np.repeat(same_size, their_counts)]
    mismatch = ours_aligned != theirs_aligned
    differing[ours_aligned[mismatch] // stride] = True
    return differing


def _one(
    topology: Topology, exchange: str | None, routing_key: str | None, text: str | None,
    routed_queues: list[str] | None, parsed: dict[Any, Any],
    properties: Mapping[str, Any] | None = None, typed: bytes | None = None,
) -> Verdict:
    """One record's verdict, its headers (``typed``: as an AMQP table, else the JSON
    ``text``, which lost their types) decoded once per distinct value."""
    source = typed if typed is not None else text
    try:
        if source and source not in parsed:
            parsed[source] = decode_table(typed, 0)[0] if typed is not None else json.loads(text)
        headers = parsed[source] if source else None
    except ValueError as error:
        return Verdict(INVALID, reason=f"headers are not valid JSON: {error}")
    return verify_message(
        topology, exchange or "", routing_key or "", headers, routed_queues, properties,
        typed is not None,
    )


def _verify_rows(table: pa.Table, history: TopologyHistory) -> pa.Table:
    """Each record routed by its version's topology, versions in order (each built once)."""
    rows = table.select([c for c in NEEDED if c != "record_type"]).to_pylist()
    for row in rows:
        row["version"] = history.version_at(row["seq"], row["traced_at"])
    rows.sort(key=lambda r: r["version"])
    out = []
    parsed: dict[str, Any] = {}
    for row in rows:
        version = row["version"]
        properties = {k: row[k] for k in PROPERTY_COLUMNS if row[k] is not None}
        verdict = _one(history.topology(version), row["exchange"], row["routing_key"],
                       row["headers"], row["routed_queues"], parsed, properties,
                       row["amqp_headers"])
        agrees = verdict.status == AGREE  # named, not copied (as `_verify_routed`)
        out.append(
            {
                "seq": row["seq"],
                "message_id": row["message_id"],
                "status": verdict.status,
                "exchange": row["exchange"],
                "routing_key": row["routing_key"],
                "headers": None if agrees else row["headers"],
                "routed_queues": None if agrees else row["routed_queues"],
                "xroute_queues": None if agrees else sorted(verdict.xroute_queues),
                "missing": None if agrees else verdict.missing,
                "extra": None if agrees else verdict.extra,
                "suspects": None if agrees else verdict.suspects,
                "topology_version": version,
                "reason": verdict.reason,
            }
        )
    out.sort(key=lambda r: r["seq"])
    return pa.Table.from_pylist(out, schema=VERDICT_SCHEMA)
