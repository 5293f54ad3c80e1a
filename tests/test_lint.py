"""xroute lint: each finding on a definitions file made for it (tests/data/lint/, written by
its _make.py), a clean topology with none, redundancy that never changes a route, cost, the
pipeline summary, and the command's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from xroute.bench.workload import seed_patterns
from xroute.cli import EXIT_BAD_INPUT, EXIT_LINT_FINDINGS, EXIT_OK, cli
from xroute.core.errors import InvalidLintInput, InvalidRoutingKey
from xroute.core.keys import split_words
from xroute.core.topology import Topology
from xroute.engines.trie import TrieEngine
from xroute.tools.cost import rank_costs, read_keys, visits
from xroute.tools.findings import binding_ref
from xroute.tools.lint import (
    FINGERPRINT,
    lint_definitions,
    lint_topology,
    never_matched,
    topology_fingerprint,
)
from xroute.tools.patterns import includes, normalise

DATA = Path(__file__).parent / "data" / "lint"
ONE_FINDING = sorted(p.stem for p in DATA.glob("*.json") if p.stem != "clean")
SEVERITY = {
    "duplicate-binding": "warning",
    "equivalent-bindings": "warning",
    "redundant-binding": "warning",
    "non-canonical-pattern": "warning",
    "topic-without-wildcards": "info",
    "client-addressing": "warning",
    "leading-hash": "warning",
    "unbound-queue": "info",
    "dead-end-exchange": "warning",
    "exchange-cycle": "warning",
    "invalid-x-match": "error",
    "dangling-alternate": "error",
    "invalid-binding": "error",
}


def test_every_finding_has_a_file() -> None:
    assert ONE_FINDING == sorted(SEVERITY)


@pytest.mark.parametrize("code", ONE_FINDING)
def test_each_finding_on_its_own_file(code: str) -> None:
    # leading-hash needs a large exchange: its file is small, so the threshold is lowered.
    large = 3 if code == "leading-hash" else 1000
    report = lint_definitions(DATA / f"{code}.json", large_exchange=large)
    assert {f.code for f in report.findings} == {code}, [f.to_dict() for f in report.findings]
    for finding in report.findings:
        assert finding.severity == SEVERITY[code]
        assert finding.message and finding.why and finding.fix
        assert finding.where() != "topology"


def test_clean_topology_has_no_findings() -> None:
    report = lint_definitions(DATA / "clean.json", large_exchange=1)
    assert report.findings == []
    assert not report.failing
    assert [c.exchange for c in report.costs] == ["home"]


def test_refused_bindings_do_not_stop_the_rest() -> None:
    report = lint_definitions(DATA / "invalid-x-match.json")
    [finding] = report.findings
    assert finding.binding["arguments"]["x-match"] == "some"
    # The valid binding beside it was loaded: no dead-end or unbound-queue finding.
    assert "'some'" in finding.message


def test_leading_hash_only_on_large_exchanges() -> None:
    assert lint_definitions(DATA / "leading-hash.json").findings == []


def test_redundancy_names_the_covering_binding() -> None:
    report = lint_definitions(DATA / "redundant-binding.json")
    topic = next(f for f in report.findings if f.exchange == "t")
    assert (topic.binding["routing_key"], topic.related[0]["routing_key"]) == ("a.*", "a.#")
    headers = next(f for f in report.findings if f.exchange == "docs")
    assert headers.binding["arguments"]["type"] == "report"
    assert headers.related[0]["arguments"] == {"x-match": "all", "format": "pdf"}


def test_headers_redundancy_modes() -> None:
    t = Topology()
    t.declare_exchange("h", "headers")
    t.declare_queue("q")
    t.bind("h", "q", arguments={"x-match": "any", "a": 1, "b": 2})
    t.bind("h", "q", arguments={"x-match": "all", "a": 1, "c": 3})  # covered: a=1 is enough
    t.bind("h", "q", arguments={"x-match": "any", "a": None})  # presence of a: covers the 2nd only
    t.bind("h", "q", arguments={"x-match": "all", "b": 2, "d": None})
    codes = {
        (f.binding["arguments"].get("c"), f.binding["arguments"].get("d", "-")):
        f.related[0]["arguments"]
        for f in lint_topology(t)
        if f.code == "redundant-binding"
    }
    assert codes == {
        (3, "-"): {"x-match": "any", "a": 1, "b": 2},
        (None, None): {"x-match": "any", "a": 1, "b": 2},
    }


def test_many_bindings_to_one_queue() -> None:
    # Thousands of bindings to one destination: candidates come from an index, not all pairs.
    t = Topology()
    t.declare_exchange("t", "topic")
    t.declare_queue("q")
    for i in range(2000):
        t.bind("t", "q", f"#.client{i}.#")
    t.bind("t", "q", "#.client7.#.urgent")
    findings = lint_topology(t, large_exchange=1000)
    redundant = [f for f in findings if f.code == "redundant-binding"]
    assert [(f.binding["routing_key"], f.related[0]["routing_key"]) for f in redundant] == [
        ("#.client7.#.urgent", "#.client7.#")
    ]
    assert {f.code for f in findings} == {"redundant-binding", "client-addressing", "leading-hash"}


def test_undecided_inclusion_is_reported_not_raised(monkeypatch) -> None:
    import xroute.tools.patterns

    monkeypatch.setattr(xroute.tools.patterns, "MAX_STATES", 50)
    t = Topology()
    t.declare_exchange("t", "topic")
    t.declare_queue("q")
    t.bind("t", "q", "#.a.*.*.*.*.*.*.*.b.#")
    t.bind("t", "q", "#." + ".#.".join(["a", "b"] * 8) + ".#")
    [finding] = [f for f in lint_topology(t) if f.code == "inclusion-undecided"]
    assert finding.severity == "info" and finding.related[0]["routing_key"].startswith("#.a.*")


bindings_to_one_queue = st.lists(
    st.lists(st.sampled_from(["a", "b", "", "*", "#"]), max_size=4).map(".".join),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(bindings_to_one_queue, st.lists(st.lists(st.sampled_from(["a", "b", "", "c"]), max_size=5)))
def test_removing_covered_bindings_changes_no_route(
    patterns: list[str], keys: list[list[str]]
) -> None:
    t = Topology()
    t.declare_exchange("t", "topic")
    for q in ("q", "r"):
        t.declare_queue(q)
    for i, pattern in enumerate(patterns):
        t.bind("t", "q" if i % 3 else "r", pattern)
    covering = ("redundant-binding", "equivalent-bindings")
    findings = [f for f in lint_topology(t) if f.code in covering]
    for f in findings:
        assert includes(f.related[0]["routing_key"], f.binding["routing_key"])
        assert f.related[0]["destination"] == f.binding["destination"]
    trimmed = Topology()
    trimmed.declare_exchange("t", "topic")
    for q in ("q", "r"):
        trimmed.declare_queue(q)
    covered = {(f.binding["routing_key"], f.binding["destination"]) for f in findings}
    for b in t.bindings("t"):
        if (b.routing_key, b.destination.name) not in covered:
            trimmed.bind("t", b.destination.name, b.routing_key)
    probes = [".".join(k) for k in keys if k != [""]] + [
        p.replace("*", "c").replace("#", "c.c") for p in patterns
    ]
    for key in probes:
        assert trimmed.route("t", key) == t.route("t", key), (patterns, key)


# ------------------------------------------------------------------------- cost and traffic


def test_visits_counts_live_trie_nodes() -> None:
    engine = TrieEngine()
    for i, pattern in enumerate(["a.b", "#.b", "a.*"]):
        engine.add(split_words(pattern), i)
    # start: root, '#'; after 'a': a-node, '#'; after 'b': b (of a.b), '*' (of a.*), '#', b (of #.b)
    assert visits(engine, "a.b") == 2 + 2 + 4
    assert visits(engine, "") == 2


def test_costs_rank_leading_hash_first() -> None:
    t = Topology()
    for name in ("anchored", "leading"):
        t.declare_exchange(name, "topic")
    t.declare_queue("q")
    for pattern in seed_patterns(300, seed=3):
        t.bind("anchored", "q", "x." + pattern)
        t.bind("leading", "q", "#." + pattern)
    ranked = rank_costs(t)
    assert [c.exchange for c in ranked] == ["leading", "anchored"]
    leading = {"#." + p for p in seed_patterns(300, seed=3)}
    # In normal form '#.*...' is '*.#...': it does not count as a leading '#'.
    assert ranked[0].leading_hash == sum(1 for p in leading if normalise(p).startswith("#"))
    assert ranked[1].leading_hash == 0
    assert ranked[0].mean_visits > ranked[1].mean_visits


def test_keys_file(tmp_path) -> None:
    path = tmp_path / "keys.txt"
    path.write_text("a.b\n\nhome\tfloor_1.x\n")
    assert read_keys(path) == {None: ["a.b"], "home": ["floor_1.x"]}
    report = lint_definitions(DATA / "clean.json", keys=read_keys(path))
    [cost] = report.costs
    assert (cost.keys, cost.keys_from) == (2, "file")
    path.write_text("x" * 300 + "\n")
    with pytest.raises(InvalidLintInput) as caught:
        read_keys(path)
    assert ":1:" in str(caught.value)
    with pytest.raises(InvalidLintInput):
        read_keys(tmp_path / "missing.txt")
    assert issubclass(InvalidLintInput, ValueError)
    assert not issubclass(InvalidLintInput, InvalidRoutingKey)


def test_summary_never_matched(tmp_path) -> None:
    summary = {
        "bindings": [
            {"source": "home", "destination": "floor_1", "destination_type": "queue",
             "routing_key": "floor_1.#", "arguments": {}, "hits": 12},
            {"source": "home", "destination": "temperatures", "destination_type": "queue",
             "routing_key": "*.*.temperature", "arguments": {}, "hits": 0},
        ]
    }
    [finding] = never_matched(summary)
    assert finding.code == "never-matched" and finding.binding["destination"] == "temperatures"
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    report = lint_definitions(DATA / "clean.json", summary=path)
    assert [f.code for f in report.findings] == ["never-matched"] and not report.failing
    path.write_text(json.dumps({"bindings": [{"hits": "many"}]}))
    with pytest.raises(InvalidLintInput):
        never_matched(path)


def test_a_summary_of_another_topology_is_refused(tmp_path) -> None:
    clean = Topology.from_definitions(str(DATA / "clean.json"))
    summary = {
        "bindings": [
            {**binding_ref(b), "hits": 0} for b in clean.bindings()
        ],
        FINGERPRINT: topology_fingerprint(clean),
    }
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    report = lint_definitions(DATA / "clean.json", summary=path)
    assert len([f for f in report.findings if f.code == "never-matched"]) == len(clean.bindings())
    # The same topology exported in another order has the same fingerprint.
    exported = clean.to_definitions()
    shuffled = {k: list(reversed(v)) if isinstance(v, list) else v for k, v in exported.items()}
    assert topology_fingerprint(Topology.from_definitions(shuffled)) == summary[FINGERPRINT]
    # One binding more, and the summary is another topology's.
    other = Topology.from_definitions(exported)
    queue = next(iter(other.queues))
    other.bind(next(b.source for b in clean.bindings()), queue, "never.seen.before")
    (tmp_path / "other.json").write_text(json.dumps(other.to_definitions()))
    with pytest.raises(InvalidLintInput, match="another topology"):
        lint_definitions(tmp_path / "other.json", summary=path)
    result = run("-d", str(tmp_path / "other.json"), "--summary", str(path))
    assert result.exit_code == 2 and "another topology" in result.output
    # A summary without a fingerprint (older) is refused when it lists an unknown binding.
    old = {"bindings": [{"source": "elsewhere", "destination": "q", "routing_key": "a", "hits": 0}]}
    with pytest.raises(InvalidLintInput, match="do not have"):
        lint_definitions(DATA / "clean.json", summary=old)


# ------------------------------------------------------------------------- command line


def run(*args: str):
    return CliRunner().invoke(cli, ["lint", *args])


def test_cli_exit_codes() -> None:
    clean = run("-d", str(DATA / "clean.json"), "--strict")
    assert clean.exit_code == EXIT_OK, clean.output
    assert "0 errors, 0 warnings, 0 info" in clean.output
    warned = run("-d", str(DATA / "redundant-binding.json"))
    assert warned.exit_code == EXIT_OK and "redundant-binding" in warned.output
    strict = run("-d", str(DATA / "redundant-binding.json"), "--strict")
    assert strict.exit_code == EXIT_LINT_FINDINGS
    info_only = run("-d", str(DATA / "unbound-queue.json"), "--strict")
    assert info_only.exit_code == EXIT_OK
    assert run("-d", str(DATA / "missing.json")).exit_code == EXIT_BAD_INPUT


def test_cli_json(tmp_path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("home\tfloor_1.a.temperature\n")
    result = run("-d", str(DATA / "invalid-x-match.json"), "--json", "--keys", str(keys))
    data = json.loads(result.output)
    assert data["counts"] == {"error": 1, "warning": 0, "info": 0}
    assert data["findings"][0]["code"] == "invalid-x-match"
    assert data["costs"] == []


@pytest.mark.parametrize("rabbitmq", [None, "3.10", "4.3", "main"])
def test_a_weight_above_the_newest_cap_is_named_under_every_profile(rabbitmq) -> None:
    # RabbitMQ 4.3.0 refuses a consistent-hash weight above 10,000 (406); older versions
    # take it, and lint warns that an upgrade will not.
    definitions = {
        "exchanges": [{"name": "ch", "vhost": "/", "type": "x-consistent-hash"}],
        "queues": [{"name": q, "vhost": "/"} for q in ("q1", "q2")],
        "bindings": [
            {"source": "ch", "vhost": "/", "destination": "q1", "destination_type": "queue",
             "routing_key": "10000", "arguments": {}},
            {"source": "ch", "vhost": "/", "destination": "q2", "destination_type": "queue",
             "routing_key": "10001", "arguments": {}},
        ],
    }
    found = {(f.code, f.severity, f.binding["routing_key"])
             for f in lint_definitions(definitions, rabbitmq=rabbitmq).findings
             if f.binding is not None}
    if rabbitmq in (None, "4.3", "main"):  # refused: the binding is not loaded
        assert ("invalid-binding", "error", "10001") in found
    else:
        assert ("weight-above-cap", "warning", "10001") in found
    assert not any(key == "10000" for _, _, key in found)
