"""A batch kernel for large arrays of keys: the trie flattened into NumPy arrays, walked by numba.

The trie (`xroute.engines.trie`) is flattened on the first batch after a binding change:
nodes become numbers, literal edges one open-addressing table keyed by (node, word id), ``*``
and ``#`` edges and destinations plain arrays. Keys are split and their words interned to ids
with Arrow compute (``split_pattern`` + ``index_in``, a few million keys/s); a word that labels
no edge gets -1. The walk itself (`xroute.engines._kernel`) is compiled once and cached on
disk. The result is flat, ``(offsets, ids)``, so a batch of a million keys never builds a
million Python sets; `TopicMatcher.match_many_ids` hands it on as is.

Single keys are matched by the inherited Python trie walk: calling the kernel costs more than
walking one key.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xroute.engines.base import EMPTY, Words, register
from xroute.engines.trie import Node, TrieEngine


def _numba_cache_dir() -> None:
    # numba writes its cache beside the source by default, which a site-packages install or a
    # Spark executor may not allow; a per-user folder always works.
    if "NUMBA_CACHE_DIR" not in os.environ:
        folder = Path.home() / ".cache" / "xroute" / "numba"
        os.environ["NUMBA_CACHE_DIR"] = str(folder)


def _kernel() -> Any:
    _numba_cache_dir()
    from xroute.engines import _kernel

    return _kernel


class FlatTrie:
    """A snapshot of a trie as arrays, ready for `xroute.engines._kernel.route_batch`."""

    def __init__(self, root: Node, start: set[Node]) -> None:
        kernel = _kernel()
        order: list[Node] = [root]
        index: dict[Node, int] = {root: 0}
        for node in order:  # breadth-first numbering; `order` grows as we go
            for child in (*node.children.values(), node.star, node.hash):
                if child is not None and child not in index:
                    index[child] = len(order)
                    order.append(child)
        count = len(order)
        self.vocabulary: list[str] = sorted({w for node in order for w in node.children})
        word_id = {word: i for i, word in enumerate(self.vocabulary)}
        self.word_id = word_id
        parents, words, children = [], [], []
        for i, node in enumerate(order):
            for word, child in node.children.items():
                parents.append(i)
                words.append(word_id[word])
                children.append(index[child])
        self.star = np.array([index[n.star] if n.star else -1 for n in order], dtype=np.int32)
        self.hash = np.array([index[n.hash] if n.hash else -1 for n in order], dtype=np.int32)
        self.is_hash = np.array([n.is_hash for n in order], dtype=np.bool_)
        self.start = np.array(sorted(index[n] for n in start), dtype=np.int32)
        # Keep the table at most half full so that probes stay short.
        self.bits = max(4, int(2 * max(len(parents), 1) - 1).bit_length())
        self.table_keys, self.table_values = kernel.build_edge_table(
            np.array(parents, dtype=np.int64),
            np.array(words, dtype=np.int64),
            np.array(children, dtype=np.int32),
            max(len(self.vocabulary), 1),
            self.bits,
        )
        self.destinations: list[Hashable] = []
        local: dict[Hashable, int] = {}
        starts = np.zeros(count + 1, dtype=np.int64)
        ids: list[int] = []
        for i, node in enumerate(order):
            for destination in node.destinations:
                number = local.get(destination)
                if number is None:
                    number = local[destination] = len(self.destinations)
                    self.destinations.append(destination)
                ids.append(number)
            starts[i + 1] = len(ids)
        self.destination_start = starts
        self.destination_ids = np.array(ids, dtype=np.int32)
        self.nodes = count
        self._vocabulary_arrow: Any = None
        self._route = kernel.route_batch

    def route(self, keys: Any) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, local destination ids) for valid keys (list of str or Arrow strings)."""
        word_ids, key_start, key_length = self.intern(keys)
        return self._route(
            word_ids,
            key_start,
            key_length,
            self.start,
            self.table_keys,
            self.table_values,
            self.bits,
            max(len(self.vocabulary), 1),
            self.star,
            self.hash,
            self.is_hash,
            self.destination_start,
            self.destination_ids,
            len(self.destinations),
        )

    def intern(self, keys: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Word ids of all keys, flat, with each key's start and length in words."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if isinstance(keys, list):
            keys = pa.array(keys, type=pa.string())
        elif pa.types.is_large_string(keys.type):
            keys = keys.cast(pa.string()) if keys.nbytes < 2**31 else keys
        if self._vocabulary_arrow is None:
            self._vocabulary_arrow = pa.array(self.vocabulary, type=pa.string())
        vocabulary = self._vocabulary_arrow
        if vocabulary.type != keys.type:
            vocabulary = vocabulary.cast(keys.type)
        parts = pc.split_pattern(keys, pattern=".")
        bounds = parts.offsets.to_numpy()
        key_start = bounds[:-1].astype(np.int64)
        key_length = np.diff(bounds).astype(np.int64)
        # split_pattern gives "" one (empty) word; a routing key "" has none.
        key_length[pc.equal(pc.binary_length(keys), 0).to_numpy(zero_copy_only=False)] = 0
        found = pc.index_in(parts.values, value_set=vocabulary)
        word_ids = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
        return word_ids, key_start, key_length


class BatchKernel:
    """Mixin for a `TrieEngine` subclass: a `FlatTrie` of its trie, rebuilt after any change."""

    _flat: FlatTrie | None = None

    def add(self, words: Words, destination: Hashable) -> None:
        super().add(words, destination)  # type: ignore[misc]
        self._flat = None

    def remove(self, words: Words, destination: Hashable) -> None:
        super().remove(words, destination)  # type: ignore[misc]
        self._flat = None

    def flat(self) -> FlatTrie:
        """The flattened trie, rebuilt if a binding changed since the last batch."""
        if self._flat is None:
            self._flat = FlatTrie(self._root, self.start())  # type: ignore[attr-defined]
            self._flattened = getattr(self, "_flattened", 0) + 1
        return self._flat

    def match_many_local(self, keys: Any) -> tuple[np.ndarray, np.ndarray, list[Hashable]] | None:
        """(offsets, ids, destination of each id) for validated keys, through the kernel."""
        flat = self.flat()
        offsets, ids = flat.route(keys)
        return offsets, ids, flat.destinations

    def kernel_match_many(self, keys: Sequence[str]) -> list[frozenset]:
        """`match_many` through the kernel: one frozenset per key from the flat result."""
        offsets, ids, destinations = self.match_many_local(list(keys))  # type: ignore[misc]
        bounds = offsets.tolist()
        ids = ids.tolist()
        return [
            frozenset([destinations[j] for j in ids[a:b]]) if b > a else EMPTY
            for a, b in zip(bounds, bounds[1:])
        ]

    def kernel_stats(self) -> dict[str, Any]:
        """How often the trie was flattened, and the size of the current snapshot."""
        return {
            "flattened": getattr(self, "_flattened", 0),
            "flat_nodes": self._flat.nodes if self._flat is not None else 0,
        }


@register
class CompiledEngine(BatchKernel, TrieEngine):
    """The trie for single keys; batches go through the numba kernel over its flat arrays."""

    name = "compiled"
    batch_native = True  # its match_many beats a route cache: see TopicMatcher.match_many

    def match_many(self, keys: Sequence[str]) -> list[frozenset]:
        return self.kernel_match_many(keys)

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "engine": self.name, **self.kernel_stats()}

