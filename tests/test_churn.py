"""Binding churn (issue 12): 100,000 bindings removed and added back in random order on every
engine with warm caches, routes checked against `reference` during and after. No timing is
asserted; `xroute bench engines` measures it."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from xroute import ENGINES, TopicMatcher
from xroute.bench.workload import seed_keys, seed_patterns

SIZE = 100_000
CHECKED = 8  # keys checked at each checkpoint (the reference tests every pattern per key)


@dataclass
class Churn:
    """The bindings, the keys that warm the caches, the keys checked, the removal order (one
    for every engine, so that the reference's answers at each checkpoint, which cost more than
    an engine's whole run, are computed once per module) and those answers."""

    bindings: list[tuple[str, str]]
    keys: list[str]
    sample: list[str]
    order: list[tuple[str, str]]
    truths: dict[int, list[frozenset]] = field(default_factory=dict)

    def truth(self, removed: int) -> list[frozenset]:
        """The reference's answers for `sample` once the first ``removed`` of `order` are gone."""
        if removed not in self.truths:
            self.truths[removed] = expected(sorted(self.order[removed:]), self.sample)
        return self.truths[removed]


@pytest.fixture(scope="module")
def churn() -> Churn:
    patterns = seed_patterns(SIZE, seed=7)
    # 5,000 queues: a key reaches a few hundred of them, and removing one binding often
    # leaves another binding to the same queue (the cases a cache must not get wrong).
    bindings = list(dict.fromkeys((p, f"q{i % 5_000}") for i, p in enumerate(patterns)))
    keys = seed_keys(patterns, 3_000, seed=8, length=5)
    rng = random.Random("churn")
    order = bindings[:]
    rng.shuffle(order)
    return Churn(bindings, keys, rng.sample(keys, CHECKED), order)


def expected(bindings: list[tuple[str, str]], keys: list[str]) -> list[frozenset]:
    reference = TopicMatcher(engine="reference")
    for pattern, destination in bindings:
        reference.add(pattern, destination)
    return reference.match_many(keys)


@pytest.mark.parametrize("name", sorted(set(ENGINES) - {"reference"}))
def test_churn_of_100k_bindings_stays_exact(name, churn):
    bindings, keys, sample, order = churn.bindings, churn.keys, churn.sample, churn.order
    matcher = TopicMatcher(engine=name)
    for pattern, destination in bindings:
        matcher.add(pattern, destination)
    # Warm every cache the engine has: DFA states, memo, known keys, the kernel's flat trie.
    matcher.match_many(keys)
    matcher.match_many_ids(keys)
    for step, (pattern, destination) in enumerate(order, 1):
        matcher.remove(pattern, destination)
        if step in (len(order) // 3, 2 * len(order) // 3):
            truth = churn.truth(step)
            assert [matcher.match(k) for k in sample] == truth, f"{name}: after {step} removals"
            assert matcher.match_many(sample) == truth
    assert len(matcher) == 0
    assert matcher.match_many(keys) == [frozenset()] * len(keys)
    # Added back in another order than the bindings were first added in.
    for pattern, destination in reversed(order):
        matcher.add(pattern, destination)
    truth = churn.truth(0)
    assert [matcher.match(k) for k in sample] == truth, f"{name}: after adding all back"
    names = matcher.destinations()
    offsets, ids = matcher.match_many_ids(sample)
    batch = [frozenset(names[j] for j in ids[offsets[i] : offsets[i + 1]]) for i in range(CHECKED)]
    assert batch == truth
