"""``xroute diff``, the static part and the per-message reasons: planted changes on random
topologies, and topic pattern changes checked against brute force over every key."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import diff_planted as planted
from xroute import Topology
from xroute.cli import EXIT_BAD_INPUT, EXIT_DIFF_CHANGED, EXIT_OK, cli
from xroute.core.keys import split_words
from xroute.engines.reference import pattern_matches
from xroute.tools.diff import checked_up_to, pattern_change, static_diff, why_changed
from xroute.tools.patterns import fresh_word


def matches(pattern: str, key: str) -> bool:
    return pattern_matches(split_words(pattern), split_words(key))


# ------------------------------------------------------------------ pattern changes, fixed


def test_star_replaced_by_hash_is_the_issues_example():
    change = pattern_change("a.*", "a.#")
    assert change.relation == "widened"
    assert change.gained_key == "a" and change.lost_key is None
    assert change.gained_lengths[:1] == (1,) and 2 not in change.gained_lengths
    assert change.gained_open_ended
    assert change.describe() == "'a.*' replaced by 'a.#': widened; now also routes keys of 1 and 3+ words (e.g. 'a')"


@pytest.mark.parametrize(
    "before, after, relation",
    [
        ("a.#", "a.*", "narrowed"),
        ("#", "#.#", "equivalent"),
        ("*.#", "#.*", "equivalent"),
        ("a.*.c", "*.b.*", "different"),
        ("a.b", "a.*", "widened"),
        ("#.x", "#", "widened"),
        ("a", "b", "different"),
    ],
)
def test_relations_and_witnesses(before, after, relation):
    change = pattern_change(before, after)
    assert change.relation == relation, change
    if change.gained_key is not None:
        assert matches(after, change.gained_key) and not matches(before, change.gained_key)
    if change.lost_key is not None:
        assert matches(before, change.lost_key) and not matches(after, change.lost_key)
    assert (change.gained_key is None) == (relation in ("narrowed", "equivalent"))
    assert (change.lost_key is None) == (relation in ("widened", "equivalent"))


# ------------------------------------------------------------------ pattern changes, brute force

# Small on purpose: the brute force tries every key of up to |a| + |b| + 4 words.
pattern_words = st.lists(st.sampled_from(["a", "", "*", "#"]), min_size=0, max_size=3)


def brute_lengths(a: str, b: str, top: int) -> list[int]:
    """Lengths n <= top with a key that b matches and a does not, over every key made of the
    two patterns' literal words and one fresh word."""
    words = [w for w in set(split_words(a)) | set(split_words(b)) if w not in ("*", "#")]
    alphabet = sorted(set(words)) + [fresh_word(words)]
    keys = lambda n: (  # noqa: E731 ("" joined alone is the key of no words, not of one)
        ".".join(k) for k in itertools.product(alphabet, repeat=n) if n != 1 or k != ("",)
    )
    return [n for n in range(top + 1) if any(matches(b, k) and not matches(a, k) for k in keys(n))]


@settings(max_examples=40, deadline=None)
@given(pattern_words, pattern_words)
def test_pattern_change_equals_brute_force(a_words, b_words):
    before, after = ".".join(a_words), ".".join(b_words)
    change = pattern_change(before, after)
    top = checked_up_to(before, after)
    gained = brute_lengths(before, after, top + 2)
    lost = brute_lengths(after, before, top + 2)
    note = f"{before!r} -> {after!r}: {change}; brute force gained {gained} lost {lost}"
    assert (change.gained_key is not None) == bool(gained), note
    assert (change.lost_key is not None) == bool(lost), note
    if gained:
        assert list(change.gained_lengths) == [n for n in gained if n <= top], note
        # Past the last length checked, the answer at it holds (the two lengths after it).
        assert change.gained_open_ended == (top + 1 in gained and top + 2 in gained), note
    if lost:
        assert list(change.lost_lengths) == [n for n in lost if n <= top], note


# ------------------------------------------------------------------ planted changes


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("change", planted.CHANGES)
def test_planted_change_is_reported(change, seed):
    rng = random.Random(f"{change}-{seed}")
    export = planted.random_export(rng)
    new_export = planted.plant(export, change, rng)
    old, new = Topology.from_definitions(export), Topology.from_definitions(new_export)
    diff = static_diff(old, new)
    if change == "rename-queue":
        (gone,) = diff.queues_removed
        assert diff.queues_added == [gone + "-v2"]
        moved = [b for b in export["bindings"] if b["destination"] == gone]
        assert len(diff.bindings_removed) == len(moved) == len(diff.bindings_added)
        assert all(r["destination"] == gone for r in diff.bindings_removed)
        assert diff.may_lose
    elif change in ("widen-pattern", "narrow-pattern"):
        if not diff.changed:  # the word picked was already what it became ('#' -> '#')
            assert export == new_export
            return
        (binding,) = diff.bindings_changed
        expected = {"widen-pattern": {"widened", "equivalent"}, "narrow-pattern": {"narrowed", "equivalent", "different"}}[change]
        assert binding.pattern.relation in expected, binding.pattern
        assert not diff.bindings_added and not diff.bindings_removed
    elif change == "remove-binding":
        (removed,) = diff.bindings_removed
        fields = ("source", "destination", "routing_key", "arguments")
        assert {k: removed[k] for k in fields} in [{k: b[k] for k in fields} for b in export["bindings"]]
        assert {k: removed[k] for k in fields} not in [{k: b[k] for k in fields} for b in new_export["bindings"]]
        assert diff.may_lose and not diff.bindings_added
    elif change == "alternate":
        was = "ae"
        now = new.exchanges["t"].alternate_exchange
        assert [(c.exchange, c.what, c.before, c.after) for c in diff.exchanges] == [("t", "alternate-exchange", was, now)]
        # The queue bound only to ae, unless something else feeds it, is starved without it.
        assert set(diff.queues_starved) <= {b["destination"] for b in export["bindings"] if b["source"] == "ae"}
    elif change == "x-match":
        (binding,) = diff.bindings_changed
        assert binding.note.startswith("x-match ")
        assert binding.before["routing_key"] == binding.after["routing_key"] == ""
    assert diff.changed


