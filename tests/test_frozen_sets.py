"""`FrozenSets`: one shared frozenset per key, exact through growth past its bound and back."""

from __future__ import annotations

import random

from xroute.engines.frozen_sets import FrozenSets


def test_members_stay_exact_and_shared_through_growth_and_shrinking():
    sets = FrozenSets(freeze_now=3)
    truth: dict[str, set[int]] = {}
    rng = random.Random(5)
    for _ in range(2_000):
        key = rng.choice("abc")
        member = rng.randrange(10)
        held = truth.setdefault(key, set())
        if member in held:
            sets.remove(key, member)
            held.discard(member)
        else:
            sets.add(key, member)
            held.add(member)
        for name in "abc":
            expected = truth.get(name) or None
            found = sets.get(name)
            assert found == expected
            assert sets.get(name) is found  # the same frozenset until the key changes
            assert set(sets.members(name)) == (expected or set())
    assert dict(sets.items()).keys() == {k for k, v in truth.items() if v}
    keys, members = sets.columns()
    assert {k: set(m) for k, m in zip(keys, members)} == {k: v for k, v in truth.items() if v}
    assert len(sets) == len(keys)
