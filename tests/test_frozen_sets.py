"""`FrozenSets`: one shared frozenset per key, exact through growth past its bound and back."""

from __future__ import annotations

import random

import pytest

from xroute.engines.frozen_sets import STALE, FrozenSets

MODES = {"plain": {}, "shared singletons": {"share_singletons": True},
         "bare singletons": {"bare_singletons": True}}


@pytest.mark.parametrize("mode", MODES)
def test_members_stay_exact_and_shared_through_growth_and_shrinking(mode):
    sets = FrozenSets(freeze_now=3, **MODES[mode])
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
            if mode != "bare singletons" or len(found or ()) != 1:
                assert sets.get(name) is found  # the same frozenset until the key changes
            elif found:
                (alone,) = found
                assert sets.frozen[name] is alone  # kept bare: made on each read
            assert set(sets.members(name)) == (expected or set())
    assert dict(sets.items()).keys() == {k for k, v in truth.items() if v}
    keys, members = sets.columns()
    assert {k: set(m) for k, m in zip(keys, members)} == {k: v for k, v in truth.items() if v}
    assert len(sets) == len(keys)


def test_shared_singletons_are_one_frozenset_per_member():
    sets = FrozenSets(freeze_now=3, share_singletons=True)
    for key in ("a", "b", "c"):
        sets.add(key, "q")
    sets.add("d", "q")
    sets.add("d", "r")
    sets.remove("d", "r")  # back to one member: the shared one again
    assert sets.get("a") is sets.get("b") is sets.get("c") is sets.get("d") == {"q"}


def test_bare_singletons_keep_no_frozenset_for_a_key_of_one_member():
    sets = FrozenSets(freeze_now=3, bare_singletons=True)
    sets.add("a", 1)
    assert sets.frozen["a"] == 1 and sets.get("a") == {1}  # the member itself: no second dict
    sets.add("a", 2)
    assert sets.frozen["a"] == {1, 2}
    sets.remove("a", 1)
    assert sets.frozen["a"] == 2 and sets.get("a") == {2}
    assert list(sets.items()) == [("a", (2,))] and sets.columns() == (["a"], [(2,)])
    sets.remove("a", 2)
    assert sets.get("a") is None and not sets.frozen and len(sets) == 0


@pytest.mark.parametrize("odd", [frozenset({1}), frozenset(), None])
def test_a_member_that_would_read_as_an_answer_is_never_kept_bare(odd):
    """Readers take a frozenset in `frozen` as the answer itself: a frozenset member (or None,
    read as absent) is kept in a frozenset of its own, alone and after a removal."""
    sets = FrozenSets(freeze_now=3, bare_singletons=True)
    sets.add("a", odd)
    assert sets.frozen["a"] == frozenset((odd,)) and sets.get("a") == frozenset((odd,))
    sets.add("a", 1)
    sets.remove("a", 1)
    assert sets.frozen["a"] == frozenset((odd,)) and set(sets.members("a")) == {odd}
    assert list(sets.items()) == [("a", frozenset((odd,)))]
    sets.remove("a", odd)
    assert sets.get("a") is None