def test_a_queue_starved_by_a_removed_binding_and_an_unchanged_diff():
    export = {
        "queues": [{"name": "q"}, {"name": "r"}],
        "exchanges": [{"name": "x", "type": "direct"}, {"name": "inner", "type": "fanout", "internal": True}],
        "bindings": [
            {"source": "x", "destination": "q", "routing_key": "k"},
            {"source": "inner", "destination": "r", "routing_key": ""},
        ],
    }
    old = Topology.from_definitions(export)
    assert not static_diff(old, Topology.from_definitions(export)).changed
    new = Topology.from_definitions({**export, "bindings": export["bindings"][1:]})
    diff = static_diff(old, new)
    # r was never fed (only an internal exchange nothing reaches binds it); q is starved now.
    assert diff.queues_starved == ["q"]
    assert [r["routing_key"] for r in diff.bindings_removed] == ["k"]


def test_added_topic_binding_carries_a_witness_key():
    export = {"queues": [{"name": "q"}], "exchanges": [{"name": "t", "type": "topic"}], "bindings": []}
    new = {**export, "bindings": [{"source": "t", "destination": "q", "routing_key": "a.*.#.b"}]}
    diff = static_diff(Topology.from_definitions(export), Topology.from_definitions(new))
    (added,) = diff.bindings_added
    assert matches("a.*.#.b", added["witness_key"])
    assert diff.changed and not diff.may_lose


# ------------------------------------------------------------------ why a message changed


@pytest.mark.parametrize("change", planted.CHANGES)
def test_why_changed_names_a_binding_for_every_queue_gained_or_lost(change):
    rng = random.Random(f"why-{change}")
    export = planted.random_export(rng)
    new_export = planted.plant(export, change, rng)
    old, new = Topology.from_definitions(export), Topology.from_definitions(new_export)
    seen = 0
    for _, exchange, key, headers in planted.messages(rng, 300):
        why = why_changed(old, new, exchange, key, headers)
        assert why["queues_before"] == sorted(old.route(exchange, key, headers))
        assert why["queues_after"] == sorted(new.route(exchange, key, headers))
        for how in ("lost", "gained"):
            for queue, reasons in why[how].items():
                seen += 1
                assert reasons and all(isinstance(r, str) for r in reasons)
                assert any(f"queue {queue!r}" in r or "default exchange" in r for r in reasons), reasons
    if change in ("rename-queue", "remove-binding"):
        assert seen > 0


# ------------------------------------------------------------------ the command line, without messages


def test_cli_exit_codes_and_json(tmp_path):
    rng = random.Random("cli")
    export = planted.random_export(rng)
    old, new, same = tmp_path / "old.json", tmp_path / "new.json", tmp_path / "same.json"
    old.write_text(json.dumps(export))
    same.write_text(json.dumps(export))
    added = {**export, "bindings": export["bindings"] + [{"source": "d", "destination": "q0", "routing_key": "brand-new"}]}
    new.write_text(json.dumps(added))
    runner = CliRunner()
    assert runner.invoke(cli, ["diff", str(old), str(same)]).exit_code == EXIT_OK
    changed = runner.invoke(cli, ["diff", str(old), str(new), "--json"])
    assert changed.exit_code == EXIT_DIFF_CHANGED, changed.output
    report = json.loads(changed.stdout)
    assert [b["routing_key"] for b in report["static"]["bindings_added"]] == ["brand-new"]
    # Only an added binding: nothing can lose a queue.
    assert runner.invoke(cli, ["diff", str(old), str(new), "--fail-on", "lost"]).exit_code == EXIT_OK
    removed = runner.invoke(cli, ["diff", str(new), str(old), "--fail-on", "lost", "-o", str(tmp_path / "out")])
    assert removed.exit_code == EXIT_DIFF_CHANGED
    assert "removed from 'd'" in removed.stdout
    assert json.loads((tmp_path / "out" / "diff.json").read_text())["static"]["may_lose"] is True
    usage = runner.invoke(cli, ["diff", str(old), str(new), "-m", str(tmp_path)])
    assert usage.exit_code == EXIT_BAD_INPUT and "--messages needs --out" in usage.output
