"""Does a topology route traced messages where the broker routed them?

Each publish record holds the broker's own answer, ``routed_queues``. It is routed again with
the topology (or, with a `TopologyHistory`, with the topology of its moment) and the two sets
are compared:

- ``agree``: the same queues (an unroutable message agrees when both reached none);
- ``disagree``: ``missing`` lists queues the broker reached and xroute did not, ``extra`` the
  reverse;
- ``missing_exchange``: the message's exchange is not in the topology;
- ``unsupported_exchange``: a plugin exchange type xroute cannot route on the path;
- ``invalid``: the record cannot be routed at all (``reason`` says why).

None of the last three is ever counted as agreement. Pure: Arrow in, Arrow out, no Spark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from xroute.errors import UnknownExchange, UnknownExchangeType, XRouteError
from xroute.model import Binding
from xroute.topology import Exchange, Topology
from xroute.traces.history import TopologyHistory
from xroute.traces.records import PUBLISH

AGREE = "agree"
DISAGREE = "disagree"
MISSING_EXCHANGE = "missing_exchange"
UNSUPPORTED_EXCHANGE = "unsupported_exchange"
INVALID = "invalid"
STATUSES = (AGREE, DISAGREE, MISSING_EXCHANGE, UNSUPPORTED_EXCHANGE, INVALID)

VERDICT_SCHEMA = pa.schema(
    [
        pa.field("seq", pa.int64()),
        pa.field("message_id", pa.string()),
        pa.field("status", pa.string()),
        pa.field("exchange", pa.string()),
        pa.field("routing_key", pa.string()),
        pa.field("headers", pa.string()),
        pa.field("routed_queues", pa.list_(pa.string())),  # the broker's
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
) -> Verdict:
    """Route one traced message with ``topology`` and compare with the broker's queues."""
    try:
        queues = topology.route(exchange, routing_key, headers)
    except UnknownExchange as error:
        return Verdict(MISSING_EXCHANGE, reason=str(error))
    except UnknownExchangeType as error:
        return Verdict(UNSUPPORTED_EXCHANGE, reason=str(error))
    except XRouteError as error:
        if type(error).__name__ == "UnsupportedExchangeType":  # plugin types xroute lacks
            return Verdict(UNSUPPORTED_EXCHANGE, reason=str(error))
        return Verdict(INVALID, reason=f"{type(error).__name__}: {error}")
    broker = set(routed_queues or ())
    if queues == broker:
        return Verdict(AGREE, queues)
    # Only a disagreement pays for the walk that says which bindings took part.
    visited: list[tuple[Exchange, list[Binding]]] = []
    topology.route_message(
        exchange, routing_key, headers, lambda at, matched, via: visited.append((at, matched))
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
    return Verdict(DISAGREE, queues, missing, extra, suspects)


def _keys(routing_key: str, headers: Mapping[str, Any] | None) -> list[str]:
    return [routing_key, *((headers or {}).get("CC") or [])]


def verify_batch(batch: pa.RecordBatch | pa.Table, against: Topology | TopologyHistory) -> pa.Table:
    """The verdicts of a batch of trace records (`xroute.traces.records.SCHEMA`); rows that
    are not publish records are left out (the caller counts them apart)."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    rows = table.select(
        ["seq", "record_type", "message_id", "exchange", "routing_key", "headers",
         "routed_queues", "traced_at"]
    ).to_pylist()
    rows = [r for r in rows if r["record_type"] == PUBLISH]
    history = against if isinstance(against, TopologyHistory) else None
    if history is not None:
        for row in rows:
            row["version"] = history.version_at(row["seq"], row["traced_at"])
        rows.sort(key=lambda r: r["version"])  # each version is built once per batch
    out = []
    parsed: dict[str, Any] = {}  # the same headers text recurs: parse it once
    for row in rows:
        version = row.get("version")
        topology = history.topology(version) if history is not None else against
        text = row["headers"]
        try:
            if text and text not in parsed:
                parsed[text] = json.loads(text)
            headers = parsed[text] if text else None
        except ValueError as error:
            verdict = Verdict(INVALID, reason=f"headers are not valid JSON: {error}")
        else:
            verdict = verify_message(
                topology, row["exchange"] or "", row["routing_key"] or "", headers, row["routed_queues"]
            )
        out.append(
            {
                "seq": row["seq"],
                "message_id": row["message_id"],
                "status": verdict.status,
                "exchange": row["exchange"],
                "routing_key": row["routing_key"],
                "headers": row["headers"],
                "routed_queues": row["routed_queues"],
                "xroute_queues": sorted(verdict.xroute_queues),
                "missing": verdict.missing,
                "extra": verdict.extra,
                "suspects": verdict.suspects,
                "topology_version": version,
                "reason": verdict.reason,
            }
        )
    out.sort(key=lambda r: r["seq"])
    return pa.Table.from_pylist(out, schema=VERDICT_SCHEMA)
