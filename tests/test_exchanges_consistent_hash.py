"""x-consistent-hash: the ring against a plain reference of the rules, and what each version
hashes (docs/semantics.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xroute import InvalidArguments, PreconditionFailed, Topology
from xroute.erlang import UNDEFINED, Atom, phash2
from xroute.exchanges.consistent_hash import jump_consistent_hash

QUEUES = ["q0", "q1", "q2", "q3"]
operations = st.lists(
    st.tuples(st.booleans(), st.sampled_from(QUEUES), st.integers(1, 6)), max_size=14
)
keys = st.lists(st.text(alphabet="ab.é1", max_size=6), min_size=1, max_size=20)


def reference_ring(ops) -> list[str]:
    """The rules in plain words: a destination's weight in buckets, appended when it has none;
    removing any binding to it removes all its buckets, the rest closing up."""
    ring: list[str] = []
    bound: set[tuple[str, int]] = set()
    for add, queue, weight in ops:
        if add and (queue, weight) not in bound:
            bound.add((queue, weight))
            if queue not in ring:
                ring += [queue] * weight
        elif not add and (queue, weight) in bound:
            bound.discard((queue, weight))
            ring = [q for q in ring if q != queue]
    return ring


def topology_of(ops, arguments=None, rabbitmq=None) -> Topology:
    t = Topology(rabbitmq=rabbitmq)
    t.declare_exchange("chx", "x-consistent-hash", arguments=arguments)
    for queue in QUEUES:
        t.declare_queue(queue)
    bound = set()
    for add, queue, weight in ops:
        if add and (queue, weight) not in bound:
            bound.add((queue, weight))
            t.bind("chx", queue, str(weight))
        elif not add and (queue, weight) in bound:
            bound.discard((queue, weight))
            t.unbind("chx", queue, str(weight))
    return t


@settings(max_examples=150, deadline=None)
@given(operations, keys)
def test_the_ring_follows_the_rules(ops, routing_keys):
    t = topology_of(ops)
    ring = reference_ring(ops)
    for key in routing_keys:
        expected = {ring[jump_consistent_hash(key.encode(), len(ring))]} if ring else set()
        assert t.route("chx", key) == expected
        # CC keys are never hashed: only the routing key
        assert t.route("chx", key, {"CC": ["other"]}) == expected


def test_weights_are_checked_as_rabbitmq_does():
    t = topology_of([])
    for bad in ("0", "-1", "a", "1.5", " 1", ""):
        with pytest.raises(InvalidArguments, match="x-consistent-hash"):
            t.bind("chx", "q0", bad)
    t.bind("chx", "q0", "+007")  # list_to_integer reads it
    assert t.route("chx", "k") == {"q0"}
    t43 = topology_of([], rabbitmq="4.3")
    with pytest.raises(InvalidArguments, match="10000"):
        t43.bind("chx", "q0", "10001")
    t43.bind("chx", "q0", "10000")


def test_exchange_arguments_are_checked():
    t = Topology()
    with pytest.raises(PreconditionFailed, match="mutually exclusive"):
        t.declare_exchange("a", "x-consistent-hash", arguments={"hash-header": "h", "hash-property": "message_id"})
    with pytest.raises(PreconditionFailed, match="Unsupported property: user_id"):
        t.declare_exchange("b", "x-consistent-hash", arguments={"hash-property": "user_id"})
    assert "a" not in t.exchanges and "b" not in t.exchanges


def _only_queue(t: Topology, **message) -> str:
    (queue,) = t.route("chx", "k", message.get("headers"), properties=message.get("properties"))
    return queue


def test_properties_and_headers_hash_as_each_version_does():
    ring = [(True, q, 3) for q in QUEUES]
    for value in (7, 123456, -3, "abc", 2.5, True):
        old = topology_of(ring, {"hash-header": "h"}, rabbitmq="3.12")
        new = topology_of(ring, {"hash-header": "h"}, rabbitmq="3.13")
        size = len(QUEUES) * 3
        typed = {int: "signedint", str: "longstr", float: "double", bool: "bool"}[type(value)]
        raw = value.encode() if isinstance(value, str) else value
        # up to 3.12 the {Type, Value} pair is hashed; from 3.13 the value, an integer as is
        assert _only_queue(old, headers={"h": value}) == QUEUES[
            jump_consistent_hash((Atom(typed), raw), size) // 3
        ]
        assert _only_queue(new, headers={"h": value}) == QUEUES[
            jump_consistent_hash(raw, size) // 3
        ]
    old = topology_of(ring, {"hash-header": "h"}, rabbitmq="3.10")
    assert _only_queue(old) == QUEUES[jump_consistent_hash(UNDEFINED, len(QUEUES) * 3) // 3]
    # 4.x (and 3.13.7) hash an absent header as undefined too (maps:get/3, PR #11808).
    for version in ("3.13", "4.0", None):
        new = topology_of(ring, {"hash-header": "h"}, rabbitmq=version)
        assert _only_queue(new) == QUEUES[jump_consistent_hash(UNDEFINED, 12) // 3]
    stamped = topology_of(ring, {"hash-property": "timestamp"})
    assert _only_queue(stamped, properties={"timestamp": 1700000000}) == QUEUES[
        jump_consistent_hash(b"1700000000", 12) // 3
    ]
    ided = topology_of(ring, {"hash-property": "message_id"})
    assert _only_queue(ided) == QUEUES[jump_consistent_hash(UNDEFINED, 12) // 3]
    assert phash2(UNDEFINED) != phash2(b"")  # an absent property is not an empty one


def test_bad_properties_are_named():
    t = topology_of([(True, "q0", 1)], {"hash-property": "timestamp"})
    assert t.route("chx", "k", properties={"timestamp": "1700000000"}) == {"q0"}
    for bad in ({"timestamp": "tomorrow"}, {"timestamp": -1}, {"colour": "blue"}, ["message_id"]):
        with pytest.raises(InvalidArguments):
            t.route("chx", "k", properties=bad)
