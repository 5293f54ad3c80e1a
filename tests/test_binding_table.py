"""A topology's bindings by identity (`xroute.core.binding_table`): a key's first binding is
kept under the key's string, the others under themselves (found by target). Whatever the
order of binds and unbinds, the topology knows exactly the bindings a plain list of
identities knows, in the same order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xroute import Topology
from xroute.bench.experiments.common import traced_bytes
from xroute.core.binding_table import BindingTable
from xroute.core.errors import BindingNotFound
from xroute.core.model import Binding, Destination

# Few values of each part, so that keys, sources and targets repeat across bindings.
identities = st.tuples(
    st.sampled_from(["t", "u"]),  # source exchange
    st.sampled_from([("queue", "q1"), ("queue", "q2"), ("exchange", "e"), ("queue", "e")]),
    st.sampled_from(["a.b", "a.*", "#", "e"]),  # binding key (also a queue's name: "e")
    st.sampled_from([None, {}, {"x": 1}, {"x": 1.0}, {"x": "1"}]),
)
steps = st.lists(st.tuples(st.sampled_from(["bind", "bind", "unbind"]), identities),
                 max_size=40)


def frozen_of(arguments: dict | None) -> tuple:
    """The identity's arguments part, as the topology compares them (by typed value)."""
    from xroute.core.headers import frozen_arguments

    return frozen_arguments(arguments) if arguments else ()


@settings(max_examples=200, deadline=None)
@given(steps)
def test_binds_and_unbinds_keep_the_identities_and_order_of_a_plain_list(steps):
    topology = Topology()
    for name in ("t", "u", "e"):
        topology.declare_exchange(name, "topic")
    for queue in ("q1", "q2", "e"):
        topology.declare_queue(queue)
    model: list[tuple] = []  # identities, in the order bound
    for action, (source, (kind, name), key, arguments) in steps:
        identity = (source, kind, name, key, frozen_of(arguments))
        if action == "bind":
            topology.bind(source, name, key, arguments, destination_type=kind)
            if identity not in model:
                model.append(identity)
        elif identity in model:
            topology.unbind(source, name, key, arguments, destination_type=kind)
            model.remove(identity)
        else:
            with pytest.raises(BindingNotFound):
                topology.unbind(source, name, key, arguments, destination_type=kind)
        assert [(b.source, b.destination.kind, b.destination.name, b.routing_key,
                 frozen_of(b.arguments)) for b in topology.bindings()] == model


def test_a_key_s_string_is_taken_by_its_first_binding_and_freed_by_its_removal():
    table = BindingTable()
    q1, q2 = Destination("queue", "q1"), Destination("queue", "q2")  # `find` takes the targets
    first, second = Binding("t", q1, "k", {}), Binding("t", q2, "k", {})
    table.add(first, ())
    table.add(second, ())
    assert table.find("t", "q1", "k", ()) is first and table.find("t", "q2", "k", ()) is second
    assert table.find("u", "q1", "k", ()) is None
    assert table.find("t", "q1", "k", (("x", 1),)) is None
    table.remove(first)  # the second keeps its tuple; the string is free
    assert table.find("t", "q1", "k", ()) is None and table.find("t", "q2", "k", ()) is second
    third = Binding("u", q1, "k", {})
    table.add(third, ())  # takes the free string
    assert table.find("u", "q1", "k", ()) is third and table.find("t", "q2", "k", ()) is second
    assert list(table.values()) == [second, third] and len(table) == 2
    table.remove(second)
    table.remove(third)
    assert len(table) == 0 and table.find("t", "q2", "k", ()) is None


def test_a_key_s_second_binding_costs_its_table_entries_alone():
    # Each key bound to two queues: the second binding was kept under a tuple (64 bytes,
    # 164 a binding with its entries); a dict of its own would be 232.
    firsts = [Binding("x", Destination("queue", f"a{i}"), f"k{i}", {}) for i in range(2_000)]
    seconds = [Binding("x", Destination("queue", f"b{i}"), f"k{i}", {}) for i in range(2_000)]
    table = BindingTable()
    _add_all(table, firsts)
    held = traced_bytes(lambda: _add_all(table, seconds))[0] / len(seconds)
    assert held < 130
    for first, second in zip(firsts, seconds):
        assert table.find("x", second.target, second.routing_key, ()) is second
        assert table.find("y", second.target, second.routing_key, ()) is None
        assert table.find("x", first.target, first.routing_key, ()) is first
    for first in firsts[::2]:
        table.remove(first)
    for second in seconds[1::2]:
        table.remove(second)
    assert list(table.values()) == [*firsts[1::2], *seconds[::2]]
    for second in seconds[::2]:
        assert table.find("x", second.target, second.routing_key, ()) is second


def _add_all(table: BindingTable, bindings: list[Binding]) -> None:
    for binding in bindings:
        table.add(binding, ())
