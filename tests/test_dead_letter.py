"""Dead-lettering against a plain reference of rabbit_dead_letter's rules, and its explanation."""

from __future__ import annotations

import pytest

from xroute import InvalidArguments, Topology, UnknownQueue
from xroute.tools.explain import explain_dead_letter, render_tree


def topology() -> Topology:
    t = Topology()
    t.declare_exchange("dlx", "topic")
    t.declare_exchange("other", "fanout")
    t.declare_queue("work", arguments={"x-dead-letter-exchange": "dlx"})
    t.declare_queue("keyed", arguments={"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "re.keyed"})
    t.declare_queue("by-policy")
    t.declare_queue("parked")
    t.declare_queue("retry", arguments={"x-dead-letter-exchange": "dlx"})
    t.policies = [
        {"name": "low", "pattern": "^by-", "apply-to": "queues", "priority": 1, "definition": {"dead-letter-exchange": "other"}},
        {"name": "high", "pattern": "policy$", "apply-to": "queues", "priority": 5, "definition": {"dead-letter-exchange": "dlx", "dead-letter-routing-key": "from.policy"}},
        {"name": "exchanges-only", "pattern": ".*", "apply-to": "exchanges", "priority": 9, "definition": {"dead-letter-exchange": "other"}},
    ]
    t.bind("dlx", "parked", "#")
    t.bind("dlx", "retry", "order.#")
    t.bind("other", "parked")
    return t


def test_original_keys_unless_a_dead_letter_key_is_set():
    t = topology()
    # original keys: the key, CC and BCC
    assert t.dead_letter("work", "x", {"CC": ["order.1"]}, "expired") == {"parked", "retry"}
    assert t.dead_letter("work", "x", {"BCC": ["order.1"]}, "expired") == {"parked", "retry"}
    copy = t.dead_letter_copy("keyed", "order.1", {"CC": ["order.2"]}, "maxlen")
    assert copy.keys == ["re.keyed"] and "CC" not in copy.headers
    assert t.route_dead_letter(copy) == {"parked"}
    # policy of the highest priority; the argument would win over it
    assert t.dead_letter_copy("by-policy", "k", None, "expired").keys == ["from.policy"]
    assert t.dead_letter("by-policy", "k", None, "expired") == {"parked"}
    assert t.dead_letter("parked", "k") == frozenset()  # no dead-letter exchange: dropped


def test_cycles_are_dropped_unless_rejected():
    t = topology()
    # retry dead-letters to dlx, whose 'order.#' binding leads back to retry
    assert t.dead_letter("retry", "order.1", None, "expired") == {"parked"}
    assert t.dead_letter("retry", "order.1", None, "rejected") == {"parked", "retry"}
    first = t.dead_letter_copy("work", "order.1", None, "rejected")
    assert t.route_dead_letter(first) == {"parked", "retry"}
    # retry expires it: retry itself closes a cycle; work is not in the way (it rejected)
    second = t.dead_letter_copy("retry", "", previous=first, reason="expired")
    assert [d["queue"] for d in second.headers["x-death"]] == ["retry", "work"]
    assert t.route_dead_letter(second) == {"parked"}


def test_bad_input_is_named():
    t = topology()
    with pytest.raises(InvalidArguments, match="dead-letter reason"):
        t.dead_letter("work", "k", None, "bored")
    with pytest.raises(UnknownQueue, match="nowhere"):
        t.dead_letter("nowhere", "k")


def test_explain_shows_the_dead_letter_path():
    t = topology()
    explanation = explain_dead_letter(t, "retry", "order.1", None, "expired")
    assert explanation.queues == {"parked"}
    assert explanation.cycle_dropped == ["retry"]
    assert explanation.visits[0].via == "dead-lettered"
    assert explanation.to_dict()["dead_letter"]["queue"] == "retry"
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(render_tree(explanation))
    text = console.export_text()
    assert "dead-lettered by queue 'retry'" in text and "cycle" in text
