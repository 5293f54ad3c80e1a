"""A topology's queues (`xroute.core.queue_table`): a queue of the default properties is kept
as its name alone and read as a `Queue` made on demand. Whatever the order of declarations
and deletions, `Topology.queues` reads as a plain dict of `Queue` would, the bindings to a
queue share one name string (`Binding.target`) and read an equal `Destination`, and a
pickled topology keeps them all."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xroute import Topology
from xroute.core.errors import UnknownQueue
from xroute.core.model import NO_ARGUMENTS, Destination, Queue

properties = st.fixed_dictionaries({
    "durable": st.booleans(),
    "auto_delete": st.booleans(),
    "arguments": st.sampled_from([None, {}, {"x-max-length": 10}]),
})
steps = st.lists(st.tuples(st.sampled_from(["declare", "declare", "delete", "bind"]),
                           st.sampled_from(["q1", "q2", "q3", "x"]), properties), max_size=30)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_queues_read_as_a_plain_dict_of_queues_whatever_the_steps(steps):
    topology = Topology()
    topology.declare_exchange("x", "topic")
    model: dict[str, Queue] = {}
    for action, name, props in steps:
        if action == "declare":
            topology.declare_queue(name, **props)
            if name not in model:
                model[name] = Queue(name, props["durable"], props["auto_delete"],
                                    props["arguments"] or NO_ARGUMENTS)
        elif action == "delete":
            if name in model:
                topology.delete_queue(name)
                del model[name]
            else:
                with pytest.raises(UnknownQueue):
                    topology.delete_queue(name)
        elif name in model:
            topology.bind("x", name, f"k.{len(topology.bindings())}")
        queues = topology.queues
        assert list(queues) == list(model) and len(queues) == len(model)
        assert dict(queues.items()) == model
        for name, queue in model.items():
            assert name in queues and queues[name] == queue
            if not queue.arguments:
                assert queues[name].arguments is NO_ARGUMENTS
        assert "nope" not in queues and queues.get("nope") is None
        # every binding to a queue holds that queue's one name string, and reads its
        # Destination from it
        by_queue: dict[str, object] = {}
        for binding in topology.bindings():
            assert by_queue.setdefault(binding.destination.name, binding.target) is (
                binding.target) and type(binding.target) is str
            assert binding.destination == ("queue", binding.target)
            assert type(binding.destination) is Destination
    again = Topology.from_definitions(topology.to_definitions())
    assert dict(again.queues.items()) == model


def test_a_queue_s_properties_survive_the_definitions_round_trip():
    topology = Topology()
    topology.declare_queue("plain")
    topology.declare_queue("lasting", durable=False, auto_delete=True,
                           arguments={"x-message-ttl": 5})
    exported = topology.to_definitions()
    assert [(q["name"], q["durable"], q["auto_delete"], q["arguments"])
            for q in exported["queues"]] == [("plain", True, False, {}),
                                             ("lasting", False, True, {"x-message-ttl": 5})]
    again = Topology.from_definitions(exported)
    assert dict(again.queues.items()) == dict(topology.queues.items())


def test_a_queue_s_answer_alone_is_kept_in_its_entry_and_shared_by_every_exchange():
    topology = Topology()
    for exchange in ("x", "y"):
        topology.declare_exchange(exchange, "topic")
    topology.declare_queue("plain")
    topology.declare_queue("lasting", durable=False)  # kept as its `Queue`
    for queue in ("plain", "lasting"):
        topology.bind("x", queue, f"{queue}.a")
        topology.bind("x", queue, f"{queue}.b")
        topology.bind("y", queue, f"{queue}.c")
    for queue in ("plain", "lasting"):
        answers = [topology.route(x, f"{queue}.{k}") for x, k in (("x", "a"), ("x", "b"),
                                                                 ("y", "c"))]
        assert answers == [frozenset({queue})] * 3
        assert answers[0] is answers[1] is answers[2]  # one frozenset a queue, all exchanges
        assert topology.queues[queue].name == queue
    assert topology.queues["plain"] == Queue("plain", True, False, NO_ARGUMENTS)
    assert topology.queues["lasting"].durable is False
    (table,) = [t for t in topology.one_queue_answers() if "plain" in t]
    assert table["plain"] is topology.route("x", "plain.a") and "lasting" in table
    topology.delete_queue("plain")
    assert "plain" not in topology.queues and topology.route("x", "plain.a") == frozenset()
    topology.declare_queue("plain")
    topology.bind("y", "plain", "plain.c")
    assert topology.route("y", "plain.c") == {"plain"}
    assert [b.target for b in topology.bindings("y")] == ["lasting", "plain"]
