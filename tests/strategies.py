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
