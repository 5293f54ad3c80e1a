"""The fixed topic cases of SEMANTICS.md (RabbitMQ's classic test) for every engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xroute import InvalidRoutingKey, TopicMatcher, XRouteError
from xroute.core.keys import split_words
from xroute.engines.reference import pattern_matches

CASES = json.loads((Path(__file__).parent / "data" / "topic_cases.json").read_text())


def classic(matcher: TopicMatcher) -> TopicMatcher:
    for name, pattern in CASES["bindings"].items():
        matcher.add(pattern, name)
    return matcher


@pytest.mark.parametrize("key,expected", CASES["routes"], ids=[k or '""' for k, _ in CASES["routes"]])
def test_classic_topic_routes(matcher, key, expected):
    assert classic(matcher).match(key) == frozenset(expected)


def test_classic_topic_routes_in_a_batch(matcher):
    keys = [key for key, _ in CASES["routes"]]
    assert classic(matcher).match_many(keys) == [frozenset(e) for _, e in CASES["routes"]]


def test_classic_after_removing_every_other_binding(matcher):
    classic(matcher)
    removed = {name for i, name in enumerate(CASES["bindings"]) if i % 2 == 0}
    for name in removed:
        matcher.remove(CASES["bindings"][name], name)
    assert len(matcher) == len(CASES["bindings"]) - len(removed)
    for key, expected in CASES["routes"]:
        assert matcher.match(key) == frozenset(expected) - removed, key


@pytest.mark.parametrize("key,pattern,matches", CASES["empty_words"]["cases"])
def test_empty_words_and_literal_wildcards(matcher, key, pattern, matches):
    assert pattern_matches(split_words(pattern), split_words(key)) is matches
    matcher.add(pattern, "q")
    assert matcher.match(key) == (frozenset({"q"}) if matches else frozenset())


def test_same_binding_twice_is_one_binding(matcher):
    matcher.add("a.*", "q")
    matcher.add("a.*", "q")
    assert len(matcher) == 1
    assert matcher.has("a.*", "q") and not matcher.has("a.*", "r") and not matcher.has("a", "q")
    matcher.remove("a.*", "q")
    assert len(matcher) == 0
    assert not matcher.has("a.*", "q")
    assert matcher.match("a.b") == frozenset()


def test_destination_repeated_across_patterns_is_delivered_once(matcher):
    for pattern in ("a.#", "#.b", "a.b", "*.*"):
        matcher.add(pattern, "q")
    assert matcher.match("a.b") == frozenset({"q"})


def test_remove_of_absent_binding_is_a_typed_key_error(matcher):
    matcher.add("a.b", "q")
    with pytest.raises(KeyError) as caught:
        matcher.remove("a.b", "other")
    assert isinstance(caught.value, XRouteError)
    assert "'a.b'" in str(caught.value) and "other" in str(caught.value)
    assert matcher.match("a.b") == frozenset({"q"})


def test_pathological_hash_runs_stay_polynomial(matcher):
    # Seed 000: bindings '#', '#.#', '#.#.#', ... make RabbitMQ's trie walk exponential.
    # Correctness of the memoised walk is what is checked; a blow-up would never finish.
    for n in range(1, 31):
        matcher.add(".".join(["#"] * n + ["a"]), f"h{n}")
    matcher.add(".".join(["#"] * 30 + ["b"]), "never")
    key = ".".join(["x"] * 39 + ["a"])
    assert matcher.match(key) == frozenset(f"h{n}" for n in range(1, 31))
    assert matcher.match(".".join(["x"] * 40)) == frozenset()


def test_long_keys_are_refused(matcher):
    matcher.add("#", "q")
    assert matcher.match("a" * 255) == frozenset({"q"})
    with pytest.raises(InvalidRoutingKey, match="256 bytes"):
        matcher.match("a" * 256)
    with pytest.raises(InvalidRoutingKey, match="bytes in UTF-8"):
        matcher.match("é" * 128)  # 256 bytes, 128 characters


def test_keys_that_are_not_utf8_are_bytes(matcher):
    # A routing key of bytes that are not UTF-8 (from the wire, as surrogate escapes) is a
    # key: its words match wildcards, and only the same bytes.
    matcher.add("a.*", "star")
    matcher.add("a.\udcff", "literal")
    assert matcher.match("a.\udcff") == {"star", "literal"}
    assert matcher.match("a.\udcfe") == {"star"}
    assert matcher.match("\udcff" * 255) == frozenset()
    with pytest.raises(InvalidRoutingKey, match="256 bytes"):
        matcher.match("\udcff" * 256)


@pytest.mark.parametrize("bad", [None, 7, b"a.b", ["a"], "\ud800", "\udc7f"])
def test_non_text_keys_are_refused(matcher, bad):
    # Lone surrogates that stand for no byte are refused; "\udcff" (the byte 0xff as a
    # surrogate escape) is a key (test_keys_that_are_not_utf8_are_bytes).
    with pytest.raises(InvalidRoutingKey) as caught:
        matcher.match(bad)
    assert caught.value.key is bad
    with pytest.raises(InvalidRoutingKey):
        matcher.match_many(["ok", bad])
