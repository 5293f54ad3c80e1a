"""The numba kernels of `xroute.core.batch.BatchRouter`: a batch's matched bindings expanded into
(message, queue) pairs, (message, next exchange) pairs and hit counts. The key memo's kernels
are the engines' (`xroute.engines._memo_kernel`), which the matcher shares.

Imported only when a batch is first routed (importing numba costs about half a second), after
`xroute.engines.numba_cache` has chosen the cache folder, which the engines' kernels share.
"""

from __future__ import annotations

import numpy as np

from xroute.engines import numba_cache

numba_cache.prepare()  # the same cache folder as the engines' kernels, zip or not

from numba import njit  # noqa: E402  (after the cache locator is in place)


@njit(cache=True, nogil=True, inline="always")
def _append(message, ids, begin, stop, rows, into, at):
    """Write (``message``, ``ids[begin:stop]``) pairs at ``rows[at:]`` and ``into[at:]``;
    the new end. A loop over views, which LLVM vectorizes (see `xroute.engines._kernel._copy`);
    a group of one skips the views."""
    count = stop - begin
    if count == 1:
        rows[at] = message
        into[at] = ids[begin]
        return at + 1
    source = ids[begin:stop]
    rows_here = rows[at : at + count]
    into_here = into[at : at + count]
    for i in range(count):
        rows_here[i] = message
        into_here[i] = source[i]
    return at + count


@njit(cache=True, nogil=True)
def expand_groups(key_of, offsets, ids, id_binding, id_queue, id_exchange, hits, id_hits,
                  queue_count, exchange_count):
    """One exchange step of the walk, per group (a distinct key, ``key_of[i]`` for message
    ``i``) with matched ids ``ids[offsets[g]:offsets[g + 1]]``: count each binding's hits, once
    per message of the group, and list the group's queues and next exchanges, each once.
    ``id_binding``, ``id_queue`` and ``id_exchange`` map an id to its binding and to the queue
    or exchange it leads to (-1: none); ``id_hits``, zeros at least as long as the tables, is
    left zeroed. Returns (queues, where each group's start, exchanges, where each group's
    start).

    A group is expanded once, however many messages share it: a log repeats its keys, and at
    100k seed bindings a key matches about 615 bindings of 100 queues. The id's queue and hit
    counter are read by the id itself, not through its binding: two loads that do not wait on
    each other (1.5-2 times faster on those 615 ids a key); the hits are carried over to the
    bindings once at the end (the caller keeps ``id_hits`` from batch to batch: a fresh array
    cost as much again, its pages first touched in the loop). `write_pairs` then copies each
    message's queues (exchanges).
    """
    groups = offsets.shape[0] - 1
    uses = np.zeros(groups, dtype=np.int64)
    for i in range(key_of.shape[0]):
        uses[key_of[i]] += 1
    size = 0
    for g in range(groups):
        if uses[g]:
            size += offsets[g + 1] - offsets[g]
    group_queues = np.empty(size, dtype=np.int32)
    group_exchanges = np.empty(size, dtype=np.int32)
    queue_starts = np.zeros(groups + 1, dtype=np.int64)
    exchange_starts = np.zeros(groups + 1, dtype=np.int64)
    queue_stamp = np.full(queue_count, -1, dtype=np.int64)  # the last group that listed it
    exchange_stamp = np.full(exchange_count, -1, dtype=np.int64)
    queued = passed = 0
    for g in range(groups):
        queue_starts[g] = queued
        exchange_starts[g] = passed
        messages = uses[g]
        if messages == 0:
            continue
        for j in range(offsets[g], offsets[g + 1]):
            i = ids[j]
            id_hits[i] += messages
            q = id_queue[i]
            if q >= 0:
                if queue_stamp[q] != g:
                    queue_stamp[q] = g
                    group_queues[queued] = q
                    queued += 1
            else:
                x = id_exchange[i]
                if exchange_stamp[x] != g:
                    exchange_stamp[x] = g
                    group_exchanges[passed] = x
                    passed += 1
    queue_starts[groups] = queued
    exchange_starts[groups] = passed
    # The counts go over to the bindings: by a pass over every id when the matches are many,
    # else over the matches again (a large table and a small batch).
    if 4 * size >= id_binding.shape[0]:
        for i in range(id_binding.shape[0]):
            if id_hits[i]:
                hits[id_binding[i]] += id_hits[i]
                id_hits[i] = 0
    else:
        for g in range(groups):
            if uses[g]:
                for j in range(offsets[g], offsets[g + 1]):
                    i = ids[j]
                    if id_hits[i]:
                        hits[id_binding[i]] += id_hits[i]
                        id_hits[i] = 0
    return group_queues, queue_starts, group_exchanges, exchange_starts


@njit(cache=True, nogil=True)
def write_pairs(here, key_of, group_ids, starts, rows, into):
    """(message ``here[i]``, each of its group's ids) pairs into ``rows`` and ``into``, which
    the caller sized and NumPy allocated (it asks the kernel for huge pages: a broadcast's
    30M pairs were written 4 times slower into arrays numba allocated)."""
    at = 0
    for i in range(here.shape[0]):
        g = key_of[i]
        at = _append(here[i], group_ids, starts[g], starts[g + 1], rows, into, at)


# The router's table of answer sets by identity (`xroute.core.batch.AnswersById`): open
# addressing over the sets' addresses, each slot a row of two int64, (address, number), so
# that a look-up reads one cache line (0: an empty slot; no object lives at address 0).


@njit(cache=True, inline="always")
def _address_slot(address, mask):
    # Objects are 16-byte aligned: the low bits carry nothing.
    return np.int64((np.uint64(address >> 4) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) \
        & mask


@njit(cache=True, nogil=True)
def find_addresses(slots, addresses, out, missing):
    """``out[i]``: the number kept for ``addresses[i]``, or ``missing``."""
    mask = slots.shape[0] - 1
    for i in range(addresses.shape[0]):
        address = addresses[i]
        slot = _address_slot(address, mask)
        while True:
            kept = slots[slot, 0]
            if kept == address:
                out[i] = slots[slot, 1]
                break
            if kept == 0:
                out[i] = missing
                break
            slot = (slot + 1) & mask


@njit(cache=True, nogil=True)
def add_addresses(slots, addresses, numbers):
    """Keep ``numbers[i]`` for ``addresses[i]`` (the table has room: at most half full
    after); the count of addresses new to it."""
    mask = slots.shape[0] - 1
    added = 0
    for i in range(addresses.shape[0]):
        address = addresses[i]
        slot = _address_slot(address, mask)
        while slots[slot, 0] != 0 and slots[slot, 0] != address:
            slot = (slot + 1) & mask
        if slots[slot, 0] == 0:
            added += 1
        slots[slot, 0] = address
        slots[slot, 1] = numbers[i]
    return added
