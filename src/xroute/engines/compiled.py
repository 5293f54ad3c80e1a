"""A batch kernel for large arrays of keys: the trie flattened into NumPy arrays, walked by numba.

The trie (`xroute.engines.trie`) is flattened on the first batch after a binding change:
nodes become numbers, literal edges one open-addressing table keyed by (node, word id), ``*``
and ``#`` edges and destinations plain arrays, and the words that label edges a hash table
of their UTF-8 bytes. Keys go to the kernel as Arrow's string buffers (bytes and offsets) and
are split and interned there, in the same pass as the walk: Arrow compute (``split_pattern`` +
``index_in``) did the interning first, at about 0.5 µs a key, more than the whole warm walk.
The walk (`xroute.engines._kernel`) keeps a lazy DFA between batches and is compiled once and
cached on disk. The result is flat, ``(offsets, ids)``, so a batch of a million keys never
builds a million Python sets; `TopicMatcher.match_many_ids` hands it on as is.

Single keys are matched by the inherited Python trie walk: calling the kernel costs more than
walking one key.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

from xroute.engines import numba_cache
from xroute.engines.base import EMPTY, Words, register
from xroute.engines.trie import Node, TrieEngine


def _kernel() -> Any:
    # One cache folder for the driver and Spark workers alike (see numba_cache).
    numba_cache.prepare()
    from xroute.engines import _kernel

    return _kernel


# Limits of the DFA the kernel keeps between batches, each scaled down for small tries (a
# table is cleared on every reset, so its size is paid again then). At the full sizes the DFA
# takes at most about 60 MB; when any table fills up, the key at hand finishes with the plain
# walk and the DFA is dropped before the next key.
COMPILED_MAX_STATES = 1 << 16  # int32 state ids, 20 bytes of bookkeeping each
COMPILED_MAX_NODE_CELLS = 1 << 22  # live-node lists of all states: 16 MB of int32
COMPILED_MAX_DESTINATION_CELLS = 1 << 23  # destination lists of states keys ended in: 32 MB
COMPILED_MAX_TRANSITIONS = 1 << 18  # a table of twice as many slots, 12 bytes each: 6 MB
# The DFA's two hash tables (node lists, transitions) start at 1 / 2**this of their size and
# grow fourfold each time the DFA is dropped for want of room: probed and written at random,
# a table of several MB costs a cache miss on nearly every new state and transition (seed
# mix at 10k bindings: 6 MB of transitions for 4,400 used; new-key batches +10% at 1/16).
DFA_FIRST_SHRINK = 4
# `auto`'s literal keys go into an exact-key table when there are more of them than this many
# times the (wildcard) trie's nodes, else into the trie as paths: see `FlatTrie`.
LITERAL_TABLE_OVER = 1


def _power_of_two(value: int) -> int:
    return 1 << max(4, int(value - 1).bit_length())


class FlatTrie:
    """A snapshot of a trie as arrays, plus the DFA that `xroute.engines._kernel` keeps over it."""

    def __init__(
        self,
        root: Node,
        start: set[Node],
        numbering: Mapping[Hashable, int] | None = None,
        literals: tuple[list[str], list[Collection[Hashable]]] = ([], []),
    ) -> None:
        kernel = _kernel()
        order, index, edges, stars, hashes = _numbered(root)
        # Literal bindings kept outside the trie (`auto`'s exact-key index): when they
        # outnumber the trie's nodes (devices, users, subjects beside a few wildcards), an
        # exact-key table, one probe a key (`_literal_table`); when they are a minority among
        # wildcard paths (the seed mix), keys mostly match both, and a key's union would be
        # built per key, so they become paths of extra nodes as before, numbered after the
        # trie's, whose DFA states keep each union once.
        keys, found = literals
        if len(keys) > LITERAL_TABLE_OVER * len(order):
            extra = _LiteralPaths(order, index, edges, ())
        else:
            extra = _LiteralPaths(order, index, edges, zip(keys, found))
            literals = ([], [])
        self.nodes = count = len(order) + extra.nodes
        self.vocabulary: list[str] = sorted({word for _, word, _ in edges})
        word_id = {word: i for i, word in enumerate(self.vocabulary)}
        parents = [parent for parent, _, _ in edges]
        words = [word_id[word] for _, word, _ in edges]
        children = [child for _, _, child in edges]
        vocabulary_size = max(len(self.vocabulary), 1)
        encoded = [word.encode("utf-8") for word in self.vocabulary]
        word_offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(word) for word in encoded], out=word_offsets[1:])
        word_data = np.frombuffer(b"".join(encoded) or b"\0", dtype=np.uint8)
        word_bits = max(4, int(2 * max(len(encoded), 1) - 1).bit_length())
        self.words = (
            word_data,
            word_offsets,
            *kernel.build_word_table(word_data, word_offsets, word_bits),
            word_bits,
        )
        # Keep the edge table at most half full so that probes stay short.
        edge_bits = max(4, int(2 * max(len(parents), 1) - 1).bit_length())
        edge_keys, edge_values = kernel.build_edge_table(
            np.array(parents, dtype=np.int64),
            np.array(words, dtype=np.int64),
            np.array(children, dtype=np.int32),
            vocabulary_size,
            edge_bits,
        )
        padding = [-1] * extra.nodes
        has_literal = np.zeros(count, dtype=np.bool_)
        has_literal[parents] = True
        self.trie = (
            edge_keys,
            edge_values,
            edge_bits,
            vocabulary_size,
            np.array(stars + padding, dtype=np.int32),
            np.array(hashes + padding, dtype=np.int32),
            np.array([n.is_hash for n in order] + [False] * extra.nodes, dtype=np.bool_),
            has_literal,
        )
        self.start = np.array(sorted(index[n] for n in start), dtype=np.int32)
        # Destination ids are the matcher's (`numbering`) when given, so that a batch needs
        # no translation; else numbered here. `destinations[id]` is the destination of an id.
        held = [node.destinations for node in order] + [()] * extra.nodes
        for node, destinations in extra.destinations.items():
            held[node] = (*held[node], *destinations)
        if numbering is None:
            numbering = {}
            for destinations in (*held, *literals[1]):
                for destination in destinations:
                    numbering.setdefault(destination, len(numbering))
        self.destinations: list[Hashable] = [None] * (max(numbering.values(), default=-1) + 1)
        starts = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, held), dtype=np.int64, count=count), out=starts[1:])
        every = list(chain.from_iterable(held))
        ids = [numbering[destination] for destination in every]
        for number, destination in zip(ids, every):
            self.destinations[number] = destination
        self.destination_arrays = (starts, np.array(ids, dtype=np.int32))
        self.literal_keys, self.literal_ids = self._literal_table(literals, numbering, kernel)
        self._destination_ids = len(ids)
        self._dfa_shrink = DFA_FIRST_SHRINK
        self._dfa = self._empty_dfa(count, len(ids), self._dfa_shrink)
        self.meta = np.zeros(kernel.META_SIZE, dtype=np.int64)
        self.meta[kernel.START] = -1
        self._mark = np.zeros(count, dtype=np.int64)
        self._seen = np.zeros(max(len(self.destinations), 1), dtype=np.int64)
        self._kernel = kernel

    def _literal_table(
        self,
        literals: tuple[list[str], list[Collection[Hashable]]],
        numbering: Mapping[Hashable, int],
        kernel: Any,
    ) -> tuple[tuple, tuple]:
        """The exact-key table of the literal bindings kept outside the trie (`auto`'s index).
        Laid into the trie as paths of extra nodes instead, they cost a node and an edge per
        word of each key (1.4 s to flatten 100k bindings), and three probes a key to walk."""
        keys, found = literals
        by_id = self.destinations
        for number, destination in zip((numbering[d] for each in found for d in each),
                                       chain.from_iterable(found)):
            by_id[number] = destination
        return exact_key_table(keys, found, numbering, kernel)

    @staticmethod
    def _empty_dfa(nodes: int, destination_ids: int, shrink: int = 0) -> tuple:
        # Destination cells: room for every node's list a few times over, so that a state
        # of 10k queues (a large fan-out on a tiny trie) fits instead of resetting per key.
        # The hash tables are 1 / 2**shrink of their full size (see `DFA_FIRST_SHRINK`).
        states = min(COMPILED_MAX_STATES, _power_of_two(8 * nodes))
        transitions = min(COMPILED_MAX_TRANSITIONS, _power_of_two(32 * nodes))
        states = min(states, max(4096, states >> shrink))
        transitions = min(transitions, max(16384, transitions >> shrink))
        set_bits = int(2 * states - 1).bit_length()
        transition_bits = int(2 * transitions - 1).bit_length()
        return (
            np.zeros(states + 1, dtype=np.int64),  # where each state's node list starts
            np.empty(min(COMPILED_MAX_NODE_CELLS, 64 * nodes + 1024), dtype=np.int32),
            np.zeros(states, dtype=np.int64),  # where each state's destinations start
            np.zeros(states, dtype=np.int32),  # how many (-1: not gathered yet)
            np.empty(
                min(COMPILED_MAX_DESTINATION_CELLS, 64 * nodes + 4 * destination_ids + 4096),
                dtype=np.int32,
            ),
            np.full(1 << set_bits, -1, dtype=np.int64),  # node-list hash -> state
            np.full(1 << set_bits, -1, dtype=np.int32),
            set_bits,
            np.full(1 << transition_bits, -1, dtype=np.int64),  # (state, word) -> state
            np.full(1 << transition_bits, -1, dtype=np.int32),
            transition_bits,
        )

    def route(self, keys: Any) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, destination ids) for valid keys (list of str or Arrow strings)."""
        data, key_offsets = _utf8_buffers(keys)
        kernel = self._kernel
        resets = self.meta[kernel.RESETS]
        offsets, head, written, final, side, side_start = kernel.route_batch(
            data,
            key_offsets,
            self.words,
            self.start,
            self.trie,
            self.destination_arrays,
            self._dfa,
            self.meta,
            self._mark,
            self._seen,
            self.literal_keys,
            self.literal_ids,
        )
        out = np.empty(offsets[-1], dtype=np.int32)
        out[: offsets[written]] = head[: offsets[written]]
        kernel.write_routes(written, len(offsets) - 1, final, side, side_start, offsets,
                            self._dfa, out, self.literal_ids)
        if self._dfa_shrink and self.meta[kernel.RESETS] > resets:
            self._grow_dfa()
        return offsets, out

    def _grow_dfa(self) -> None:
        """The DFA was dropped for want of room: start it again with hash tables four times
        larger, up to their full size (see `DFA_FIRST_SHRINK`)."""
        k, meta = self._kernel, self.meta
        self._dfa_shrink = max(0, self._dfa_shrink - 2)
        self._dfa = self._empty_dfa(self.nodes, self._destination_ids, self._dfa_shrink)
        meta[[k.STATES, k.NODE_CELLS, k.DESTINATION_CELLS, k.TRANSITIONS, k.RESET_PENDING]] = 0
        meta[k.START] = -1

    def dfa_stats(self) -> dict[str, int]:
        """The kernel DFA's size and history."""
        k, meta = self._kernel, self.meta
        return {
            "kernel_states": int(meta[k.STATES]),
            "kernel_transitions": int(meta[k.TRANSITIONS]),
            "kernel_node_cells": int(meta[k.NODE_CELLS]),
            "kernel_destination_cells": int(meta[k.DESTINATION_CELLS]),
            "kernel_states_built": int(meta[k.BUILT]),
            "kernel_resets": int(meta[k.RESETS]),
            "kernel_plain_walks": int(meta[k.FALLBACKS]),
            "kernel_small_walks": int(meta[k.SMALL_WALKS]),
        }


def _numbered(root: Node) -> tuple[list[Node], dict[Node, int], list[tuple[int, str, int]],
                                  list[int], list[int]]:
    """The trie's nodes in breadth-first order, each node's number, the literal edges as
    (parent, word, child) numbers, and each node's ``*`` and ``#`` child numbers (-1: none).
    One pass: the trie is a tree, so a child is numbered when its parent is reached."""
    order: list[Node] = [root]
    edges: list[tuple[int, str, int]] = []
    stars: list[int] = []
    hashes: list[int] = []
    append_edge, append_node = edges.append, order.append
    append_star, append_hash = stars.append, hashes.append
    # hot: 0.3 s of a 100k-binding flattening; a node's literal children read inline.
    for parent, node in enumerate(order):  # `order` grows as we go
        kids = node.children
        if kids.__class__ is tuple:
            append_edge((parent, kids[0], len(order)))
            append_node(kids[1])
        elif kids:
            for word, child in kids.items():
                append_edge((parent, word, len(order)))
                append_node(child)
        star, hash_ = node.star, node.hash
        if star is None:
            append_star(-1)
        else:
            append_star(len(order))
            append_node(star)
        if hash_ is None:
            append_hash(-1)
        else:
            append_hash(len(order))
            append_node(hash_)
    index = {node: number for number, node in enumerate(order)}
    return order, index, edges, stars, hashes


class _LiteralPaths:
    """Literal keys laid onto a numbered trie: each key's words followed from the root along
    the trie's literal edges, then along new nodes (``edges`` grows). ``destinations``: node
    number -> the literal destinations that end there."""

    def __init__(
        self,
        order: list[Node],
        index: dict[Node, int],
        edges: list[tuple[int, str, int]],
        literals: Iterable[tuple[str, Iterable[Hashable]]],
    ) -> None:
        self.nodes = 0
        self.destinations: dict[int, list[Hashable]] = {}
        first_new = len(order)
        added: dict[tuple[int, str], int] = {}
        for key, destinations in literals:
            node = 0
            for word in key.split(".") if key else ():
                if node < first_new:
                    child = order[node].literal(word)
                    if child is not None:
                        node = index[child]
                        continue
                following = added.get((node, word))
                if following is None:
                    following = added[(node, word)] = first_new + self.nodes
                    self.nodes += 1
                    edges.append((node, word, following))
                node = following
            self.destinations.setdefault(node, []).extend(destinations)


def exact_key_table(
    keys: list[str], found: list[Collection[Hashable]], numbering: Mapping[Hashable, int],
    kernel: Any,
) -> tuple[tuple, tuple]:
    """A hash table of whole keys, laid out as the kernel's word table (`_kernel._word_id`
    finds key ``i`` as id ``i``), and each key's destination ids as (starts, ids)."""
    import pyarrow as pa

    data, offsets = _utf8_buffers(pa.array(keys, type=pa.large_string()))
    data = np.ascontiguousarray(data) if len(data) else np.zeros(1, dtype=np.uint8)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    bits = max(4, int(2 * max(len(keys), 1) - 1).bit_length())
    table = (data, offsets, *kernel.build_word_table(data, offsets, bits), bits)
    starts = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, found), dtype=np.int64, count=len(found)), out=starts[1:])
    numbers = [numbering[d] for each in found for d in each]
    return table, (starts, np.array(numbers, dtype=np.int32))


