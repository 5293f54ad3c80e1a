"""Exchange types xroute does not know: the definitions load, only messages that reach one fail."""

from __future__ import annotations

import pyarrow as pa
import pytest

from xroute import Topology, UnknownExchangeType, UnsupportedExchangeType, XRouteError
from xroute.core.batch import BatchRouter
from xroute.pipeline.transform import route_records
from xroute.tools.lint import lint_definitions

DEFINITIONS = {
    "queues": [{"name": "q"}, {"name": "r"}],
    "exchanges": [
        {"name": "plugin", "type": "x-made-up"},
        {"name": "other", "type": "x-also-unknown"},
        {"name": "t", "type": "topic"},
        {"name": "fallback", "type": "fanout", "arguments": {"alternate-exchange": "plugin"}},
    ],
    "bindings": [
        {"source": "plugin", "destination": "q", "destination_type": "queue", "routing_key": "k"},
        {"source": "t", "destination": "r", "destination_type": "queue", "routing_key": "a.#"},
        {"source": "t", "destination": "plugin", "destination_type": "exchange", "routing_key": "b.#"},
    ],
}


def test_an_unknown_type_loads_and_round_trips():
    topology = Topology.from_definitions(DEFINITIONS)
    assert topology.exchanges["plugin"].type == "x-made-up"
    back = topology.to_definitions()
    assert {e["name"]: e["type"] for e in back["exchanges"]}["plugin"] == "x-made-up"
    assert len(back["bindings"]) == 3
    assert Topology.from_definitions(back).to_definitions() == back


def test_only_messages_that_reach_it_fail():
    topology = Topology.from_definitions(DEFINITIONS)
    assert topology.route("t", "a.x") == {"r"}
    assert topology.route("", "q") == {"q"}
    with pytest.raises(UnsupportedExchangeType, match="'plugin'.*'x-made-up'") as caught:
        topology.route("plugin", "k")
    assert isinstance(caught.value, XRouteError)
    assert caught.value.exchange_type == "x-made-up"
    # through an exchange-to-exchange binding, and through an alternate exchange
    with pytest.raises(UnsupportedExchangeType, match="x-made-up"):
        topology.route("t", "b.c")
    with pytest.raises(UnsupportedExchangeType, match="x-made-up"):
        topology.route("fallback", "anything")


def test_the_library_refuses_to_declare_one_as_rabbitmq_does():
    with pytest.raises(UnknownExchangeType, match="x-made-up.*503"):
        Topology(rabbitmq="3.10").declare_exchange("x", "x-made-up")
    topology = Topology()  # 4.x
    with pytest.raises(UnknownExchangeType, match="x-made-up.*406"):
        topology.declare_exchange("x", "x-made-up")
    assert "x" not in topology.exchanges
    topology.declare_exchange("x", "x-made-up", allow_unknown_type=True)
    with pytest.raises(UnsupportedExchangeType):
        topology.route("x", "")


def test_lint_names_each_unknown_type():
    report = lint_definitions(DEFINITIONS)
    found = {f.exchange: f.message for f in report.findings if f.code == "unsupported-exchange-type"}
    assert set(found) == {"plugin", "other"}
    assert "x-made-up" in found["plugin"] and "x-also-unknown" in found["other"]


def test_batch_and_pipeline_reject_those_records_with_the_reason():
    topology = Topology.from_definitions(DEFINITIONS)
    router = BatchRouter(topology)
    routes = router.route("t", ["a.x", "b.c", "c"])
    assert routes.queues(0) == {"r"} and routes.queues(2) == frozenset()
    assert isinstance(routes.errors[1], UnsupportedExchangeType)
    outcome = route_records(
        router, pa.array(["a.x", "k", "b.q"]), pa.array(["t", "plugin", "t"])
    )
    assert outcome.delivery_rows.tolist() == [0]
    assert sorted(outcome.errors) == [1, 2]
    assert all("x-made-up" in str(error) for error in outcome.errors.values())


def test_batches_take_the_fast_walk_unless_a_plugin_type_is_reachable():
    t = Topology()
    t.declare_exchange("plain", "topic")
    t.declare_exchange("hash", "x-consistent-hash")
    t.declare_exchange("falls-to-hash", "direct", arguments={"alternate-exchange": "hash"})
    for queue in ("a", "b"):
        t.declare_queue(queue)
        t.bind("hash", queue, "1")
    t.bind("plain", "a", "x.#")
    t.bind("falls-to-hash", "b", "k")
    router = BatchRouter(t)
    assert router.reads_properties
    assert not router._reaches_a_plugin_type("plain")
    assert router._reaches_a_plugin_type("falls-to-hash")
    keys = ["x.1", "y", "k", "other", "x"]
    for exchange in ("plain", "falls-to-hash", "hash"):
        routes = router.route(exchange, keys)
        assert [routes.queues(i) for i in range(len(keys))] == [t.route(exchange, k) for k in keys]
