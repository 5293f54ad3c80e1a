"""`KeyMemo`: routing keys -> the ids they lead to, for warm batches: one exchange's keys ->
queue ids in `xroute.core.batch.BatchRouter`, a matcher's keys -> destination ids in
`xroute.engines.matcher.TopicMatcher.match_many_ids`.

A batch's keys are probed in one compiled loop over Arrow's buffers
(`xroute.engines._memo_kernel.memo_probe`: a hash of the key's bytes, a table slot, the bytes
compared), and each message's ids copied from its answer (`write_answers`): no Python object
per key or per destination. Answers are id arrays; the router keeps each distinct set of
queue names once (`answer`), so a broadcast's 10k queues are one array whatever the keys.

The memo holds routes, not bindings: its owner drops it when a binding change can alter them,
and refills it from its first-route path. It is bounded (`MEMO_MAX_KEYS`, `MEMO_MAX_CELLS`);
past a bound it starts again empty.

A key met once need not be kept: `SeenKeys` tells which keys a filter of hashes has seen
before (a bit per hash slot), so that an owner keeps only keys that repeat and a first pass
over new keys pays one hash a key, not a copy of its bytes and of its ids. The filter is kept
apart from the memo: a binding change drops the routes, not the sight of the keys.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Keys kept (the table has 2-4 times as many slots, 12 bytes each: a hash and an entry; plus
# the key bytes and 12 bytes a key): about 80 MB at the bound with 30-byte keys.
MEMO_MAX_KEYS = 1 << 20
# Queue ids kept over every answer (4 bytes each): a key of its own answer per key times its
# queues. A broadcast's answer is one.
MEMO_MAX_CELLS = 16_000_000
_START_SLOTS = 1 << 12
# The filter of keys seen (`SeenKeys`), in bits: it starts small and, each time half
# its bits are set, starts again empty 4 times larger, up to 8M bits (1 MB), where it keeps
# the last few million keys' sight.
SEEN_START_BITS = 1 << 16
SEEN_MAX_BITS = 1 << 23
# An answer is a number: at least 0, a set of queues kept by `KeyMemo.answer`; ``ONE_QUEUE -
# q`` (down to ``REFUSED`` excluded), the one queue ``q`` (most keys of most shapes reach one
# queue: no set to keep or look up); `MISSING`, a key the memo has not kept. `REFUSED` and
# below are for the router's own use (a key `Topology.route` refused).
MISSING = -1
ONE_QUEUE = -2
REFUSED = -(1 << 30)


class KeyMemo:
    """Routing key bytes -> answer number; answer number -> ids."""

    def __init__(self, max_keys: int = MEMO_MAX_KEYS, max_cells: int = MEMO_MAX_CELLS) -> None:
        self.max_keys = max_keys
        self.max_cells = max_cells
        self.clear()

    def clear(self) -> None:
        """Forget every key and answer."""
        # the table, laid out as the engines' word tables: each slot's key hash (-1: empty)
        # and its entry
        self.slot_keys = np.full(_START_SLOTS, -1, dtype=np.int64)
        self.slot_entries = np.zeros(_START_SLOTS, dtype=np.int32)
        self.entry_answer = np.zeros(_START_SLOTS // 2, dtype=np.int32)
        self.entry_offsets = np.zeros(_START_SLOTS // 2 + 1, dtype=np.int64)
        self.entry_data = np.zeros(_START_SLOTS * 8, dtype=np.uint8)
        self.entries = 0
        self.used = 0
        # Answers: a set of queue names (by content) -> its number; their ids, flat, in
        # arrays with room to grow (``count`` answers, ``size`` ids used).
        self.answer_of: dict[frozenset[str], int] = {}
        self._answer_starts = np.zeros(_START_SLOTS, dtype=np.int64)
        self._answer_ids = np.zeros(_START_SLOTS, dtype=np.int32)
        self.count = 0
        self.cells = 0
        # answers added by `answer` since `answers` last ran: their ends and their ids
        self._pending_ends: list[int] = []
        self._pending_ids: list[int] = []
        # The answers `keep_answers` added, by their ids (a table laid out as the keys':
        # each slot's hash of the ids or -1, and the answer), so that keys with equal ids
        # share one answer; ``_kept_until``: the answers below it may be in the table.
        self._kept_keys = np.full(64, -1, dtype=np.int64)
        self._kept_slots = np.zeros(64, dtype=np.int32)
        self._kept = 0
        self._kept_until = 0

    def __len__(self) -> int:
        return self.entries

    def probe(self, data: np.ndarray, key_offsets: np.ndarray,
              messages: np.ndarray) -> tuple[np.ndarray, int]:
        """Each message's answer (`MISSING`: not kept), and how many were not kept; the keys
        are Arrow's buffers (``data``, ``key_offsets``), message ``m``'s key
        ``data[key_offsets[m]:key_offsets[m + 1]]``."""
        answers = np.empty(len(messages), dtype=np.int32)
        if not self.entries:
            answers.fill(MISSING)
            return answers, len(messages)
        missed = kernel().memo_probe(data, key_offsets, messages, self.slot_keys,
                                     self.slot_entries, self.entry_data, self.entry_offsets,
                                     self.entry_answer, answers)
        return answers, int(missed)

    def answer(self, names: frozenset[str], queue_index: dict[str, int]) -> int:
        """The number of the answer ``names`` (kept on first sight)."""
        found = self.answer_of.get(names)
        if found is not None:
            return found
        found = self.answer_of[names] = self.count + len(self._pending_ends)
        # a list, made an array once per batch (an array per answer cost 2 µs: most of a
        # first pass where each key has an answer of its own)
        self._pending_ids += map(queue_index.__getitem__, names)
        self._pending_ends.append(self.cells + len(self._pending_ids))
        return found

    def add_answers(self, offsets: np.ndarray, ids: np.ndarray) -> int:
        """Keep ``len(offsets) - 1`` answers at once, answer ``i`` being ids
        ``ids[offsets[i]:offsets[i + 1]]`` (as `TopicMatcher.match_many_ids` gives them, one
        per key, not looked up by content); the number of the first."""
        self.answers()
        first = self.count
        self._append(self.cells + offsets[1:], ids)
        return first

    def keep_answers(self, offsets: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The numbers of ``len(offsets) - 1`` answers given as `add_answers` takes them, for
        keys to keep (int32): an answer of one id is ``ONE_QUEUE - id`` (nothing kept); one
        with the same ids, in the same order, as an answer this kept before is that answer;
        any other is added. Keys whose answers are equal (seed-mix: every key's 100 queues)
        share one: a warm batch copies its ids from one hot array, not from an array a key
        (8 MB for 20k such keys), and the memo's cells bound holds more keys."""
        self.answers()
        size = len(offsets) - 1
        numbers = np.empty(size, dtype=np.int32)
        if not size:
            return numbers
        if self.count + size + 1 > len(self._answer_starts):
            self._answer_starts = _grown(self._answer_starts, self.count + size + 1)
        if self.cells + len(ids) > len(self._answer_ids):
            self._answer_ids = _grown(self._answer_ids, self.cells + len(ids))
        memo = kernel()
        if 2 * (self._kept + size) > len(self._kept_keys):  # at most half full
            slots = _power_of_two(2 * (self._kept + size))
            kept_keys = np.full(slots, -1, dtype=np.int64)
            kept_slots = np.zeros(slots, dtype=np.int32)
            memo.memo_rehash(self._kept_keys, self._kept_slots, kept_keys, kept_slots)
            self._kept_keys, self._kept_slots = kept_keys, kept_slots
        count = self.count
        self.count, self.cells = (int(n) for n in memo.keep_answers(
            offsets, ids, self._kept_keys, self._kept_slots, self._answer_starts,
            self._answer_ids, self.count, self.cells, numbers))
        self._kept += self.count - count
        self._kept_until = self.count
        return numbers

    def answers(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ids) of every answer so far: views, valid until answers are added."""
        if self._pending_ends:
            ends = np.array(self._pending_ends, dtype=np.int64)
            ids = np.array(self._pending_ids, dtype=np.int32)
            self._pending_ends, self._pending_ids = [], []
            self._append(ends, ids)
        return self._answer_starts[: self.count + 1], self._answer_ids[: self.cells]

    def _append(self, ends: np.ndarray, ids: np.ndarray) -> None:
        count, cells = self.count + len(ends), self.cells + len(ids)
        if count + 1 > len(self._answer_starts):
            self._answer_starts = _grown(self._answer_starts, count + 1)
        if cells > len(self._answer_ids):
            self._answer_ids = _grown(self._answer_ids, cells)
        self._answer_starts[self.count + 1 : count + 1] = ends
        self._answer_ids[self.cells : cells] = ids
        self.count, self.cells = count, cells

    def truncate(self, count: int) -> None:
        """Forget the answers numbered ``count`` and later (no key kept may lead to them):
        answers made for one batch's output only."""
        self.answers()
        if count < self._kept_until:  # answers of the table forgotten: the table with them
            self._kept_keys.fill(-1)
            self._kept = self._kept_until = 0
        self.count, self.cells = count, int(self._answer_starts[count])

    def make_room(self, keys: int) -> bool:
        """Whether the memo had to start again empty to keep ``keys`` more (past a bound)."""
        if self.entries + keys > self.max_keys or self.cells > self.max_cells:
            self.clear()
            return True
        return False

    def insert(self, data: np.ndarray, key_offsets: np.ndarray, messages: np.ndarray,
               answers: np.ndarray) -> None:
        """Keep the keys of ``messages`` (distinct or not) with their ``answers`` (room was
        made: `make_room`)."""
        if not len(messages):
            return
        room = self.entries + len(messages)
        starts = key_offsets[messages]
        size = int((key_offsets[messages + 1] - starts).sum())
        if self.used + size > len(self.entry_data):
            self.entry_data = _grown(self.entry_data, self.used + size)
        if room + 1 > len(self.entry_offsets):
            self.entry_offsets = _grown(self.entry_offsets, room + 1)
            self.entry_answer = _grown(self.entry_answer, room)
        memo = kernel()
        if 2 * room > len(self.slot_keys):  # at most half full: short probe runs
            size = _power_of_two(2 * room)
            slot_keys = np.full(size, -1, dtype=np.int64)
            slot_entries = np.zeros(size, dtype=np.int32)
            memo.memo_rehash(self.slot_keys, self.slot_entries, slot_keys, slot_entries)
            self.slot_keys, self.slot_entries = slot_keys, slot_entries
        self.entries, self.used = (int(n) for n in memo.memo_insert(
            data, key_offsets, messages, answers, self.slot_keys, self.slot_entries,
            self.entry_data, self.entry_offsets, self.entry_answer, self.entries, self.used))


