"""The numba kernels of the key memo (`xroute.engines.key_memo.KeyMemo`): routing key bytes ->
answer number, probed over Arrow's buffers, and each message's ids copied from its answer.

The table is laid out as the engines' word tables (`xroute.engines._kernel.build_word_table`:
a hash per slot, -1 when empty, and the slot's entry, whose bytes are
``entry_data[entry_offsets[entry]:entry_offsets[entry + 1]]``) and probed by the same loop,
`xroute.engines._kernel.find_slot`. Imported only when a batch first uses the memo (importing
numba costs about half a second), after `xroute.engines.numba_cache` has chosen the cache
folder.
"""

from __future__ import annotations

import numpy as np

from xroute.engines import numba_cache

numba_cache.prepare()  # the same cache folder as the engines' kernels, zip or not

from numba import njit  # noqa: E402  (after the cache locator is in place)

from xroute.engines._kernel import (  # noqa: E402
    _EMPTY,
    _FNV_OFFSET,
    _HASH_MULTIPLIER,
    _hash_bytes,
    _slot,
    find_slot,
    prefetch,
)


@njit(cache=True, inline="always")
def _bits(size):
    """log2 of ``size``, a power of two."""
    bits = 0
    while size > 1:
        size >>= 1
        bits += 1
    return bits


@njit(cache=True, nogil=True)
def memo_probe(data, key_offsets, messages, slot_keys, slot_entries, entry_data,
               entry_offsets, entry_answer, answers):
    """``answers[i]``: the answer of message ``messages[i]``'s key, or -1 if the memo lacks it;
    the number of misses.

    Two passes: every key hashed first, its slot's lines prefetched, then every key looked
    up. Probing key after key stalled on each key's table lines (random in tables of about
    a megabyte, out of cache after the batch's ids were written): 100 ns a 27-byte key of a
    warm batch, 30-40 this way."""
    bits = _bits(slot_keys.shape[0])
    shift = np.uint64(64 - bits)
    count = messages.shape[0]
    hashes = np.empty(count, dtype=np.int64)
    for i in range(count):
        m = messages[i]
        hashed = _hash_bytes(data, key_offsets[m], key_offsets[m + 1])
        hashes[i] = hashed
        slot = _slot(hashed, shift)
        prefetch(slot_keys, slot)
        prefetch(slot_entries, slot)
    missed = 0
    for i in range(count):
        m = messages[i]
        slot = find_slot(data, key_offsets[m], key_offsets[m + 1], hashes[i], entry_data,
                         entry_offsets, slot_keys, slot_entries, bits)
        if slot_keys[slot] == _EMPTY:
            answers[i] = -1  # MISSING
            missed += 1
        else:
            answers[i] = entry_answer[slot_entries[slot]]
    return missed


@njit(cache=True, nogil=True)
def memo_insert(data, key_offsets, messages, answer_of, slot_keys, slot_entries, entry_data,
                entry_offsets, entry_answer, entries, used):
    """Add the keys of ``messages`` with answers ``answer_of`` (a key already in is skipped);
    the arrays have room (the caller grows them). Returns (entries, bytes used) after."""
    bits = _bits(slot_keys.shape[0])
    for i in range(messages.shape[0]):
        m = messages[i]
        begin = key_offsets[m]
        stop = key_offsets[m + 1]
        hashed = _hash_bytes(data, begin, stop)
        slot = find_slot(data, begin, stop, hashed, entry_data, entry_offsets, slot_keys,
                         slot_entries, bits)
        if slot_keys[slot] != _EMPTY:
            continue
        for j in range(stop - begin):
            entry_data[used + j] = data[begin + j]
        used += stop - begin
        entry_answer[entries] = answer_of[i]
        entry_offsets[entries + 1] = used
        slot_keys[slot] = hashed
        slot_entries[slot] = entries
        entries += 1
    return entries, used


@njit(cache=True, nogil=True)
def memo_rehash(old_keys, old_entries, slot_keys, slot_entries):
    """Move every slot of the table (``old_keys``, ``old_entries``) into the empty, larger
    one (``slot_keys``, ``slot_entries``): the hashes are kept, no key is hashed again."""
    mask = slot_keys.shape[0] - 1
    shift = np.uint64(64 - _bits(slot_keys.shape[0]))
    for old in range(old_keys.shape[0]):
        hashed = old_keys[old]
        if hashed == _EMPTY:
            continue
        slot = _slot(hashed, shift)
        while slot_keys[slot] != _EMPTY:
            slot = (slot + 1) & mask
        slot_keys[slot] = hashed
        slot_entries[slot] = old_entries[old]


@njit(cache=True, nogil=True)
def mark_seen(data, key_offsets, messages, seen, again):
    """Set each key's bit in the filter ``seen`` (uint64 words, a power of two of them, a bit
    per hash slot); ``again[i]``: whether message ``messages[i]``'s bit was set already (its
    key was seen, or one of the same bit: a few keys are kept that need not be). The number
    of bits set now."""
    shift = np.uint64(64 - _bits(seen.shape[0] * 64))
    added = 0
    for i in range(messages.shape[0]):
        m = messages[i]
        slot = _slot(_hash_bytes(data, key_offsets[m], key_offsets[m + 1]), shift)
        bit = np.uint64(1) << np.uint64(slot & 63)
        word = slot >> 6
        if seen[word] & bit:
            again[i] = True
        else:
            seen[word] |= bit
            again[i] = False
            added += 1
    return added


