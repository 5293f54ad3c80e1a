"""How a topology stores its bindings (issue 36: fewer bytes and objects a binding), with
what it hands out unchanged."""

from __future__ import annotations

import copy
import pickle

import pytest

from xroute.core.model import NO_ARGUMENTS, Binding, Queue
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
