"""The numba kernels of the ``compiled`` engine: a flattened trie walked breadth-first.

Imported only when a batch is first routed, because importing numba costs about half a second.
Compiled functions are cached on disk (``cache=True``) under ``NUMBA_CACHE_DIR``, which
`xroute.engines.compiled` points at a writable folder before this module is imported.

The walk is `xroute.engines.trie.step` over arrays: all live nodes advance one word at a time
and each node is kept at most once per position (a generation stamp per node), so a key of L
words costs at most L times the number of nodes whatever the patterns, ``#.#.#...`` included.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Fibonacci hashing: a multiplier close to 2**64 / golden ratio spreads (node, word) pairs.
_HASH_MULTIPLIER = np.uint64(11400714819323198485)


@njit(cache=True, nogil=True)
def _slot(key: np.int64, shift: np.uint64) -> np.int64:
    return np.int64((np.uint64(key) * _HASH_MULTIPLIER) >> shift)


@njit(cache=True, nogil=True)
def build_edge_table(parents, words, children, vocabulary_size, bits):
    """Open-addressing table (node * vocabulary_size + word) -> child, 2**bits slots."""
    size = 1 << bits
    shift = np.uint64(64 - bits)
    keys = np.full(size, -1, dtype=np.int64)
    values = np.full(size, -1, dtype=np.int32)
    mask = size - 1
    for i in range(parents.shape[0]):
        key = np.int64(parents[i]) * vocabulary_size + words[i]
        slot = _slot(key, shift)
        while keys[slot] != -1:
            slot = (slot + 1) & mask
        keys[slot] = key
        values[slot] = children[i]
    return keys, values


@njit(cache=True, nogil=True)
def _chain(node, hash_child, mark, stamp, live, count):
    # A '#' may match zero words: entering a node enters its '#' child too, and so on.
    while node >= 0 and mark[node] != stamp:
        mark[node] = stamp
        live[count] = node
        count += 1
        node = hash_child[node]
    return count


@njit(cache=True, nogil=True)
def route_batch(
    word_ids,
    key_start,
    key_length,
    start_nodes,
    table_keys,
    table_values,
    bits,
    vocabulary_size,
    star_child,
    hash_child,
    is_hash,
    destination_start,
    destination_ids,
    destination_count,
):
    """Destinations of each key as (offsets int64[n + 1], ids int32), no repeats per key.

    Key ``i`` is ``word_ids[key_start[i] : key_start[i] + key_length[i]]``; a word id of -1
    labels no trie edge.
    """
    keys = key_start.shape[0]
    nodes = star_child.shape[0]
    shift = np.uint64(64 - bits)
    mask = (1 << bits) - 1
    mark = np.zeros(nodes, dtype=np.int64)
    seen = np.zeros(max(destination_count, 1), dtype=np.int64)
    current = np.empty(nodes, dtype=np.int32)
    following = np.empty(nodes, dtype=np.int32)
    offsets = np.zeros(keys + 1, dtype=np.int64)
    out = np.empty(max(16, keys * 2), dtype=np.int32)
    found = 0
    stamp = 0
    for k in range(keys):
        live = start_nodes.shape[0]
        current[:live] = start_nodes
        first = key_start[k]
        for position in range(first, first + key_length[k]):
            word = word_ids[position]
            stamp += 1
            count = 0
            for i in range(live):
                node = current[i]
                if word >= 0:
                    key = np.int64(node) * vocabulary_size + word
                    slot = _slot(key, shift)
                    while table_keys[slot] != -1:
                        if table_keys[slot] == key:
                            count = _chain(
                                table_values[slot], hash_child, mark, stamp, following, count
                            )
                            break
                        slot = (slot + 1) & mask
                count = _chain(star_child[node], hash_child, mark, stamp, following, count)
                if is_hash[node]:
                    count = _chain(node, hash_child, mark, stamp, following, count)
            current, following = following, current
            live = count
            if live == 0:
                break
        for i in range(live):
            node = current[i]
            for j in range(destination_start[node], destination_start[node + 1]):
                destination = destination_ids[j]
                if seen[destination] != k + 1:
                    seen[destination] = k + 1
                    if found == out.shape[0]:
                        grown = np.empty(out.shape[0] * 2, dtype=np.int32)
                        grown[:found] = out
                        out = grown
                    out[found] = destination
                    found += 1
        offsets[k + 1] = found
    return offsets, out[:found]
