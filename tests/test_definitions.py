"""RabbitMQ definitions exports in and out."""

from __future__ import annotations

import json

import pytest

from xroute import DefinitionsError, InvalidArguments, Topology, UnknownQueue

EXPORT = {
    "rabbit_version": "3.10.8",
    "vhosts": [{"name": "/"}],
    "queues": [
        {"name": "q1", "vhost": "/", "durable": True, "auto_delete": False, "arguments": {"x-queue-type": "classic"}},
        {"name": "q2", "vhost": "/", "durable": False, "auto_delete": True, "arguments": {}},
        {"name": "lost", "vhost": "/", "durable": True, "auto_delete": False, "arguments": {}},
    ],
    "exchanges": [
        {"name": "logs", "vhost": "/", "type": "topic", "durable": True, "auto_delete": False, "internal": False, "arguments": {"alternate-exchange": "ae"}},
        {"name": "ae", "vhost": "/", "type": "fanout", "durable": True, "auto_delete": False, "internal": False, "arguments": {}},
        {"name": "hdr", "vhost": "/", "type": "headers", "durable": True, "auto_delete": False, "internal": True, "arguments": {}},
        {"name": "multi", "vhost": "/", "type": "x-delimiter", "durable": True, "auto_delete": False, "internal": False, "arguments": {}},
    ],
    "bindings": [
        {"source": "logs", "vhost": "/", "destination": "q1", "destination_type": "queue", "routing_key": "a.*.c", "arguments": {}},
        {"source": "logs", "vhost": "/", "destination": "hdr", "destination_type": "exchange", "routing_key": "#.hdr", "arguments": {}},
        {"source": "hdr", "vhost": "/", "destination": "q2", "destination_type": "queue", "routing_key": "", "arguments": {"x-match": "any", "k": 1}},
        {"source": "ae", "vhost": "/", "destination": "lost", "destination_type": "queue", "routing_key": "", "arguments": {}},
        {"source": "multi", "vhost": "/", "destination": "q1", "destination_type": "queue", "routing_key": "c1", "arguments": {}},
    ],
}


def test_load_and_route():
    t = Topology.from_definitions(EXPORT)
    assert t.route("logs", "a.b.c") == {"q1"}
    assert t.route("logs", "x.hdr", {"k": 1}) == {"q2"}
    assert t.route("logs", "x.hdr", {"k": 2}) == frozenset()  # matched hdr: no alternate
    assert t.route("logs", "nothing") == {"lost"}
    assert t.route("multi", ":c0:c1") == {"q1"}
    assert t.exchanges["hdr"].internal


def test_round_trip(tmp_path):
    path = tmp_path / "defs.json"
    path.write_text(json.dumps(EXPORT))
    first = Topology.from_definitions(path).to_definitions()
    again = Topology.from_definitions(first).to_definitions()
    assert again == first
    strip = lambda entries: sorted(  # noqa: E731
        (json.dumps({k: v for k, v in e.items() if k != "vhost"}, sort_keys=True) for e in entries)
    )
    for section in ("queues", "exchanges", "bindings"):
        assert strip(first[section]) == strip(EXPORT[section]), section


def test_path_and_json_text_are_both_read(tmp_path):
    path = tmp_path / "defs.json"
    path.write_text(json.dumps(EXPORT))
    assert Topology.from_definitions(str(path)).route("logs", "a.b.c") == {"q1"}
    assert Topology.from_definitions(json.dumps(EXPORT)).route("logs", "a.b.c") == {"q1"}


def test_vhost_choice():
    other = json.loads(json.dumps(EXPORT))
    for section in ("queues", "exchanges", "bindings"):
        for entry in other[section]:
            entry["vhost"] = "staging"
    both = {s: EXPORT[s] + other[s] for s in ("queues", "exchanges", "bindings")}
    with pytest.raises(DefinitionsError, match="staging"):
        Topology.from_definitions(both)
    assert Topology.from_definitions(both, vhost="staging").route("logs", "a.b.c") == {"q1"}
    with pytest.raises(DefinitionsError, match="'prod'"):
        Topology.from_definitions(both, vhost="prod")


def test_alternate_exchange_from_a_policy():
    defs = json.loads(json.dumps(EXPORT))
    defs["exchanges"][0]["arguments"] = {}
    defs["policies"] = [
        {"vhost": "/", "name": "ae", "pattern": "^logs$", "apply-to": "exchanges", "priority": 1, "definition": {"alternate-exchange": "ae"}},
        {"vhost": "/", "name": "low", "pattern": ".*", "apply-to": "all", "priority": 0, "definition": {"alternate-exchange": "missing"}},
        {"vhost": "/", "name": "queues", "pattern": ".*", "apply-to": "queues", "priority": 9, "definition": {"max-length": 1}},
    ]
    t = Topology.from_definitions(defs)
    assert t.route("logs", "nothing") == {"lost"}
    assert t.exchanges["multi"].alternate_exchange == "missing"
    assert t.to_definitions()["policies"] == defs["policies"]


@pytest.mark.parametrize(
    "text,message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"queues": {"a": 1}}', "'queues' must be a list"),
        ('{"queues": [{"durable": true}]}', "has no 'name'"),
        ('{"exchanges": [{"name": "x"}]}', "has no 'type'"),
        ('{"exchanges": [{"name": "x", "type": "topic", "durable": "yes"}]}', "'durable' must be bool"),
    ],
)
def test_malformed_definitions(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(DefinitionsError, match=message):
        Topology.from_definitions(path)


def test_missing_file():
    with pytest.raises(DefinitionsError, match="cannot read"):
        Topology.from_definitions("/nonexistent/defs.json")


def test_semantic_errors_keep_their_type_and_say_where():
    dangling = {"exchanges": [{"name": "x", "type": "topic"}], "bindings": [{"source": "x", "destination": "gone", "destination_type": "queue", "routing_key": "#"}]}
    with pytest.raises(UnknownQueue, match="gone"):
        Topology.from_definitions(dangling)
    bad_match = {
        "exchanges": [{"name": "h", "type": "headers"}],
        "queues": [{"name": "q"}],
        "bindings": [{"source": "h", "destination": "q", "destination_type": "queue", "routing_key": "", "arguments": {"x-match": "most"}}],
    }
    with pytest.raises(InvalidArguments, match="most"):
        Topology.from_definitions(bad_match)
