"""xroute.tools.patterns: normal form, exact inclusion and equivalence, captures.

Every answer is checked against the reference matcher: when `includes(a, b)` says yes, no key
of `b` escapes `a` (keys drawn from `b` itself, over a small vocabulary with empty words);
when it says no, `counterexample` must give a key that `b` matches and `a` does not.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xroute.tools.patterns as patterns_module
from tests.strategies import WORDS, patterns
from xroute.core.errors import InclusionTooCostly, InvalidPattern
from xroute.core.keys import split_words
from xroute.engines.reference import pattern_matches
from xroute.tools.patterns import (
    captures,
    counterexample,
    equivalent,
    has_wildcard,
    includes,
    literals,
    normalise,
)

# Patterns are the suite's shared ones (tests/strategies.py): words a, b, c, the empty word,
# '*', runs of '#', and 'a*' and '##', which are plain words.
KEY_WORDS = WORDS + ["d", "*", "#", "a*"]
key_word_lists = st.lists(st.sampled_from(KEY_WORDS), max_size=7)


def matches(pattern: str, key_words: tuple[str, ...]) -> bool:
    return pattern_matches(split_words(pattern), key_words)


def representable(words: tuple[str, ...]) -> bool:
    # The key "" has no words: a key of one empty word cannot be written.
    return words != ("",)


@st.composite
def key_of(draw, pattern: str) -> tuple[str, ...]:
    """A key that ``pattern`` matches: each '*' one word, each '#' zero to three words."""
    out: list[str] = []
    for word in split_words(pattern):
        if word == "*":
            out.append(draw(st.sampled_from(KEY_WORDS)))
        elif word == "#":
            out.extend(draw(st.lists(st.sampled_from(KEY_WORDS), max_size=3)))
        else:
            out.append(word)
    return tuple(out)


# ------------------------------------------------------------------------- fixed cases

@pytest.mark.parametrize(
    "pattern, normal",
    [
        ("#.#", "#"),
        ("#.#.#.#", "#"),
        ("#.*", "*.#"),
        ("*.#", "*.#"),
        ("#.*.#.*", "*.*.#"),
        ("a.#.*.#.b", "a.*.#.b"),
        ("a.*.b", "a.*.b"),
        ("", ""),
        ("a..#.#", "a..#"),
        ("##.#*", "##.#*"),  # not wildcards: plain words
    ],
)
def test_normalise_fixed(pattern: str, normal: str) -> None:
    assert normalise(pattern) == normal


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("a.#", "a.*", True),  # the example
        ("a.*", "a.#", False),
        ("#", "", True),
        ("", "#", False),
        ("*.#", "#.*", True),
        ("#.a.#", "a", True),
        ("#.a.#", "#.b.#", False),
        # Not found by matching pattern to pattern word for word: `b`'s second 'a' guarantees
        # a word after the first one.
        ("#.a.*.#", "#.a.#.a.#", True),
        ("#.a.a.#", "#.a.#.a.#", False),
        # `#.` matches keys ending in an empty word, and "" has no words, so those keys all
        # have two words or more.
        ("*.*.#", "#.", True),
        ("*.*", "#.", False),
        ("a..b", "a..b", True),
        ("a.*.b", "a..b", True),
        ("a.b", "a..b", False),
        ("#.b", "*.b", True),
    ],
)
def test_includes_fixed(a: str, b: str, expected: bool) -> None:
    assert includes(a, b) is expected
    witness = counterexample(a, b)
    assert (witness is None) is expected
    if witness is not None:
        words = split_words(witness)
        assert matches(b, words) and not matches(a, words), witness


def test_counterexample_is_shortest_and_readable() -> None:
    assert counterexample("#.a.a.#", "#.a.#.a.#") == "a.z.a"
    assert counterexample("a.*", "a.#") == "a"
    assert counterexample("z.#", "*") == "z0"  # 'z' is taken: the fresh word avoids it


def test_equivalent_fixed() -> None:
    assert equivalent("#.#", "#")
    assert equivalent("#.*", "*.#")
    assert equivalent("a.#.*.b", "a.*.#.b")
    assert not equivalent("a.#", "a.*")
    assert not equivalent("#.a.*.#", "#.a.#.a.#")


def test_captures() -> None:
    assert captures("floor_1.#.temperature", "floor_1.bedroom.temperature") == [
        (1, "#", ("bedroom",))
    ]
    assert captures("*.b.#", "a.b") == [(0, "*", ("a",)), (2, "#", ())]
    assert captures("#.a.#", "a.a") == [(0, "#", ()), (2, "#", ("a",))]  # '#' takes few, leftmost
    assert captures("a.b", "a.b") == []
    assert captures("a.*", "a") is None


def test_helpers() -> None:
    assert has_wildcard("a.*") and has_wildcard("#") and not has_wildcard("a*.##")
    assert literals("a.*.b.#.a") == ("a", "b", "a")


@pytest.mark.parametrize("call", [normalise, has_wildcard, literals])
def test_bad_pattern_is_typed(call) -> None:
    with pytest.raises(InvalidPattern) as caught:
        call("x" * 256)
    assert "256 bytes" in str(caught.value)
    with pytest.raises(InvalidPattern):
        call(b"a.b")


def test_includes_validates_both_patterns() -> None:
    with pytest.raises(InvalidPattern) as caught:
        includes("a", 7)
    assert caught.value.pattern == 7
    with pytest.raises(InvalidPattern):
        equivalent("\ud800", "a")  # a lone surrogate that stands for no byte


def test_too_costly_is_typed(monkeypatch) -> None:
    monkeypatch.setattr(patterns_module, "MAX_STATES", 50)
    a = "#.a.*.*.*.*.*.*.*.b.#"
    b = "#." + ".#.".join(["a", "b"] * 8) + ".#"
    with pytest.raises(InclusionTooCostly) as caught:
        includes(a, b)
    assert caught.value.limit == 50


# ------------------------------------------------------------------------- properties


@settings(max_examples=300, deadline=None)
@given(patterns, key_word_lists)
def test_normal_form_matches_the_same_keys(pattern: str, key: list[str]) -> None:
    normal = normalise(pattern)
    assert matches(normal, tuple(key)) == matches(pattern, tuple(key)), (pattern, normal, key)
    assert normalise(normal) == normal
    assert len(normal) <= len(pattern)
    assert equivalent(pattern, normal)


@settings(max_examples=400, deadline=None)
@given(patterns, patterns, st.data())
def test_inclusion_is_exact(a: str, b: str, data) -> None:
    witness = counterexample(a, b)
    assert (witness is None) == includes(a, b)
    if witness is None:
        # Sound: no key that b matches escapes a.
        for _ in range(5):
            key = data.draw(key_of(b))
            if representable(key):
                assert matches(a, key), f"includes({a!r}, {b!r}) but {'.'.join(key)!r} escapes"
    else:
        # Complete: the 'no' comes with its proof.
        words = split_words(witness)
        assert matches(b, words), (a, b, witness)
        assert not matches(a, words), (a, b, witness)


@settings(max_examples=300, deadline=None)
@given(patterns, patterns, key_word_lists)
def test_equivalence_is_exact(a: str, b: str, key: list[str]) -> None:
    same = equivalent(a, b)
    assert same == (includes(a, b) and includes(b, a))
    if same and representable(tuple(key)):
        assert matches(a, tuple(key)) == matches(b, tuple(key))
    if not same:
        witness = counterexample(a, b)
        if witness is None:
            witness = counterexample(b, a)
        assert witness is not None
        words = split_words(witness)
        assert matches(a, words) != matches(b, words)


@settings(max_examples=200, deadline=None)
@given(patterns, st.data())
def test_captures_rebuild_the_key(pattern: str, data) -> None:
    key = data.draw(key_of(pattern))
    if not representable(key):
        return
    text = ".".join(key)
    taken = captures(pattern, text)
    assert taken is not None
    rebuilt: list[str] = []
    by_index = {i: words for i, _, words in taken}
    for i, word in enumerate(split_words(pattern)):
        rebuilt.extend(by_index[i] if word in ("*", "#") else [word])
    assert tuple(rebuilt) == split_words(text)