class SeenKeys:
    """Which routing keys were seen before: a filter of their hashes, a bit per hash slot."""

    def __init__(self) -> None:
        self._bits: np.ndarray | None = None  # uint64 words, made on first use
        self._set = 0  # bits set

    def again(self, data: np.ndarray, key_offsets: np.ndarray,
              messages: np.ndarray) -> np.ndarray:
        """Whether each message's key was seen by an earlier call (or earlier in this one),
        as a bool array; the keys are marked seen. A few keys never seen share a bit with one
        that was and are called seen: keeping them is harmless."""
        bits = self._bits
        if bits is None or 2 * self._set >= 64 * len(bits):  # half full: start again
            size = SEEN_START_BITS if bits is None else min(SEEN_MAX_BITS, 4 * 64 * len(bits))
            bits = self._bits = np.zeros(size // 64, dtype=np.uint64)
            self._set = 0
        again = np.empty(len(messages), dtype=np.bool_)
        self._set += int(kernel().mark_seen(data, key_offsets, messages, bits, again))
        return again


def kernel() -> Any:
    """`xroute.engines._memo_kernel`, imported (numba with it) on first use."""
    from xroute.engines import _memo_kernel

    return _memo_kernel


def _grown(array: np.ndarray, at_least: int) -> np.ndarray:
    grown = np.zeros(max(at_least, 2 * len(array)), dtype=array.dtype)
    grown[: len(array)] = array
    return grown


def _power_of_two(value: int) -> int:
    return 1 << max(0, int(value - 1).bit_length())
