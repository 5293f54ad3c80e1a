"""What a newcomer tripped on (issue 38): files that are not exports refused in one line by
every command, output that shows what was sent, a lint gate that fails on errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from xroute import Topology
from xroute.cli import EXIT_BAD_INPUT, cli
from xroute.core.errors import DefinitionsError

NOT_EXPORTS = {
    "package.json": {"name": "app", "version": "1.0.0", "dependencies": {"left-pad": "1"}},
    "other.json": {"not": "rabbitmq"},
    "empty.json": {},
    "bad-section.json": {"exchanges": {"name": "x"}},
    "bad-version.json": {"rabbit_version": 3},
}


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("name", NOT_EXPORTS)
def test_a_json_object_that_is_not_an_export_is_refused_naming_the_file(tmp_path, name):
    path = tmp_path / name
    path.write_text(json.dumps(NOT_EXPORTS[name]))
    with pytest.raises(DefinitionsError, match=f"'{path}' is not a RabbitMQ definitions export"):
        Topology.from_definitions(str(path))
    with pytest.raises(DefinitionsError, match="not a RabbitMQ definitions export"):
        Topology.from_definitions(NOT_EXPORTS[name])
    for command in (["lint", "-d", str(path), "--strict"], ["route", "-d", str(path), "-e", "x",
                    "-k", "a"], ["explain", "-d", str(path), "-e", "x", "-k", "a"],
                    ["diff", str(path), str(path)]):
        result = run(*command)
        assert result.exit_code == EXIT_BAD_INPUT, (command, result.output)
        assert "not a RabbitMQ definitions export" in result.output, command
        assert len(result.output.strip().splitlines()) == 1, result.output


def test_exports_rabbitmq_writes_are_recognised():
    # A full export, a per-vhost export, and xroute's own.
    full = {"rabbit_version": "3.10.8", "users": [], "vhosts": [{"name": "/"}], "queues": [],
            "exchanges": [], "bindings": [], "policies": [], "permissions": []}
    assert not Topology.from_definitions(full).queues
    per_vhost = {"rabbit_version": "3.10.8", "queues": [{"name": "q"}]}
    assert "q" in Topology.from_definitions(per_vhost).queues
    own = Topology()
    own.declare_queue("q")
    assert "q" in Topology.from_definitions(own.to_definitions()).queues


@pytest.mark.parametrize("command", ["route", "lint"])
def test_a_folder_as_definitions_gets_one_line(tmp_path, command):
    args = [command, "-d", str(tmp_path)] + (["-e", "x", "-k", "a"] if command == "route" else [])
    result = run(*args)
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.output.strip().splitlines() == [
        f"xroute: error: '{tmp_path}' is a folder; give a definitions export file "
        "(rabbitmqctl export_definitions, or xroute definitions fetch)"
    ]


def test_lint_fails_on_errors_by_default_and_on_warnings_with_strict():
    error = run("lint", "-d", "tests/data/lint/invalid-x-match.json")
    assert "error invalid-x-match" in error.output
    assert error.exit_code == 1, error.output
    warning = run("lint", "-d", "tests/data/lint/exchange-cycle.json")
    assert warning.exit_code == 0 and "warning exchange-cycle" in warning.output
    assert run("lint", "-d", "tests/data/lint/exchange-cycle.json", "--strict").exit_code == 1
    assert run("lint", "-d", "tests/data/lint/clean.json", "--strict").exit_code == 0


def test_keys_and_names_print_as_sent_not_as_emoji_or_markup(tmp_path):
    t = Topology()
    t.declare_exchange("multi", "x-delimiter")
    t.declare_queue("a")
    t.bind("multi", "a", "a")
    t.declare_exchange(":cat:", "topic")
    t.declare_queue("[b]q[/b]")
    t.bind(":cat:", "[b]q[/b]", ":smile:.#")
    path = tmp_path / "defs.json"
    path.write_text(json.dumps(t.to_definitions()))
    for key in (":a:c", ":cat:dog:a"):
        result = run("explain", "-d", str(path), "-e", "multi", "-k", key)
        assert f"key '{key}'" in result.output, result.output
    result = run("explain", "-d", str(path), "-e", ":cat:", "-k", ":smile:.x")
    assert "exchange ':cat:'" in result.output and "'[b]q[/b]'" in result.output
    assert "key ':smile:.x'" in result.output, result.output
    lint = run("lint", "-d", str(path))
    assert ":cat:" in lint.output, lint.output


def test_a_jms_binding_without_its_selector_is_named(tmp_path):
    # RabbitMQ's JMS topic plugin fails such a binding (541), and an import with it; the error
    # names the binding, and lint reports it as an error finding.
    path = tmp_path / "jms.json"
    path.write_text(json.dumps({
        "exchanges": [{"name": "j", "type": "x-jms-topic"}], "queues": [{"name": "q"}],
        "bindings": [{"source": "j", "destination": "q", "destination_type": "queue",
                      "routing_key": "k", "arguments": {}}],
    }))
    result = run("route", "-d", str(path), "-e", "j", "-k", "k")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "binding of queue 'q' to exchange 'j' (key 'k')" in result.output
    assert "rjms_erlang_selector" in result.output
    lint = run("lint", "-d", str(path))
    assert lint.exit_code == 1 and "error invalid-binding" in lint.output


def test_the_pyarrow_reader_on_csv_is_refused_before_spark_starts(tmp_path, monkeypatch):
    import xroute.spark.session

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark was started before the input was checked")

    monkeypatch.setattr(xroute.spark.session, "start_spark", no_spark)
    (tmp_path / "m.csv").write_text("routing_key\na.b\n")
    (tmp_path / "d.json").write_text(json.dumps({"exchanges": [{"name": "t", "type": "topic"}]}))
    result = run("pipeline", "-d", str(tmp_path / "d.json"), "-m", str(tmp_path / "m.csv"),
                 "-o", str(tmp_path / "out"), "-e", "t", "--reader", "pyarrow")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert "--reader pyarrow reads Parquet only" in result.output
