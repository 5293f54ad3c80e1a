"""A live broker as a definitions source, against a real RabbitMQ: a private node with the
rabbitmq_management plugin enabled, on loopback, started here and stopped afterwards (whatever
broker ``make conformance`` found, this one is our own, so that /api/definitions holds only
what these tests declared).

A topology is declared through AMQP, read back through GET /api/definitions, and the
read-back topology must route every message as the one declared does, and as the broker
itself delivers it.
"""

from __future__ import annotations

import json
import random
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conformance.broker import Mirror
from tests.conformance.test_rabbitmq import (
    random_headers,
    random_headers_arguments,
    random_key,
    random_pattern,
)
from tests.conformance.typed import plain
from tests.rabbitmq_cases import Typed
from xroute import ManagementAuthFailed, Topology, VhostNotFound
from xroute.bench.rabbitmq import connect, private_node
from xroute.cli import EXIT_OK, cli
from xroute.core.headers import canonical
from xroute.sources.management import PASSWORD_VARIABLE, fetch_definitions

pytestmark = pytest.mark.conformance
XDIST_GROUP = "management-node"  # its private node, started once, in one xdist worker (tests/conftest.py)

PASSWORD = "guest"  # the private node's own guest user


@pytest.fixture(scope="module")
def node():
    with private_node(management=True) as started:
        yield started


@pytest.fixture
def mirror(node):
    connection = connect(node.amqp_url)
    m = Mirror(connection.channel(), "xroute-mgmt-", exclusive=False)
    yield m
    m.cleanup()
    connection.close()


def declare_random_graph(mirror: Mirror, rng: random.Random) -> list[tuple[str, str, dict]]:
    """Exchanges of every built-in type bound to each other, alternates, headers arguments of
    every value type; returns messages (exchange, key, headers) that exercise them."""
    names = [f"x{i}" for i in range(5)]
    kinds = {name: rng.choice(["direct", "fanout", "topic", "headers"]) for name in names}
    for name in names:
        mirror.exchange(name, kinds[name], alternate=rng.choice(names) if rng.random() < 0.4 else None)
    for q in range(4):
        mirror.queue(f"q{q}")
    for _ in range(25):
        source = rng.choice(names)
        key = random_pattern(rng) if kinds[source] == "topic" else random_key(rng)
        arguments = random_headers_arguments(rng) if kinds[source] == "headers" else None
        if arguments:
            # Values the API's JSON cannot carry are left out here, and pinned below.
            arguments = {name: value for name, value in arguments.items() if exported_faithfully(value)}
        if rng.random() < 0.3:
            mirror.bind(source, rng.choice(names), key, arguments, to_exchange=True)
        else:
            mirror.bind(source, f"q{rng.randrange(4)}", key, arguments)
    messages = []
    for _ in range(150):
        headers = random_headers(rng)
        if rng.random() < 0.3:
            headers["CC"] = [random_key(rng)]
        messages.append((rng.choice(names), random_key(rng), headers))
    return [(mirror.name(short), key, headers) for short, key, headers in messages]


def exported_faithfully(value: Any) -> bool:
    """Whether GET /api/definitions shows a binding argument as a value that reads back equal.

    RabbitMQ 3.10.8 exports void as "undefined", a timestamp as its seconds, a decimal as the
    number "<scale>.<digits>", and a table with its fields sorted (RabbitMQ compares tables in
    field order): see docs/diff.md and the test below."""
    if value is None or isinstance(value, (Decimal, datetime)):
        return False
    if isinstance(value, Typed):
        return value.code not in ("T", "D")
    if isinstance(value, dict):
        return list(value) == sorted(value) and all(map(exported_faithfully, value.values()))
    if isinstance(value, list):
        return all(map(exported_faithfully, value))
    return True


def bindings_of(topology: Topology) -> list[tuple]:
    # Arguments compared as RabbitMQ compares them (b"a" and "a" are one value: JSON has no bytes).
    return sorted(
        (b.source, b.destination, b.routing_key, repr(sorted((n, canonical(v, n)) for n, v in b.arguments.items())))
        for b in topology.bindings()
        if b.source.startswith("xroute-mgmt-")
    )


