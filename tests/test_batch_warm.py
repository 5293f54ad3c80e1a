"""Warm batches (issue 36, goal 3): the key memo's kernels read keys 8 bytes at a time and probe
a batch in two passes, a matcher's memo keeps equal answers once, and a batch's offsets and
ids are laid out in one call. Each kernel against its plain definition, and the batch paths
against the reference engine and `Topology.route_message` on keys long enough (8 bytes and
more, sharing long prefixes and suffixes) for the 8-byte reads to decide."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xroute import Topology
from xroute.core.batch import BatchRouter, BatchRoutes
from xroute.core.errors import InvalidRoutingKey
from xroute.engines import TopicMatcher
from xroute.engines._kernel import _hash_bytes, _same_bytes
from xroute.engines.compiled import utf8_buffers
from xroute.engines.key_memo import MISSING, ONE_QUEUE, KeyMemo, kernel

SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Words of 0-12 bytes that share prefixes: keys of 8 bytes and more differ in any chunk.
WORDS = ["", "a", "device", "devices", "sensor-0001", "sensor-0002", "é", "temperature"]
long_keys = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(".".join)
patterns = st.lists(st.sampled_from(WORDS + ["*", "#"]), min_size=1, max_size=4).map(".".join)
bindings = st.lists(st.tuples(patterns, st.integers(0, 5)), min_size=1, max_size=20)


def _hash_by_bytes(data: bytes) -> int:
    """`_hash_bytes` as first defined: each 8 bytes (the last part fewer) assembled one by
    one, little-endian."""
    mask = (1 << 64) - 1
    value = 14695981039346656037 ^ len(data)
    for at in range(0, len(data), 8):
        value = ((value ^ int.from_bytes(data[at:at + 8], "little")) * 11400714819323198485
                 ) & mask
        value ^= value >> 29
    return value >> 1


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.data())
def test_hash_bytes_reads_8_bytes_at_a_time_to_the_same_value(blob, data):
    begin = data.draw(st.integers(0, len(blob)))
    stop = data.draw(st.integers(begin, len(blob)))
    array = np.frombuffer(blob, dtype=np.uint8) if blob else np.zeros(1, dtype=np.uint8)
    assert _hash_bytes(array, begin, stop) == _hash_by_bytes(blob[begin:stop])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), st.binary(max_size=40), st.data())
def test_same_bytes_compares_every_byte(left, right, data):
    size = data.draw(st.integers(0, min(len(left), len(right))))
    left_at = data.draw(st.integers(0, len(left) - size))
    right_at = data.draw(st.integers(0, len(right) - size))
    # one byte flipped at a drawn place, half the time: a difference in any 8-byte chunk
    if size and data.draw(st.booleans()):
        flip = data.draw(st.integers(0, size - 1))
        changed = bytearray(right)
        changed[right_at + flip] = left[left_at + flip] ^ data.draw(st.integers(1, 255))
        right = bytes(changed)
    as_array = [np.frombuffer(b, dtype=np.uint8) if b else np.zeros(1, dtype=np.uint8)
                for b in (left, right)]
    expected = left[left_at:left_at + size] == right[right_at:right_at + size]
    assert _same_bytes(as_array[0], left_at, as_array[1], right_at, size) == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(long_keys, min_size=1, max_size=60, unique=True),
       st.lists(long_keys, min_size=1, max_size=60))
def test_a_memo_probe_finds_exactly_the_keys_kept(kept, probed):
    memo = KeyMemo()
    data, offsets = utf8_buffers(pa.array(kept, pa.string()))
    memo.insert(data, offsets, np.arange(len(kept), dtype=np.int64),
                np.arange(len(kept), dtype=np.int32))
    data, offsets = utf8_buffers(pa.array(probed, pa.large_string()))
    answers, missed = memo.probe(data, offsets, np.arange(len(probed), dtype=np.int64))
    number = {key: i for i, key in enumerate(kept)}
    assert answers.tolist() == [number.get(key, MISSING) for key in probed]
    assert missed == sum(key not in number for key in probed)


answer_lists = st.lists(st.lists(st.integers(0, 6), max_size=5), max_size=30)


def _flat(answers: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(answers) + 1, dtype=np.int64)
    np.cumsum([len(a) for a in answers], out=offsets[1:])
    ids = np.array([i for a in answers for i in a], dtype=np.int32)
    return offsets, ids


@settings(max_examples=150, deadline=None)
@given(st.lists(answer_lists, min_size=1, max_size=4))
def test_kept_answers_are_shared_by_content(calls):
    memo = KeyMemo()
    numbered: dict[tuple[int, ...], int] = {}
    for answers in calls:
        numbers = memo.keep_answers(*_flat(answers)).tolist()
        starts, ids = memo.answers()
        for answer, number in zip(answers, numbers):
            if len(answer) == 1:
                assert number == ONE_QUEUE - answer[0]  # one id: nothing kept
                continue
            assert ids[starts[number]:starts[number + 1]].tolist() == answer
            # equal ids, the same answer, across calls too; other ids, another answer
            assert numbered.setdefault(tuple(answer), number) == number
    assert len(set(numbered.values())) == len(numbered)
    assert memo.count == len(numbered)


def test_answers_made_for_one_batch_after_kept_ones_are_forgotten_alone():
    memo = KeyMemo()
    kept = memo.keep_answers(*_flat([[1, 2], [3, 4]]))
    first = memo.add_answers(*_flat([[1, 2], [5, 6]]))  # one batch's, not by content
    memo.truncate(first)
    again = memo.keep_answers(*_flat([[3, 4], [5, 6]]))
    assert again[0] == kept[1] and memo.count == 3
    memo.truncate(1)  # below the kept ones: the table forgets them with their ids
    assert memo.keep_answers(*_flat([[3, 4]])).tolist() == [1] and memo.count == 2


@settings(max_examples=150, deadline=None)
@given(answer_lists, st.data())
def test_lay_out_writes_each_answer_as_numpy_would(pool, data):
    starts, ids = _flat(pool)
    ones = st.integers(0, 9).map(lambda q: ONE_QUEUE - q)
    choices = st.integers(0, len(pool) - 1) | ones if pool else ones
    answers = np.array(data.draw(st.lists(choices, max_size=40)), dtype=np.int32)
    offsets, out = kernel().lay_out(answers, starts, ids)
    expected = [[ONE_QUEUE - a] if a < 0 else pool[a] for a in answers.tolist()]
    assert offsets.tolist() == _flat(expected)[0].tolist()
    assert out.tolist() == [i for each in expected for i in each]


@settings(max_examples=150, deadline=None)
@given(answer_lists, st.data())
def test_take_answers_copies_the_rows_asked(pool, data):
    offsets, ids = _flat(pool)
    rows = data.draw(st.lists(st.integers(0, len(pool) - 1), max_size=20)) if pool else []
    taken = kernel().take_answers(offsets, ids, np.array(rows, dtype=np.int64))
    assert taken[0].tolist() == _flat([pool[r] for r in rows])[0].tolist()
    assert taken[1].tolist() == [i for r in rows for i in pool[r]]


def test_keys_of_one_answer_share_it_in_the_memo():
    # seed-mix's shape: every key reaches the same queues (a '#' binding each)
    matcher = TopicMatcher()
    for queue in ("q1", "q2", "q3"):
        matcher.add("#", queue)
    keys = pa.array([f"device.{i}.temperature" for i in range(100)], pa.string())
    for _ in range(3):  # new keys, kept keys, keys answered by the memo
        offsets, ids = matcher.match_many_ids(keys)
        assert np.diff(offsets).tolist() == [3] * 100
    assert len(matcher._memo) == 100 and matcher._memo.cells == 3  # one answer, not 100


@SLOW
@given(bindings, st.lists(st.lists(long_keys, min_size=32, max_size=80), min_size=1,
                          max_size=3))
def test_warm_batches_of_long_keys_equal_the_reference(bound, batches):
    matcher, truth = TopicMatcher(), TopicMatcher(engine="reference")
    topology = Topology()
    for pattern, queue in bound:
        for each in (matcher, truth):
            each.add(pattern, f"q{queue}")
        topology.declare_queue(f"q{queue}")
        topology.bind("amq.topic", f"q{queue}", pattern)
    router = BatchRouter(topology)
    for batch in batches:
        arrow = pa.array(batch, pa.string())
        for _ in range(3):  # new keys, keys seen once (kept now), kept keys
            offsets, ids = matcher.match_many_ids(arrow)
            destinations = matcher.destinations()
            got = [frozenset(destinations[d] for d in ids[offsets[i]:offsets[i + 1]].tolist())
                   for i in range(len(batch))]
            assert got == [truth.match(key) for key in batch]
            routes = router.route("amq.topic", arrow)
            assert [routes.queues(i) for i in range(len(batch))] == [
                topology.route_message("amq.topic", key) for key in batch]


def _invalid_utf8(keys: list[str], bad_at: int) -> pa.Array:
    """An Arrow string array of ``keys`` whose key ``bad_at`` ends in a byte UTF-8 forbids."""
    encoded = [key.encode() + (b"\xff" if i == bad_at else b"") for i, key in enumerate(keys)]
    offsets = np.zeros(len(keys) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(keys),
                                 [None, pa.py_buffer(offsets.tobytes()),
                                  pa.py_buffer(b"".join(encoded))])


@pytest.mark.parametrize("passes", [0, 1, 2])  # no memo, keys seen once, keys kept
def test_a_key_the_memo_lacks_is_still_refused_if_not_utf8(passes):
    matcher = TopicMatcher()
    matcher.add("device.#", "q")
    keys = [f"device.{i}.temperature" for i in range(64)]
    for _ in range(passes):
        matcher.match_many_ids(pa.array(keys, pa.string()))
    with pytest.raises(InvalidRoutingKey, match="UTF-8"):
        matcher.match_many_ids(_invalid_utf8(keys + ["device.new"], 64))
    # the same bytes as kept keys, valid: answered
    offsets, _ = matcher.match_many_ids(pa.array(keys, pa.string()))
    assert np.diff(offsets).tolist() == [1] * 64


def test_a_batch_with_a_null_or_a_long_key_is_refused_by_name():
    matcher = TopicMatcher()
    matcher.add("#", "q")
    keys = [f"k.{i}" for i in range(40)]
    with pytest.raises(InvalidRoutingKey):
        matcher.match_many_ids(pa.array(keys + [None], pa.string()))
    with pytest.raises(InvalidRoutingKey, match="bytes"):
        matcher.match_many_ids(pa.array(keys + ["x" * 256], pa.string()))


def test_hits_of_a_batch_routed_by_key_are_made_when_read():
    # a batch routed by key alone counts no hit while routing: its counters are made when
    # read (zeros, as many as the router's bindings then), with the hits worked out then
    topology = Topology()
    for queue, pattern in (("q1", "a.*"), ("q2", "#")):
        topology.declare_queue(queue)
        topology.bind("amq.topic", queue, pattern)
    router = BatchRouter(topology)
    routes = router.route("amq.topic", pa.array(["a.b", "c", "a.b"] * 20, pa.string()))
    expected = {binding: 0 for binding in router.bindings}
    for key in ["a.b", "c", "a.b"] * 20:
        topology.route_message("amq.topic", key, observer=lambda _x, matched, _via: [
            expected.__setitem__(b, expected[b] + 1) for b in matched])
    assert routes.hits.tolist() == [expected[b] for b in router.bindings]
    assert BatchRoutes(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), {},
                       3).hits.tolist() == [0, 0, 0]
