"""The topology as it stood at each moment of a capture: a base definitions export, taken at a
known point, and the event exchange's changes around it (``binding.created``, ``queue.deleted``,
...), applied forwards after the base and undone backwards before it.

Version ``k`` is the topology after the first ``k`` events. A message is routed by the version
in force when the broker routed it: the events before it in the capture's own order (``seq``)
when the events and the messages were captured through one queue (`xroute capture`, whose
single queue the broker fills in the order things happened), else the events whose broker time
is not later than the message's traced time.

What events cannot carry is said, not guessed: an event of a kind that does not change routing
(connections, users, parameters) is skipped; a ``policy.*`` event is counted as a change xroute
does not replay; undoing ``exchange.deleted`` needs the exchange's type from an earlier
``exchange.created`` in the capture, and without one the exchange is missing from the versions
before its deletion (its messages are counted as routed to a missing exchange, never as agreeing).
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from xroute.core.errors import TraceFormatError, XRouteError
from xroute.core.topology import Topology

# Event kinds that change what a message routes to, and the ones that cannot be replayed.
TOPOLOGY_EVENTS = (
    "binding.created",
    "binding.deleted",
    "queue.created",
    "queue.deleted",
    "exchange.created",
    "exchange.deleted",
)
UNREPLAYED_EVENTS = ("policy.set", "policy.cleared", "operator.policy.set", "operator.policy.cleared")


@dataclass(frozen=True)
class TopologyEvent:
    """One topology change from the event exchange."""

    name: str  # binding.created, queue.deleted, ...
    fields: Mapping[str, Any]
    seq: int | None = None
    at: datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TopologyEvent:
        """The event of a trace table's ``event`` row (`xroute.traces.records.SCHEMA`)."""
        return cls(row["routing_key"], json.loads(row["headers"] or "{}"), row["seq"], row["traced_at"])

    def describe(self) -> str:
        """A one-line description for messages."""
        f = self.fields
        if self.name.startswith("binding."):
            return (
                f"{self.name} {f.get('source_name')!r} -> {f.get('destination_kind')} "
                f"{f.get('destination_name')!r} key {f.get('routing_key')!r}"
            )
        return f"{self.name} {f.get('name')!r}"


@dataclass
class _Cursor:
    topology: Topology
    version: int
    skipped: list[str] = field(default_factory=list)


class TopologyHistory:
    """Versions of a topology around a base export (see the module docstring).

    ``base_version`` is how many of ``events`` (in order) the base export already contains:
    ``len(events)`` when it was taken after the capture (the default), 0 when before.
    """

    def __init__(
        self,
        base: Mapping[str, Any],
        events: Sequence[TopologyEvent],
        base_version: int | None = None,
        *,
        order: str = "seq",
        engine: str | None = None,
    ) -> None:
        self.base = dict(base)
        if order not in ("seq", "time"):
            raise TraceFormatError(f"history order must be 'seq' or 'time', got {order!r}")
        key = (lambda e: e.seq if e.seq is not None else -1) if order == "seq" else (
            lambda e: e.at.timestamp() if e.at else float("-inf")
        )
        events = sorted(events, key=key)  # stable: equal positions keep the capture's order
        self.events = [e for e in events if e.name in TOPOLOGY_EVENTS]
        self.unreplayed = [e for e in events if e.name in UNREPLAYED_EVENTS]
        self.base_version = len(self.events) if base_version is None else base_version
        if not 0 <= self.base_version <= len(self.events):
            raise TraceFormatError(
                f"base_version {self.base_version} is outside 0..{len(self.events)} events"
            )
        self.order = order
        self.engine = engine
        self._positions = [key(e) for e in self.events]
        self._cursor: _Cursor | None = None

    def __len__(self) -> int:
        """The number of versions: one more than the number of replayed events."""
        return len(self.events) + 1

    def version_at(self, seq: int | None = None, at: datetime | None = None) -> int:
        """The version in force for a message at capture position ``seq`` or time ``at``."""
        if self.order == "seq":
            if seq is None:
                raise TraceFormatError("a history ordered by capture position needs the seq")
            return bisect_right(self._positions, seq)
        if at is None:
            raise TraceFormatError("a history ordered by time needs the message's traced time")
        return bisect_right(self._positions, at.timestamp())

    def topology(self, version: int) -> Topology:
        """The topology of ``version`` (a cursor moved event by event; do not keep it across
        calls: the next call may change it)."""
        if not 0 <= version <= len(self.events):
            raise TraceFormatError(f"no version {version}: there are {len(self)} versions")
        cursor = self._cursor
        if cursor is None:  # events replay forwards and undo backwards from any version
            cursor = self._cursor = _Cursor(self._fresh_base(), self.base_version)
        while cursor.version < version:
            self._apply(cursor, self.events[cursor.version], forward=True)
            cursor.version += 1
        while cursor.version > version:
            cursor.version -= 1
            self._apply(cursor, self.events[cursor.version], forward=False)
        return cursor.topology

    @property
    def skipped(self) -> list[str]:
        """Changes that could not be replayed on the versions built so far, with the reason."""
        return list(self._cursor.skipped) if self._cursor else []

    def _fresh_base(self) -> Topology:
        kwargs = {"engine": self.engine} if self.engine else {}
        return Topology.from_definitions(self.base, **kwargs)

    def _apply(self, cursor: _Cursor, event: TopologyEvent, forward: bool) -> None:
        topology, f = cursor.topology, event.fields
        created = event.name.endswith(".created")
        adding = created == forward
        try:
            if event.name.startswith("binding."):
                args = (
                    f["source_name"],
                    f["destination_name"],
                    f.get("routing_key", ""),
                    f.get("arguments") or {},
                    f.get("destination_kind", "queue"),
                )
                if adding:
                    topology.bind(*args)
                else:
                    topology.unbind(*args)
            elif event.name.startswith("queue."):
                if adding:
                    topology.declare_queue(f["name"], arguments=f.get("arguments") or {})
                else:
                    topology.delete_queue(f["name"])
            elif event.name.startswith("exchange."):
                if adding:
                    declared = f if created else self._declaration_of(f["name"], event)
                    topology.declare_exchange(
                        f["name"],
                        declared["type"],
                        internal=bool(declared.get("internal", False)),
                        arguments=declared.get("arguments") or {},
                    )
                else:
                    topology.delete_exchange(f["name"])
        except (XRouteError, KeyError) as error:
            way = "replaying" if forward else "undoing"
            cursor.skipped.append(f"{way} {event.describe()}: {error}")

    def _declaration_of(self, name: str, deleted: TopologyEvent) -> Mapping[str, Any]:
        """The fields of the last ``exchange.created`` for ``name`` before ``deleted``."""
        index = self.events.index(deleted)
        for event in reversed(self.events[:index]):
            if event.name == "exchange.created" and event.fields.get("name") == name:
                return event.fields
        raise TraceFormatError(
            f"cannot undo exchange.deleted {name!r}: its type is not in the capture (no earlier "
            "exchange.created event)"
        )
