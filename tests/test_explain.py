"""xroute explain: the tree is read from the library's own route and always agrees with it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from xroute.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_UNROUTABLE, cli
from xroute.core.errors import UnknownExchange, XRouteError
from xroute.core.topology import Topology
from xroute.tools.explain import explain, render_tree


def text_of(explanation) -> str:
    console = Console(width=200, record=True)
    console.print(render_tree(explanation))
    return console.export_text()


@pytest.fixture
def home() -> Topology:
    t = Topology()
    t.declare_exchange("home", "topic", alternate_exchange="unrouted")
    t.declare_exchange("unrouted", "fanout")
    t.declare_exchange("audit", "headers")
    for q in ("temps", "bedroom", "dead", "pdf", "everything"):
        t.declare_queue(q)
    t.bind("home", "temps", "floor_1.#.temperature")
    t.bind("home", "bedroom", "*.bedroom.*")
    t.bind("home", "audit", "#.alarm", destination_type="exchange")
    t.bind("unrouted", "dead")
    t.bind("audit", "pdf", arguments={"x-match": "all", "format": "pdf", "type": "report"})
    return t


def queues_in_tree(explanation) -> set[str]:
    found = set()
    for visit in explanation.visits:
        found.update(visit.default_queues)
        found.update(
            m.binding.destination.name
            for m in visit.matched
            if m.binding.destination.kind == "queue"
        )
    return found


def test_topic_captures_are_shown(home: Topology) -> None:
    e = explain(home, "home", "floor_1.bedroom.temperature")
    assert e.queues == {"temps", "bedroom"}
    [visit] = e.visits
    by_queue = {m.binding.destination.name: m for m in visit.matched}
    assert by_queue["temps"].detail == [
        {
            "key": "floor_1.bedroom.temperature",
            "captures": [{"word": 2, "wildcard": "#", "took": ["bedroom"]}],
        }
    ]
    text = text_of(e)
    assert "'#' (word 2) = 'bedroom'" in text
    assert "alternate exchange 'unrouted': not used" in text
    assert "queues: bedroom, temps" in text


def test_near_misses_then_alternate(home: Topology) -> None:
    e = explain(home, "home", "floor_1.bedroom.humidity.x")
    assert e.queues == {"dead"}
    first, second = e.visits
    assert not first.matched
    reasons = {m.binding.routing_key: m.reason for m in first.near_misses}
    # Dropping 'humidity' or 'x' would do; the first one is named.
    assert "without word 3 ('humidity') it would match" in reasons["*.bedroom.*"]
    assert second.exchange == "unrouted" and second.via == "alternate" and second.parent == "home"
    assert first.alternate_note.startswith("followed")
    text = text_of(e)
    assert "near miss '*.bedroom.*'" in text
    assert "as the alternate exchange of 'home'" in text


def test_near_miss_substitution_names_the_word(home: Topology) -> None:
    e = explain(home, "home", "floor_1.kitchen.humid")
    reasons = [m.reason for m in e.visits[0].near_misses]
    assert any("word 3 is 'humid'; the binding wants 'temperature'" in r for r in reasons)


def test_headers_via_exchange_binding(home: Topology) -> None:
    e = explain(home, "home", "floor_1.alarm", {"format": "pdf", "type": "report"})
    assert e.queues == {"pdf"}
    audit = e.visits[1]
    assert audit.exchange == "audit" and audit.via == "binding" and audit.parent == "home"
    [match] = audit.matched
    assert {r["state"] for r in match.detail[0]["criteria"]} == {"hit"}
    missing = explain(home, "home", "floor_1.alarm", {"format": "pdf"})
    assert missing.queues == set()
    [miss] = missing.visits[1].near_misses
    assert "only header 'type' is missing" in miss.reason
    assert "unroutable" in text_of(missing)


def test_headers_near_miss_differs(home: Topology) -> None:
    e = explain(home, "home", "alarm", {"format": "zip", "type": "report"})
    [miss] = e.visits[1].near_misses
    assert "only header 'format' differs" in miss.reason and "'zip'" in miss.reason


def test_cc_bcc_and_delimiter_pieces() -> None:
    t = Topology()
    t.declare_exchange("multi", "x-delimiter")
    t.declare_queue("c1")
    t.declare_queue("c2")
    t.bind("multi", "c1", "client1")
    t.bind("multi", "c2", "client2")
    e = explain(t, "multi", ":client1:nobody", {"CC": [":client2"], "BCC": ["x"]})
    assert e.keys == [":client1:nobody", ":client2", "x"]
    # 'x' is a delimiter and nothing else: one empty piece.
    assert e.visits[0].keys == ["client1", "nobody", "client2", ""]
    assert e.queues == {"c1", "c2"}
    assert "BCC" not in e.headers
    assert "pieces 'client1', 'nobody', 'client2', ''" in text_of(e)


def test_default_exchange() -> None:
    t = Topology()
    t.declare_queue("jobs")
    e = explain(t, "", "jobs")
    assert e.queues == {"jobs"} and e.visits[0].default_queues == ["jobs"]
    assert "queue 'jobs' is named by the key" in text_of(e)


def test_bad_input_raises_the_routers_errors(home: Topology) -> None:
    with pytest.raises(UnknownExchange):
        explain(home, "nope", "a")


def test_to_dict_is_json(home: Topology) -> None:
    e = explain(home, "home", "floor_1.alarm", {"format": "pdf"})
    data = json.loads(json.dumps(e.to_dict()))
    assert data["routed"] is False and data["visits"][1]["exchange"] == "audit"


# ------------------------------------------------------------------------- random topologies

TYPES = ["direct", "fanout", "topic", "headers", "x-delimiter"]
KEY_WORDS = ["a", "b", "", ":a", "q1"]
PATTERN_WORDS = KEY_WORDS + ["*", "#"]


@st.composite
def topologies(draw) -> Topology:
    t = Topology()
    count = draw(st.integers(1, 4))
    names = [f"x{i}" for i in range(count)]
    for name in names:
        alternate = draw(st.none() | st.sampled_from(names + ["missing"]))
        t.declare_exchange(name, draw(st.sampled_from(TYPES)), alternate_exchange=alternate)
    for q in ("q0", "q1", "q2"):
        t.declare_queue(q)
    for _ in range(draw(st.integers(0, 12))):
        source = draw(st.sampled_from(names))
        to_exchange = draw(st.integers(0, 2)) == 0
        destination = draw(st.sampled_from(names if to_exchange else ["q0", "q1", "q2"]))
        key = ".".join(draw(st.lists(st.sampled_from(PATTERN_WORDS), max_size=3)))
        arguments = {}
        if t.exchanges[source].type == "headers":
            arguments = draw(
                st.dictionaries(
                    st.sampled_from(["h", "k", "x-match"]), st.sampled_from([1, "v", None])
                )
            )
            if "x-match" in arguments:
                arguments["x-match"] = draw(st.sampled_from(["all", "any"]))
        t.bind(source, destination, key, arguments, "exchange" if to_exchange else "queue")
    return t


messages = st.tuples(
    st.sampled_from(["x0", "x1", "x2", "x3", ""]),
    st.lists(st.sampled_from(KEY_WORDS), max_size=3).map(".".join),
    st.none()
    | st.fixed_dictionaries(
        {},
        optional={
            "h": st.sampled_from([1, "v", 2]),
            "k": st.just("v"),
            "CC": st.lists(st.sampled_from(["a", "a.b", ":a:q1", "q1"]), max_size=2),
            "BCC": st.lists(st.sampled_from(["b", "q0"]), max_size=1),
        },
    ),
)


@settings(max_examples=150, deadline=None)
@given(topologies(), messages)
def test_explain_agrees_with_route(topology: Topology, message) -> None:
    exchange, key, headers = message
    try:
        expected = topology.route(exchange, key, headers)
    except XRouteError:  # an exchange the topology does not declare
        with pytest.raises(XRouteError):
            explain(topology, exchange, key, headers)
        return
    e = explain(topology, exchange, key, headers)
    assert e.queues == expected, (exchange, key, headers)
    # The tree itself accounts for every queue, and for no other.
    assert queues_in_tree(e) == set(expected)
    names = [v.exchange for v in e.visits]
    assert len(names) == len(set(names)) and names[0] == exchange
    for i, visit in enumerate(e.visits[1:], 1):
        assert visit.parent in names[:i]
    render_tree(e)  # renders without error


# ------------------------------------------------------------------------- CLI


@pytest.fixture
def definitions(tmp_path, home: Topology) -> str:
    path = tmp_path / "defs.json"
    path.write_text(json.dumps(home.to_definitions()))
    return str(path)


def test_cli_explain(definitions: str) -> None:
    runner = CliRunner()
    base = ["explain", "-d", definitions, "-e", "home"]
    routed = runner.invoke(cli, [*base, "-k", "floor_1.x.temperature"])
    assert routed.exit_code == EXIT_OK, routed.output
    assert "'#' (word 2) = 'x'" in routed.output
    lost = runner.invoke(
        cli, [*base, "-k", "alarm", "-H", "format=pdf", "--json"]
    )
    assert lost.exit_code == EXIT_UNROUTABLE
    assert json.loads(lost.output)["queues"] == []
    bad = runner.invoke(cli, ["explain", "-d", definitions, "-e", "nope", "-k", "a"])
    assert bad.exit_code == EXIT_BAD_INPUT and "unknown exchange 'nope'" in bad.output
