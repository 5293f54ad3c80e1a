"""`TopologyHistory`: a base export plus event-exchange changes gives, at every version, the
topology that stood then, whether the base was taken after the changes, before them, or
between; property-tested on random changes, events emitted as RabbitMQ emits them (a queue or
exchange delete first deletes its bindings, each with its own ``binding.deleted``)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xroute import Topology
from xroute.core.errors import TraceFormatError
from xroute.traces.history import TopologyEvent, TopologyHistory

QUEUES = ["q1", "q2", "q3"]
EXCHANGES = {"t": "topic", "h": "headers", "d": "direct"}
KEYS = ["a", "a.*", "#", ""]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("bind"), st.sampled_from(sorted(EXCHANGES)), st.sampled_from(QUEUES),
                  st.sampled_from(KEYS), st.sampled_from([None, {"x-match": "any", "n": 1}])),
        st.tuples(st.just("unbind_any")),
        st.tuples(st.just("delete_queue"), st.sampled_from(QUEUES)),
        st.tuples(st.just("declare_queue"), st.sampled_from(QUEUES)),
        st.tuples(st.just("delete_exchange"), st.sampled_from(sorted(EXCHANGES))),
        st.tuples(st.just("declare_exchange"), st.sampled_from(sorted(EXCHANGES))),
        st.tuples(st.just("e2e"), st.sampled_from(sorted(EXCHANGES)), st.sampled_from(sorted(EXCHANGES))),
    ),
    max_size=25,
)


def _binding_fields(b) -> dict:
    return {"source_name": b.source, "destination_kind": b.destination.kind,
            "destination_name": b.destination.name, "routing_key": b.routing_key,
            "arguments": dict(b.arguments)}


class Recorder:
    """A topology that records each change as the event exchange would announce it."""

    def __init__(self) -> None:
        self.topology = Topology()
        self.events: list[TopologyEvent] = []
        self.snapshots: list[dict] = []
        self.clock = datetime(2026, 11, 24, tzinfo=timezone.utc)

    def emit(self, name: str, fields: dict) -> None:
        self.clock += timedelta(milliseconds=1)
        self.events.append(TopologyEvent(name, fields, len(self.events) * 2, self.clock))
        self.snapshots.append(state(self.topology))

    def apply(self, op: tuple, rng: st.DataObject) -> None:
        t = self.topology
        kind = op[0]
        if kind == "bind" and op[1] in t.exchanges and op[2] in t.queues:
            args = op[4] if EXCHANGES[op[1]] == "headers" else None
            before = len(t.bindings())
            t.bind(op[1], op[2], op[3], args)
            if len(t.bindings()) != before:
                self.emit("binding.created", _binding_fields(t.bindings()[-1]))
        elif kind == "e2e" and op[1] in t.exchanges and op[2] in t.exchanges:
            before = len(t.bindings())
            t.bind(op[1], op[2], "a.#" if EXCHANGES[op[1]] == "topic" else "", destination_type="exchange")
            if len(t.bindings()) != before:
                self.emit("binding.created", _binding_fields(t.bindings()[-1]))
        elif kind == "unbind_any":
            ours = [b for b in t.bindings() if not b.source.startswith("amq.")]
            if ours:
                b = rng.draw(st.sampled_from(ours))
                t.unbind(b.source, b.destination.name, b.routing_key, b.arguments, b.destination.kind)
                self.emit("binding.deleted", _binding_fields(b))
        elif kind == "delete_queue" and op[1] in t.queues:
            for b in [b for b in t.bindings() if b.destination == ("queue", op[1])]:
                t.unbind(b.source, b.destination.name, b.routing_key, b.arguments, b.destination.kind)
                self.emit("binding.deleted", _binding_fields(b))
            t.delete_queue(op[1])
            self.emit("queue.deleted", {"name": op[1]})
        elif kind == "declare_queue" and op[1] not in t.queues:
            t.declare_queue(op[1])
            self.emit("queue.created", {"name": op[1], "arguments": {}})
        elif kind == "delete_exchange" and op[1] in t.exchanges:
            for b in [b for b in t.bindings() if op[1] in (b.source, b.destination.name if b.destination.kind == "exchange" else None)]:
                t.unbind(b.source, b.destination.name, b.routing_key, b.arguments, b.destination.kind)
                self.emit("binding.deleted", _binding_fields(b))
            t.delete_exchange(op[1])
            self.emit("exchange.deleted", {"name": op[1]})
        elif kind == "declare_exchange" and op[1] not in t.exchanges:
            t.declare_exchange(op[1], EXCHANGES[op[1]])
            self.emit("exchange.created", {"name": op[1], "type": EXCHANGES[op[1]], "arguments": {}})


def state(topology: Topology) -> dict:
    """What routing depends on: exchanges and their types, queues, bindings."""
    return {
        "exchanges": {n: e.type for n, e in topology.exchanges.items()},
        "queues": set(topology.queues),
        "bindings": {(b.source, b.destination, b.routing_key, tuple(sorted(b.arguments.items())))
                     for b in topology.bindings()},
    }


@settings(max_examples=60, deadline=None)
@given(ops, st.data(), st.sampled_from(["end", "start", "middle"]), st.sampled_from(["seq", "time"]))
def test_every_version_is_the_topology_that_stood_then(changes, data, base_at, order):
    recorder = Recorder()
    for name, kind in EXCHANGES.items():
        recorder.topology.declare_exchange(name, kind)
        recorder.emit("exchange.created", {"name": name, "type": kind, "arguments": {}})
    for op in changes:
        recorder.apply(op, data)
    # Version 0 is before every event; version k is what stood after the k-th.
    states = [{"exchanges": {}, "queues": set(), "bindings": set()}, *recorder.snapshots]
    base_version = {"end": len(recorder.events), "start": 0,
                    "middle": len(recorder.events) // 2}[base_at]
    base = replay(recorder.events[:base_version])
    history = TopologyHistory(base.to_definitions(), recorder.events, base_version, order=order)
    visiting = data.draw(st.permutations(range(len(history))))
    for version in visiting:
        got = state(history.topology(version))
        want = states[version]
        for built_in in ("", "amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match"):
            want["exchanges"].setdefault(built_in, got["exchanges"].get(built_in))
        assert got == want, (version, base_version, recorder.events)
        event = recorder.events[version - 1] if version else None
        if event is not None:  # the message right after an event sees its version
            position = event.seq if order == "seq" else None
            assert history.version_at(position, event.at) == version
    assert history.skipped == []


def replay(events: list[TopologyEvent]) -> Topology:
    """The topology after ``events``, built from nothing (as a base export at that point)."""
    history = TopologyHistory(Topology().to_definitions(), events, 0)
    return history.topology(len(events))


def test_an_exchange_deleted_without_its_creation_in_the_capture_is_said_not_guessed():
    base = Topology()
    events = [TopologyEvent("exchange.deleted", {"name": "gone"}, 1)]
    history = TopologyHistory(base.to_definitions(), events)
    assert "gone" not in history.topology(0).exchanges
    assert "its type is not in the capture" in history.skipped[0]


def test_bad_orders_and_versions_are_refused():
    with pytest.raises(TraceFormatError):
        TopologyHistory({}, [], order="alphabetical")
    with pytest.raises(TraceFormatError):
        TopologyHistory({}, [], 3)
    with pytest.raises(TraceFormatError):
        TopologyHistory({}, []).topology(1)
