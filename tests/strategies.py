"""Hypothesis strategies shared by the property tests: small vocabularies so that patterns
and keys collide often, with empty words, literal ``*``/``#`` in keys and runs of ``#``."""

from __future__ import annotations

from hypothesis import strategies as st

WORDS = ["a", "b", "c", ""]
pattern_words = st.lists(st.sampled_from(WORDS + ["*", "#", "#", "a*", "##"]), max_size=6)
patterns = pattern_words.map(".".join)
keys = st.lists(st.sampled_from(WORDS + ["d", "*", "#"]), max_size=7).map(".".join)
destinations = st.sampled_from(["q1", "q2", "q3", "q4"])
bindings = st.lists(st.tuples(patterns, destinations), max_size=25)


def apply_binding_step(step: tuple, matchers: list, live: list[tuple[str, str]]) -> None:
    """Carry out one step of a random session on every matcher: ``("add", pattern,
    destination)``, or ``("remove", i)``, which unbinds the i-th live binding (modulo their
    number; nothing if there is none). ``live`` keeps the bindings in order."""
    if step[0] == "add":
        _, pattern, destination = step
        for matcher in matchers:
            matcher.add(pattern, destination)
        if (pattern, destination) not in live:
            live.append((pattern, destination))
    elif step[0] == "remove" and live:
        pattern, destination = live.pop(step[1] % len(live))
        for matcher in matchers:
            matcher.remove(pattern, destination)