@njit(cache=True, nogil=True)
def write_answers(answers, answer_starts, answer_ids, offsets, into):
    """Each message's ids, its answer's, into ``into`` at ``offsets[i]`` (the caller sized
    it); a negative answer is one id (`xroute.engines.key_memo.ONE_QUEUE`)."""
    for i in range(answers.shape[0]):
        a = answers[i]
        if a < 0:  # one id, ``-2 - a`` (`xroute.engines.key_memo.ONE_QUEUE`)
            into[offsets[i]] = -2 - a
            continue
        begin = answer_starts[a]
        count = answer_starts[a + 1] - begin
        at = offsets[i]
        if count == 1:
            into[at] = answer_ids[begin]
            continue
        source = answer_ids[begin : begin + count]
        out = into[at : at + count]
        for j in range(count):
            out[j] = source[j]


@njit(cache=True, nogil=True)
def lay_out(answers, answer_starts, answer_ids):
    """(offsets, ids) of a batch whose message ``i`` has answer ``answers[i]`` (as
    `write_answers` reads it): the offsets summed and the ids written in one call, where
    NumPy's diff, gather and cumsum over the answers cost as much as the copy."""
    count = answers.shape[0]
    offsets = np.empty(count + 1, dtype=np.int64)
    offsets[0] = 0
    total = 0
    for i in range(count):
        a = answers[i]
        total += 1 if a < 0 else answer_starts[a + 1] - answer_starts[a]
        offsets[i + 1] = total
    into = np.empty(total, dtype=np.int32)
    write_answers(answers, answer_starts, answer_ids, offsets, into)
    return offsets, into


@njit(cache=True, inline="always")
def _hash_answer(ids, begin, stop):
    """A hash of an answer's ids from its size, its first 8 ids and its last: answers that
    differ elsewhere only share a slot's hash (and are compared in full)."""
    value = _FNV_OFFSET ^ np.uint64(stop - begin)
    for j in range(begin, min(begin + 8, stop)):
        value = (value ^ np.uint64(ids[j])) * _HASH_MULTIPLIER
        value ^= value >> np.uint64(29)
    if stop - begin > 8:
        value = (value ^ np.uint64(ids[stop - 1])) * _HASH_MULTIPLIER
        value ^= value >> np.uint64(29)
    return np.int64(value >> np.uint64(1))


@njit(cache=True, nogil=True)
def keep_answers(offsets, ids, table_keys, table_values, answer_starts, answer_ids, count,
                 cells, numbers):
    """``numbers[i]``: the number of answer ``ids[offsets[i]:offsets[i + 1]]``: ``-2 - id`` for
    one id (`xroute.engines.key_memo.ONE_QUEUE`); for any other size, the answer kept with the
    same ids in the same order, found in the table (``table_keys``: each slot's hash or -1,
    ``table_values``: its answer), else the answer added (its ids at ``cells``, numbered
    ``count``, put in the table). The arrays have room (the caller grows them, the table at
    most half full). Returns (count, cells) after."""
    mask = table_keys.shape[0] - 1
    shift = np.uint64(64 - _bits(table_keys.shape[0]))
    for i in range(offsets.shape[0] - 1):
        begin = offsets[i]
        stop = offsets[i + 1]
        size = stop - begin
        if size == 1:
            numbers[i] = -2 - ids[begin]
            continue
        hashed = _hash_answer(ids, begin, stop)
        slot = _slot(hashed, shift)
        found = -1
        while table_keys[slot] != _EMPTY:
            if table_keys[slot] == hashed:
                a = table_values[slot]
                first = answer_starts[a]
                if answer_starts[a + 1] - first == size:
                    same = True
                    for j in range(size):
                        if answer_ids[first + j] != ids[begin + j]:
                            same = False
                            break
                    if same:
                        found = a
                        break
            slot = (slot + 1) & mask
        if found < 0:
            for j in range(size):
                answer_ids[cells + j] = ids[begin + j]
            cells += size
            found = count
            count += 1
            answer_starts[count] = cells
            table_keys[slot] = hashed
            table_values[slot] = found
        numbers[i] = found
    return count, cells


@njit(cache=True, nogil=True)
def take_answers(offsets, ids, rows):
    """(offsets, ids) of the answers ``rows`` (ascending or not) of ``(offsets, ids)``: their
    ids copied alone, where a NumPy mask over every id (``np.repeat`` of the rows' flags by
    the sizes) cost a pass over all of them (a batch of 4,096 keys of 100 ids each: 1 ms
    to keep the few keys a first pass meets again)."""
    count = rows.shape[0]
    taken = np.empty(count + 1, dtype=np.int64)
    taken[0] = 0
    for i in range(count):
        taken[i + 1] = taken[i] + offsets[rows[i] + 1] - offsets[rows[i]]
    into = np.empty(taken[count], dtype=np.int32)
    for i in range(count):
        begin = offsets[rows[i]]
        at = taken[i]
        for j in range(taken[i + 1] - at):
            into[at + j] = ids[begin + j]
    return taken, into