def utf8_buffers(keys: Any) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes and the offsets of each key (Arrow's string layout), without copies
    for an Arrow array; a list of str goes through Arrow first."""
    import pyarrow as pa

    if isinstance(keys, list):
        keys = pa.array(keys, type=pa.string())
    offset_type = np.int64 if pa.types.is_large_string(keys.type) else np.int32
    buffers = keys.buffers()
    offsets = np.frombuffer(buffers[1], dtype=offset_type)[keys.offset : keys.offset + len(keys) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(1, np.uint8)
    return data, offsets


_utf8_buffers = utf8_buffers


class BatchKernel:
    """Mixin for a `TrieEngine` subclass: a `FlatTrie` of its trie, rebuilt after any change."""

    _flat: FlatTrie | None = None
    _numbering: Mapping[Hashable, int] | None = None
    _flattened = 0

    def add(self, words: Words, destination: Hashable) -> None:
        super().add(words, destination)  # type: ignore[misc]
        self._flat = None

    def remove(self, words: Words, destination: Hashable) -> None:
        super().remove(words, destination)  # type: ignore[misc]
        self._flat = None

    def use_destination_ids(self, numbering: Mapping[Hashable, int]) -> None:
        """Called by `TopicMatcher`: batches return its destination ids (a live mapping that
        changes only together with the bindings, so only when the flat trie is rebuilt)."""
        self._numbering = numbering
        self._flat = None

    def flat(self) -> FlatTrie:
        """The flattened trie, rebuilt if a binding changed since the last batch."""
        if self._flat is None:
            literal = getattr(self, "_literal", None)  # auto's exact-key index, if any
            self._flat = FlatTrie(
                self._root,  # type: ignore[attr-defined]
                self.start(),  # type: ignore[attr-defined]
                self._numbering,
                literal.columns() if literal is not None else ([], []),
            )
            self._flattened += 1
        return self._flat

    def match_many_ids(self, keys: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """(offsets, destination ids) for validated keys (a list of str or Arrow strings)."""
        return self.flat().route(keys)

    def kernel_match_many(self, keys: Sequence[str]) -> list[frozenset]:
        """`match_many` through the kernel: one frozenset per key from the flat result."""
        flat = self.flat()
        offsets, ids = flat.route(list(keys))
        destinations = flat.destinations
        bounds = offsets.tolist()
        ids = ids.tolist()
        return [
            frozenset([destinations[j] for j in ids[a:b]]) if b > a else EMPTY
            for a, b in zip(bounds, bounds[1:])
        ]

    def kernel_stats(self) -> dict[str, Any]:
        """How often the trie was flattened, and the size and history of the kernel's DFA."""
        flat = self._flat
        return {
            "flattened": self._flattened,
            "flat_nodes": flat.nodes if flat is not None else 0,
            **(flat.dfa_stats() if flat is not None else {}),
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

