"""x-modulus-hash, x-random, x-local-random and x-recent-history against plain references."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xroute import InvalidArguments, PreconditionFailed, Topology
from xroute.core.errors import ReplayFailed
from xroute.erlang import phash2

QUEUES = ["q0", "q1", "b", "a9"]
bindings = st.lists(
    st.tuples(st.sampled_from(QUEUES), st.text(alphabet="ab.é", max_size=4)), max_size=10, unique=True
)
messages = st.lists(
    st.tuples(st.text(alphabet="ab.é", max_size=5), st.lists(st.text(alphabet="ab", max_size=3), max_size=2)),
    min_size=1,
    max_size=15,
)


def topology_with(kind: str, bound, rabbitmq=None) -> Topology:
    t = Topology(rabbitmq=rabbitmq)
    t.declare_exchange("x", kind)
    for queue in QUEUES:
        t.declare_queue(queue)
    for queue, key in bound:
        t.bind("x", queue, key)
    return t


@settings(max_examples=150, deadline=None)
@given(bindings, messages)
def test_modulus_hash_picks_by_the_hash_of_every_key(bound, sent):
    # Reference: the bindings as the route table orders them (key, then queue name), or from
    # 4.3 the destinations sorted; phash2 of [Key | CC] modulo their number.
    listed_3x = [q for _, q in sorted((key.encode(), q.encode()) for q, key in bound)]
    listed_43 = sorted(q.encode() for q, _ in bound)
    t3, t43 = topology_with("x-modulus-hash", bound, "3.10"), topology_with("x-modulus-hash", bound)
    for key, cc in sent:
        terms = [k.encode() for k in [key, *cc]]
        headers = {"CC": cc} if cc else None
        for t, listed in ((t3, listed_3x), (t43, listed_43)):
            expected = {listed[phash2(terms, 2**27) % len(listed)].decode()} if listed else set()
            assert t.route("x", key, headers) == expected


@settings(max_examples=60, deadline=None)
@given(bindings, messages)
def test_random_picks_among_the_candidates(bound, sent):
    t = topology_with("x-random", bound)
    every = {q for q, _ in bound}
    for key, _ in sent:
        assert t.route_candidates("x", key) == every
        picked = t.route("x", key, properties={"message_id": key})
        assert picked <= every and len(picked) == (1 if every else 0)
        # deterministic: the same message id, the same queue
        assert t.route("x", "other", properties={"message_id": key}) == picked


def test_a_seeded_generator_picks_as_the_caller_seeds():
    bound = [(q, "") for q in QUEUES]
    runs = []
    for _ in range(2):
        t = topology_with("x-random", bound)
        t.seed_random(7)
        runs.append([next(iter(t.route("x", "k"))) for _ in range(40)])
    assert runs[0] == runs[1]
    assert set(runs[0]) == set(QUEUES)  # 40 picks of 4 queues: every one comes up


def test_local_random_takes_queues_bound_with_the_empty_key():
    t = topology_with("x-local-random", [(q, "") for q in QUEUES])
    with pytest.raises(InvalidArguments, match="non empty binding key"):
        t.bind("x", "q0", "k")
    t.declare_exchange("other", "fanout")
    t.bind("x", "other", "", destination_type="exchange")
    assert t.route_candidates("x", "k") == set(QUEUES)


def test_recent_history_keeps_the_last_messages_and_replays_them():
    t = Topology()
    t.declare_exchange("h", "x-recent-history", arguments={"x-recent-history-length": 3})
    t.declare_exchange("next", "fanout")
    for queue in ("early", "late"):
        t.declare_queue(queue)
    t.bind("h", "early")
    for n in range(6):
        headers = {"x-recent-history-no-store": True} if n == 4 else None
        assert t.publish("h", f"k{n}", headers) == {"early"}
    assert t.route("h", "not-kept") == {"early"}  # route() keeps nothing
    late = t.bind("h", "late")
    assert [(m.routing_key, q) for m, q in late] == [(k, {"late"}) for k in ("k2", "k3", "k5")]
    t.bind("next", "early")
    replay = t.bind("h", "next", destination_type="exchange")
    # newest first, each routed through the bound exchange (as 3.10.8)
    assert [(m.routing_key, q) for m, q in replay] == [(k, {"early"}) for k in ("k5", "k3", "k2")]
    with pytest.raises(PreconditionFailed, match="x-recent-history-length"):
        t.declare_exchange("bad", "x-recent-history", arguments={"x-recent-history-length": 0})


def test_recent_history_refuses_an_exchange_its_history_cannot_pass():
    # 3.10.8: binding the history to an exchange through which a kept message routes nowhere
    # fails with 541 after delivering the newer messages; the binding is not made.
    t = Topology()
    t.declare_exchange("h", "x-recent-history")
    t.declare_exchange("d", "direct")
    t.declare_queue("qa")
    t.bind("d", "qa", "a")
    for key in ("a", "b", "a"):
        t.publish("h", key, payload=key)
    with pytest.raises(ReplayFailed, match="routing key 'b'") as refused:
        t.bind("h", "d", destination_type="exchange")
    assert [(r.message.payload, r.queues) for r in refused.value.replayed] == [("a", {"qa"})]
    assert t.bindings("h") == []
    assert t.route("h", "a") == set()
    t.bind("d", "qa", "b")
    assert len(t.bind("h", "d", destination_type="exchange")) == 3
    assert t.route("h", "a") == {"qa"}
