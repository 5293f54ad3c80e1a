"""One bind or unbind between routes (issue 36, goal 5: at most 10 bulk binds): the work a
change does, counted, and routes after each change equal to the reference engine's, with a
`BatchRouter` watching the topology as the contact bench has it. No timing is asserted: the
tests count calls that the change path no longer makes."""

from __future__ import annotations

import gc
import weakref

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from xroute import Topology
from xroute.core.batch import BatchRouter
from xroute.engines.auto import AutoEngine
from xroute.engines.shapes import ShapeIndex

QUEUES = ["q0", "q1", "q2", "churn"]
WORDS = ["a", "b", "c", "*", "#"]
KEYS = ["a", "a.b", "b.a", "a.b.c", "c", "b.c.a", "a.a", ""]

patterns = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(".".join)


def _topology(engine: str = "auto", route_cache: bool = True) -> Topology:
    topology = Topology(engine, route_cache)
    topology.declare_exchange("x", "topic")
    for queue in QUEUES:
        topology.declare_queue(queue)
    return topology


@settings(max_examples=150, deadline=None)
@given(bound=st.lists(st.tuples(patterns, st.sampled_from(QUEUES)), max_size=12),
       churn=st.lists(st.tuples(patterns, st.sampled_from(QUEUES)), min_size=1, max_size=10))
def test_routes_between_changes_equal_the_reference_with_a_router_watching(bound, churn):
    """Each churn pattern bound, then unbound, between routes of every key (the route cache
    warm), with a router watching: every route equals a cacheless reference topology's."""
    topology, truth = _topology(), _topology("reference", route_cache=False)
    for pattern, queue in bound:
        for each in (topology, truth):
            each.bind("x", queue, pattern)
    router = BatchRouter(topology)
    router.route("x", pa.array(KEYS * 2))
    for pattern, queue in churn:
        for change in ("bind", "unbind"):
            assert [topology.route("x", key) for key in KEYS] == [
                truth.route("x", key) for key in KEYS]
            if change == "unbind" and (pattern, queue) in bound:
                continue  # bound before the churn: left as it is
            for each in (topology, truth):
                getattr(each, change)("x", queue, pattern)
        routed = router.route("x", pa.array(KEYS))
        assert [routed.queues(i) for i in range(len(KEYS))] == [
            truth.route("x", key) for key in KEYS]


def test_a_change_reads_its_watchers_without_iterating_a_weak_set(monkeypatch):
    """A bind and an unbind with a router watching: no `WeakSet` copied to be iterated (its
    iteration guard cost 2-3 µs each time, twice a change in the topology and once in the
    router), and the router is still told of both."""
    topology = _topology()
    topology.bind("x", "q0", "a.#")
    router = BatchRouter(topology)
    router.route("x", pa.array(["a.b", "a.b"]))
    told = []
    real_changing, real_changed = router.topology_changing, router.binding_changed
    router.topology_changing = lambda *args: told.append(args) or real_changing(*args)
    router.binding_changed = lambda *args: told.append(args) or real_changed(*args)
    iterated = []
    real_iter = weakref.WeakSet.__iter__

    def counted(self):
        iterated.append(self)
        return real_iter(self)

    monkeypatch.setattr(weakref.WeakSet, "__iter__", counted)
    topology.bind("x", "churn", "*.b")
    topology.unbind("x", "churn", "*.b")
    assert iterated == []
    assert [(args[0], args[1]) if args[0] == "binding" else (args[0].routing_key, args[1])
            for args in told] == [("binding", "x"), ("*.b", True), ("binding", "x"),
                                  ("*.b", False)]
    assert router.bindings[-1].routing_key == "*.b"


def test_a_dropped_watcher_is_forgotten():
    topology = _topology()
    router = BatchRouter(topology)
    topology.watch(router)  # watched once, however often asked
    assert len(topology._watchers) == 1
    del router
    gc.collect()
    topology.bind("x", "q0", "a.*")  # no watcher told; the dead reference goes
    assert not topology._watchers
    assert topology.route("x", "a.b") == {"q0"}


def test_the_usual_unbind_skips_the_full_identity_checks_and_the_engines_holds(monkeypatch):
    """`Topology.unbind` of a usual binding (no arguments, a declared queue and exchange, a
    short key) finds it in the topology's table without `_binding_identity`, and the topic
    exchange takes it from its matcher without asking the engine whether it holds it
    (`TopicMatcher.remove_known`); a literal unbind leaves the shapes' matcher as it was."""
    topology = _topology()
    for pattern in ("a.b", "a.*", "#.c"):
        topology.bind("x", "q0", pattern)
        topology.bind("x", "q1", pattern)
    calls = []
    for owner, name in ((Topology, "_binding_identity"), (AutoEngine, "holds"),
                        (ShapeIndex, "matcher")):
        real = getattr(owner, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)
    topology.unbind("x", "q1", "a.b")
    assert calls == []
    topology.unbind("x", "q1", "a.*")
    topology.unbind("x", "q1", "#.c")
    assert "_binding_identity" not in calls and "holds" not in calls
    assert [topology.route("x", key) for key in ("a.b", "a.c", "b.c")] == [
        {"q0"}, {"q0"}, {"q0"}]


def test_unusual_unbinds_still_take_the_checked_path():
    """Arguments, a queue of other properties, an unknown exchange or queue: the full path,
    with its errors, as before."""
    import pytest

    from xroute import XRouteError

    topology = _topology()
    topology.declare_queue("special", auto_delete=True)
    topology.bind("x", "special", "a.*")
    topology.bind("x", "q0", "a.*", {"x-match": "all"})
    topology.unbind("x", "special", "a.*")
    topology.unbind("x", "q0", "a.*", {"x-match": "all"})
    assert topology.route("x", "a.b") == frozenset()
    for args in (("nowhere", "q0", "a.*"), ("x", "nowhere", "a.*"), ("", "q0", "a.*"),
                 ("x", "q0", "a.*")):
        with pytest.raises(XRouteError):
            topology.unbind(*args)
