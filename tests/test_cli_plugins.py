"""Every command on an export with every plugin type and one unknown type (tests/data/plugins.json)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from xroute import Topology
from xroute.cli import cli

EXPORT = str(Path(__file__).parent / "data" / "plugins.json")


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_route_through_every_type_matches_the_library():
    topology = Topology.from_definitions(EXPORT)
    for key in ("order.1", "order.2", "order.3", "x.work", "x.y.work.z"):
        done = run("route", "-d", EXPORT, "-e", "front", "-k", key, "--json")
        assert json.loads(done.output)["queues"] == sorted(topology.route("front", key))
    done = run("route", "-d", EXPORT, "-e", "selected", "-k", "k", "-H", "colour=blue")
    assert done.output.split() == ["blue"]
    for exchange in ("modulus", "any", "local", "recent", "by-customer"):
        done = run("route", "-d", EXPORT, "-e", exchange, "-k", "k", "--json")
        assert json.loads(done.output)["queues"] == sorted(topology.route(exchange, "k"))


def test_the_unknown_type_fails_only_its_messages():
    done = CliRunner().invoke(cli, ["route", "-d", EXPORT, "-e", "front", "-k", "event.1"])
    assert done.exit_code == 2 and "x-event-stream-unknown" in done.output
    done = run("explain", "-d", EXPORT, "-e", "front", "-k", "order.7")
    assert "x-consistent-hash" in done.output and done.exit_code == 0


def test_lint_and_the_version_profiles():
    done = run("lint", "-d", EXPORT, "--json")
    codes = {(f["code"], f.get("exchange")) for f in json.loads(done.output)["findings"]}
    assert ("unsupported-exchange-type", "events") in codes
    assert ("too-many-hash-words", "front") in codes
    # under the 4.3 profile RabbitMQ refuses the binding with three '#'
    done = run("lint", "-d", EXPORT, "--json", "--rabbitmq", "4.3")
    codes = {f["code"] for f in json.loads(done.output)["findings"]}
    assert "invalid-binding" in codes
    done = CliRunner().invoke(cli, ["route", "-d", EXPORT, "-e", "front", "-k", "a", "--rabbitmq", "2.0"])
    assert done.exit_code == 2


def test_diff_sees_a_weight_change(tmp_path):
    changed = json.loads(Path(EXPORT).read_text())
    for binding in changed["bindings"]:
        if binding["source"] == "orders" and binding["destination"] == "shard-b":
            binding["routing_key"] = "5"
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(changed))
    done = CliRunner().invoke(cli, ["diff", EXPORT, str(path), "--json", "--rabbitmq", "3.10"])
    assert done.exit_code == 1, done.output
    (change,) = json.loads(done.output)["static"]["bindings_changed"]
    assert change["exchange_type"] == "x-consistent-hash" and change["after"]["routing_key"] == "5"
