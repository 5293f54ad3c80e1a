"""How a topology stores its bindings (issue 36: fewer bytes and objects a binding), with
what it hands out unchanged."""

from __future__ import annotations

import copy
import gc
import pickle
from dataclasses import FrozenInstanceError

import pytest

from xroute.bench.experiments.common import traced_bytes
from xroute.core.binding_table import BindingTable
from xroute.core.errors import BindingNotFound
from xroute.core.model import NO_ARGUMENTS, Binding, Destination, Queue
from xroute.core.topology import Topology


def test_bindings_and_queues_without_arguments_share_one_empty_table_that_refuses_change():
    topology = Topology()
    topology.declare_exchange("x", "topic")
    for name in ("q1", "q2"):
        topology.declare_queue(name)
        topology.bind("x", name, "a.*")
    topology.bind("x", "q1", "b", {"k": 1})
    plain = [b for b in topology.bindings("x") if not b.arguments]
    assert len(plain) == 2 and all(b.arguments is NO_ARGUMENTS for b in plain)
    assert topology.queues["q1"].arguments is NO_ARGUMENTS
    assert NO_ARGUMENTS == {} and isinstance(NO_ARGUMENTS, dict)
    for change in (lambda t: t.__setitem__("a", 1), lambda t: t.update(a=1),
                   lambda t: t.setdefault("a", 1), lambda t: t.pop("a"), lambda t: t.clear(),
                   lambda t: t.popitem(), lambda t: t.__delitem__("a")):
        with pytest.raises(TypeError):
            change(NO_ARGUMENTS)
    assert NO_ARGUMENTS == {}
    for made in (copy.copy(NO_ARGUMENTS), copy.deepcopy(NO_ARGUMENTS),
                 pickle.loads(pickle.dumps(NO_ARGUMENTS))):
        assert type(made) is dict and made == {}
        made["changeable"] = True  # a copy is an ordinary dict
    with_args = [b for b in topology.bindings("x") if b.arguments]
    assert with_args[0].arguments == {"k": 1} and type(with_args[0].arguments) is dict


def test_definitions_are_unchanged_by_the_shared_table():
    topology = Topology()
    topology.declare_exchange("x", "topic")
    topology.declare_queue("q")
    topology.bind("x", "q", "a.#")
    exported = topology.to_definitions()
    assert exported["bindings"] == [{"source": "x", "destination": "q",
                                     "destination_type": "queue", "routing_key": "a.#",
                                     "arguments": {}}]
    assert type(exported["bindings"][0]["arguments"]) is dict
    assert exported["queues"][0]["arguments"] == {}
    again = Topology.from_definitions(exported)
    assert again.route("x", "a.b") == {"q"}
    again.unbind("x", "q", "a.#")
    assert again.route("x", "a.b") == frozenset()


def test_queue_and_binding_keep_no_instance_dict():
    assert not hasattr(Queue("q"), "__dict__")
    assert Binding.__slots__  # one object a binding, no dict of its own


def test_a_binding_to_a_queue_keeps_the_queue_s_shared_name_and_reads_an_equal_destination():
    topology = Topology()
    topology.declare_exchange("x", "topic")
    topology.declare_exchange("y", "topic")
    declared = "".join(["dev", "1"])
    topology.declare_queue(declared)
    topology.bind("x", "".join(["dev", "1"]), "a.b")  # another string of the same name
    topology.bind("x", "y", "c.#", destination_type="exchange")
    to_queue, to_exchange = topology.bindings("x")
    assert to_queue.target is declared  # the queue table's string: one a queue
    assert to_queue.destination == Destination("queue", "dev1")
    assert type(to_queue.destination) is Destination and to_queue.destination.kind == "queue"
    assert to_exchange.target is to_exchange.destination == Destination("exchange", "y")
    assert repr(to_queue) == "Binding('x' -> queue 'dev1', key='a.b')"
    made = Binding("x", Destination("queue", "q"), "k", {"a": 1})
    assert made.target == "q" and made.destination == ("queue", "q")
    with pytest.raises(FrozenInstanceError):
        made.routing_key = "other"  # type: ignore[misc]
    for again in (copy.copy(made), copy.deepcopy(made), pickle.loads(pickle.dumps(made))):
        assert (again.source, again.destination, again.routing_key, again.arguments) == (
            "x", ("queue", "q"), "k", {"a": 1}) and again is not made
    assert topology.route("x", "a.b") == {"dev1"}
    topology.unbind("x", "dev1", "a.b")
    assert topology.route("x", "a.b") == frozenset()


def test_each_binding_with_its_own_queue_adds_two_tracked_objects_its_binding_and_answer():
    # A queue's `Destination` (a tuple subclass, never untracked) was a third (issue 36: the
    # collector was 19-27% of such a build).
    topology = Topology()
    topology.declare_exchange("x", "topic")
    names = [f"q{i}" for i in range(2_000)]
    keys = [f"a.b{i}" for i in range(2_000)]
    gc.collect()
    before = len(gc.get_objects())
    for name, key in zip(names, keys):
        topology.declare_queue(name)
        topology.bind("x", name, key)
    gc.collect()
    assert len(gc.get_objects()) - before <= 2 * len(names) + 20


def test_a_key_bound_to_many_queues_keeps_no_tuple_a_binding():
    # RabbitMQ 4.3's unicast shape binds every queue with 'broadcast.#': the topology's
    # table kept each binding after the first under a tuple (64 bytes; 101 bytes a binding
    # with its entry, where the table's two entries are 63 now).
    bindings = [Binding("x", Destination("queue", f"q{i}"), "broadcast.#", NO_ARGUMENTS)
                for i in range(2_000)]
    table = BindingTable()

    def add_all() -> None:
        for binding in bindings:
            table.add(binding, ())

    held = traced_bytes(add_all)[0] / len(bindings)
    assert held < 80
    assert all(table.find("x", b.target, "broadcast.#", ()) is b for b in bindings)


def test_a_key_bound_to_many_queues_routes_unbinds_and_lists_in_order():
    topology = Topology()
    topology.declare_exchange("x", "topic")
    topology.declare_exchange("y", "topic")
    names = [f"q{i}" for i in range(300)]
    for name in names:
        topology.declare_queue(name)
        topology.bind("x", name, "broadcast.#")
        topology.bind("y", name, "broadcast.#")  # the same target from another source
        topology.bind("x", name, "broadcast.#", {"a": 1})  # and with arguments
    assert len(topology.bindings()) == 3 * len(names)
    assert topology.route("x", "broadcast.k") == frozenset(names)
    for name in names[::2]:
        topology.unbind("x", name, "broadcast.#")
        topology.bind("x", name, "broadcast.#")  # bound again: the same identity, once
        topology.unbind("x", name, "broadcast.#")
        topology.unbind("x", name, "broadcast.#", {"a": 1})
    assert topology.route("x", "broadcast.k") == frozenset(names[1::2])
    assert topology.route("y", "broadcast.k") == frozenset(names)
    assert [b.target for b in topology.bindings("x")] == [
        name for name in names[1::2] for _ in range(2)]
    with pytest.raises(BindingNotFound):
        topology.unbind("x", names[0], "broadcast.#")
