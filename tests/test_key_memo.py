"""The key memo of the batch paths (issue 36, batches at first contact): keys are kept only once
they repeat (`SeenKeys`), a first pass keeps nothing, and whatever mix of kept, seen-once and
new keys a batch holds, `TopicMatcher.match_many_ids` and `BatchRouter.route` answer as the
reference engine and `Topology.route_message` do, across binding changes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xroute import Topology
from xroute.core.batch import BatchRouter
from xroute.engines import TopicMatcher
from xroute.engines.compiled import utf8_buffers
from xroute.engines.key_memo import KeyMemo, SeenKeys
from xroute.engines.matcher import MEMO_MIN_BATCH

WORDS = ["a", "b", "", "ab", "é"]
keys_text = st.lists(st.sampled_from(WORDS), max_size=5).map(".".join)
patterns_text = st.lists(st.sampled_from(WORDS + ["*", "#"]), max_size=4).map(".".join)
bindings = st.lists(st.tuples(patterns_text, st.integers(0, 5)), min_size=1, max_size=25)
# A pool of keys, and batches drawn from it (repeats within and across batches), each at least
# `MEMO_MIN_BATCH` long so that the memo is used.
pools = st.lists(keys_text, min_size=1, max_size=60, unique=True)
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _batches(draw: st.DrawFn, pool: list[str]) -> list[list[str]]:
    picks = st.lists(st.sampled_from(pool), min_size=MEMO_MIN_BATCH, max_size=3 * MEMO_MIN_BATCH)
    return draw(st.lists(picks, min_size=1, max_size=5))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list, list[list[str]], list]:
    """Bindings, batches, and after each batch a binding change or none."""
    pool = draw(pools)
    batches = _batches(draw, pool)
    changes = draw(st.lists(st.one_of(st.none(), st.tuples(patterns_text, st.integers(0, 5))),
                            min_size=len(batches), max_size=len(batches)))
    return draw(bindings), batches, changes


def _answers(matcher: TopicMatcher, keys: list[str]) -> list[frozenset]:
    offsets, ids = matcher.match_many_ids(pa.array(keys, pa.string()))
    destinations = matcher.destinations()
    found = []
    for i in range(len(keys)):
        mine = ids[offsets[i]:offsets[i + 1]].tolist()
        assert len(set(mine)) == len(mine), (keys[i], mine)  # no repeats within a key
        found.append(frozenset(destinations[d] for d in mine))
    return found


@SLOW
@given(scenarios())
def test_match_many_ids_equals_the_reference_whatever_the_memo_holds(scenario):
    bound, batches, changes = scenario
    matcher, truth = TopicMatcher(), TopicMatcher(engine="reference")
    for pattern, queue in bound:
        matcher.add(pattern, f"q{queue}")
        truth.add(pattern, f"q{queue}")
    for batch, change in zip(batches, changes):
        for _ in range(3):  # new keys, keys seen once (kept now), kept keys
            expected = [truth.match(key) for key in batch]
            actual = _answers(matcher, batch)
            assert actual == expected, [
                (key, e, a) for key, e, a in zip(batch, expected, actual) if e != a]
        if change is not None:
            pattern, queue = change
            matcher.add(pattern, f"q{queue}")
            truth.add(pattern, f"q{queue}")


def test_a_first_pass_keeps_no_key_and_a_second_keeps_them_all():
    matcher = TopicMatcher()
    matcher.add("a.*", "q")
    keys = pa.array([f"a.{i}" for i in range(100)], pa.string())
    first = matcher.match_many_ids(keys)
    assert matcher._memo is None  # nothing kept on first sight
    second = matcher.match_many_ids(keys)
    assert len(matcher._memo) == 100
    third = matcher.match_many_ids(keys)
    for answer in (second, third):
        assert answer[0].tolist() == first[0].tolist()
        assert answer[1].tolist() == first[1].tolist()


def test_keys_seen_before_a_change_are_kept_on_their_next_sight():
    matcher = TopicMatcher()
    matcher.add("a.*", "q")
    keys = pa.array([f"a.{i}" for i in range(50)], pa.string())
    matcher.match_many_ids(keys)
    matcher.add("#", "all")  # drops the memo, not the sight of the keys
    offsets, ids = matcher.match_many_ids(keys)
    assert len(matcher._memo) == 50
    assert np.diff(offsets).tolist() == [2] * 50


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(keys_text, max_size=40), min_size=1, max_size=4))
def test_seen_keys_never_miss_a_key_seen_before(calls):
    seen, before = SeenKeys(), set()
    for keys in calls:
        data, offsets = utf8_buffers(pa.array(keys, pa.string()))
        again = seen.again(data, offsets, np.arange(len(keys), dtype=np.int64))
        for key, flag in zip(keys, again.tolist()):
            if key in before:
                assert flag, key  # a repeat is always called one (a few new keys may be too)
            before.add(key)


def test_a_memo_forgets_answers_made_for_one_batch():
    memo = KeyMemo()
    first = memo.add_answers(np.array([0, 2], dtype=np.int64), np.array([4, 5], dtype=np.int32))
    temporary = memo.add_answers(np.array([0, 1, 3], dtype=np.int64),
                                 np.array([6, 7, 8], dtype=np.int32))
    memo.truncate(temporary)
    starts, ids = memo.answers()
    assert first == 0 and temporary == 1
    assert starts.tolist() == [0, 2] and ids.tolist() == [4, 5]


@SLOW
@given(bound=bindings, pool=pools, data=st.data())
def test_route_uncached_equals_route_message_and_leaves_the_cache_alone(bound, pool, data):
    t = Topology()
    t.declare_exchange("x", "topic")
    for pattern, queue in bound:
        t.declare_queue(f"q{queue}")
        t.bind("x", f"q{queue}", pattern)
    cached = data.draw(st.lists(st.sampled_from(pool), max_size=5))
    for key in cached:
        t.route("x", key)
    size = t.route_cache_stats()["route_cache_entries"]
    for key in pool:
        assert t.route_uncached("x", key) == t.route_message("x", key), key
    assert t.route_cache_stats()["route_cache_entries"] == size


@SLOW
@given(scenarios())
def test_a_router_over_new_seen_and_kept_keys_equals_route_message(scenario):
    bound, batches, changes = scenario
    t = Topology()
    t.declare_exchange("x", "topic")
    for queue in range(6):
        t.declare_queue(f"q{queue}")
    for pattern, queue in bound:
        t.bind("x", f"q{queue}", pattern)
    router = BatchRouter(t)
    for batch, change in zip(batches, changes):
        for _ in range(3):
            routes = router.route("x", pa.array(batch, pa.string()))
            assert not routes.errors
            for i, key in enumerate(batch):
                assert routes.queues(i) == t.route_message("x", key), key
        if change is not None:
            pattern, queue = change
            t.bind("x", f"q{queue}", pattern)