@pytest.mark.parametrize("seed", range(3))
def test_a_topology_read_back_through_the_api_routes_as_declared(node, mirror, seed):
    messages = declare_random_graph(mirror, random.Random(300 + seed))
    live = Topology.from_definitions(node.management_url, vhost="/", password=PASSWORD)
    declared = mirror.topology
    assert bindings_of(live) == bindings_of(declared)
    for exchange, key, wire_headers in messages:
        headers = plain(wire_headers)
        expected = declared.route(exchange, key, headers)
        got = live.route(exchange, key, headers)
        assert got == expected, f"{exchange} {key!r} {headers!r}: API {sorted(got)} declared {sorted(expected)}"
    # And the broker itself delivers what the read-back topology says.
    mirror.topology = live
    short = [(exchange.removeprefix(mirror.prefix), key, headers) for exchange, key, headers in messages]
    assert mirror.publish_and_compare(short) > 0


# What RabbitMQ 3.10.8's API shows for argument values JSON cannot carry (docs/diff.md): if a
# broker changes this, the test says so and the documentation needs its update.
FLATTENED = [
    (None, "undefined"),
    (datetime(1970, 1, 1, 0, 0, 2), 2),
    (Typed("T", 2), 2),
    (Decimal("1.5"), 1.15),
    (Decimal("2"), 0.2),
    ({"b": 2, "a": 1}, {"a": 1, "b": 2}),
    ([Decimal("1.5"), {"b": 2, "a": 1}], [1.15, {"a": 1, "b": 2}]),
]


def test_the_api_flattens_what_json_cannot_carry_as_documented(node, mirror):
    mirror.exchange("h", "headers")
    for i, (value, _) in enumerate(FLATTENED):
        mirror.queue(f"q{i}")
        mirror.bind("h", f"q{i}", "", {"x-match": "all", "v": value})
    exported = fetch_definitions(node.management_url, "/", password=PASSWORD)
    shown = {b["destination"]: b["arguments"]["v"] for b in exported["bindings"] if b["source"] == mirror.name("h")}
    for i, (value, expected) in enumerate(FLATTENED):
        assert not exported_faithfully(value)
        got = shown[mirror.name(f"q{i}")]
        assert json.dumps(got) == json.dumps(expected), f"{value!r} shown as {got!r}"  # fields in order


def test_the_cli_reads_the_live_broker_and_saves_a_snapshot(node, mirror, tmp_path):
    mirror.exchange("orders", "topic")
    mirror.queue("eu")
    mirror.bind("orders", "eu", "order.eu.#")
    env = {PASSWORD_VARIABLE: PASSWORD}
    runner = CliRunner()
    routed = runner.invoke(cli, ["route", "-d", node.management_url, "--vhost", "/", "-e", "xroute-mgmt-orders", "-k", "order.eu.paid"], env=env)
    assert routed.exit_code == EXIT_OK, routed.output
    assert routed.stdout.splitlines() == ["xroute-mgmt-eu"]
    snapshot = tmp_path / "defs.json"
    fetched = runner.invoke(cli, ["definitions", "fetch", node.management_url, "-o", str(snapshot)], env=env)
    assert fetched.exit_code == EXIT_OK, fetched.output
    saved = json.loads(snapshot.read_text())
    assert {"source": "xroute-mgmt-orders", "destination": "xroute-mgmt-eu"}.items() <= next(
        b for b in saved["bindings"] if b["source"] == "xroute-mgmt-orders"
    ).items()
    assert Topology.from_definitions(snapshot).route("xroute-mgmt-orders", "order.eu") == {"xroute-mgmt-eu"}


def test_real_errors_are_typed(node):
    with pytest.raises(ManagementAuthFailed):
        fetch_definitions(node.management_url, password="not-the-password")
    with pytest.raises(VhostNotFound, match="no virtual host 'absent'"):
        fetch_definitions(node.management_url, "absent", password=PASSWORD)
