"""The numba kernels of the ``compiled`` engine: a flattened trie, and a lazy DFA over it.

Imported only when a batch is first routed, because importing numba costs about half a second.
Compiled functions are cached on disk (``cache=True``) under ``NUMBA_CACHE_DIR``, which
`xroute.engines.compiled` points at a writable folder before this module is imported.

Keys arrive as Arrow string buffers (UTF-8 bytes plus offsets) and are split and interned here,
one pass over the bytes: a word is looked up by hash in the table of words that label trie
edges, and any other word gets id -1.

The walk is `xroute.engines.trie.step` over arrays: all live nodes advance one word at a time
and each node is kept at most once per position (a generation stamp per node), so one step
costs at most the number of trie nodes, whatever the patterns, ``#.#.#...`` included. On top of
it sits the same lazy DFA as `xroute.engines.dfa`, in fixed-size arrays: a state is a list
of live nodes, interned by an order-free hash (`_intern`); a transition is a table entry
(state, word id) -> state, word id -1 standing for every word that labels no edge; a state's
destinations are gathered the first time a key ends in it. A warm key of L words costs L
table probes and one copy.

The result is written in two passes: the first finds each key's final state (so each key's
count, so the offsets), the second copies destination lists into an array of exactly the
right size, which NumPy allocates (see `write_shapes`). When a DFA table fills up, the key at
hand finishes with the plain walk, the keys so far are written out, and the DFA is dropped
before the next key (bounded memory).

The kernels keep the GIL (no ``nogil``): calls on one matcher update the same DFA tables, so
two threads must never run them at once.
"""

from __future__ import annotations

import numpy as np

from xroute.engines import numba_cache

# Before numba files these kernels: one cache folder for every process, zip or not.
numba_cache.prepare()

from llvmlite import ir  # noqa: E402
from numba import njit, types  # noqa: E402  (after the cache locator is in place)
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

# Fibonacci hashing: a multiplier close to 2**64 / golden ratio spreads the keys.
_HASH_MULTIPLIER = np.uint64(11400714819323198485)
_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)
_EMPTY = -1
_DOT = 46  # b"."

# Slots of the `meta` int64 array that carries the DFA's counters between calls.
STATES, NODE_CELLS, DESTINATION_CELLS, TRANSITIONS, START, STAMP, RESET_PENDING = range(7)
RESETS, BUILT, FALLBACKS, SEEN, SMALL_WALKS = 7, 8, 9, 10, 11
META_SIZE = 12

# A missing transition between two sets of at most this many live nodes is not built: the
# key goes on with the plain walk, which costs about what a transition probe costs on so few
# nodes. Literal bindings (a device, a user each) and filters such as EMQX's
# ``device.{s}.*.{n}.#`` have tiny live sets but one per key, so a DFA over them would build
# a state per key (and fill up and reset on a stream of new keys) to save nothing.
SMALL_SET = 4
# A key that ends on such a small set keeps its destinations in a DFA state anyway when there
# are more than this many (a broadcast to thousands of queues: one copy, not a gather).
GATHER_KEEP = 64
_PLAIN = -2  # from _build_transition: go on with the plain walk
# A key's final "state" at or below this: its answer is the list of literal key
# ``_LITERAL - final`` of the exact-key table, as is (see `_with_literal`).
_LITERAL = -2


@njit(cache=True, inline="always")
def _slot(key, shift):
    return np.int64((np.uint64(key) * _HASH_MULTIPLIER) >> shift)


@intrinsic
def load_u64(typingctx, data, at):
    """The 8 bytes of uint8 array ``data`` from index ``at`` as one little-endian uint64: one
    unaligned load (x86 and ARM64 allow it), where assembling them byte by byte cost a
    shift and an or each. No bounds check: the caller keeps ``at + 8`` within the array."""
    if not (isinstance(data, types.Array) and data.dtype == types.uint8 and data.ndim == 1
            and data.layout == "C"):
        return None  # only a contiguous byte array: its bytes are consecutive in memory

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        at_byte = builder.gep(array.data, [args[1]])
        return builder.load(builder.bitcast(at_byte, ir.IntType(64).as_pointer()), align=1)

    return types.uint64(data, at), codegen


@intrinsic
def prefetch(typingctx, array, at):
    """Ask the CPU to bring ``array[at]``'s cache line in (``llvm.prefetch``, a hint: no
    fault, no effect on results). A loop that looks up many keys in a large table hashes
    them all first, prefetching each one's slot, so that the misses overlap instead of
    stalling one probe after another."""
    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0])
        address = builder.bitcast(builder.gep(data.data, [args[1]]), ir.IntType(8).as_pointer())
        int32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [address.type, int32, int32, int32]),
            "llvm.prefetch.p0i8")
        # read, high locality, data cache
        builder.call(function, [address, ir.Constant(int32, 0), ir.Constant(int32, 3),
                                ir.Constant(int32, 1)])
        return context.get_dummy_value()

    return types.none(array, at), codegen


@njit(cache=True, inline="always")
def _hash_bytes(data, begin, stop):
    # Eight bytes at a time, one multiply each: a byte-wise FNV chain made hashing a whole
    # 5-word key (auto's exact-key table, probed for every key) cost a third of a warm walk.
    # A key of 8 bytes or more is read in 8-byte loads, its last part (under 8 bytes) from a
    # load ending at ``stop``, shifted: the same value as assembling the bytes one by one,
    # which shorter keys (most words) still do, in half the time on 27-byte keys.
    value = _FNV_OFFSET ^ np.uint64(stop - begin)
    i = begin
    if stop - begin >= 8:
        while i + 8 <= stop:
            value = (value ^ load_u64(data, i)) * _HASH_MULTIPLIER
            value ^= value >> np.uint64(29)
            i += 8
        if i < stop:
            tail = load_u64(data, stop - 8) >> np.uint64(8 * (8 - (stop - i)))
            value = (value ^ tail) * _HASH_MULTIPLIER
            value ^= value >> np.uint64(29)
        return np.int64(value >> np.uint64(1))
    while i < stop:
        chunk = np.uint64(0)
        shift = np.uint64(0)
        for j in range(i, min(i + 8, stop)):
            chunk |= np.uint64(data[j]) << shift
            shift += np.uint64(8)
        value = (value ^ chunk) * _HASH_MULTIPLIER
        value ^= value >> np.uint64(29)
        i += 8
    return np.int64(value >> np.uint64(1))  # non-negative, so -1 can mark an empty slot


@njit(cache=True, inline="always")
def _same_bytes(left, left_at, right, right_at, size):
    """Whether ``left[left_at:left_at + size]`` equals ``right[right_at:right_at + size]``:
    8 bytes a compare where there are 8 (the last 8 overlapping the ones before)."""
    if size >= 8:
        i = 0
        while i + 8 <= size:
            if load_u64(left, left_at + i) != load_u64(right, right_at + i):
                return False
            i += 8
        return load_u64(left, left_at + size - 8) == load_u64(right, right_at + size - 8)
    for i in range(size):
        if left[left_at + i] != right[right_at + i]:
            return False
    return True


@njit(cache=True)
def build_edge_table(parents, words, children, vocabulary_size, bits):
    """Open-addressing table (node * vocabulary_size + word) -> child, 2**bits slots."""
    size = 1 << bits
    shift = np.uint64(64 - bits)
    keys = np.full(size, _EMPTY, dtype=np.int64)
    values = np.full(size, _EMPTY, dtype=np.int32)
    mask = size - 1
    for i in range(parents.shape[0]):
        key = np.int64(parents[i]) * vocabulary_size + words[i]
        slot = _slot(key, shift)
        while keys[slot] != _EMPTY:
            slot = (slot + 1) & mask
        keys[slot] = key
        values[slot] = children[i]
    return keys, values


@njit(cache=True)
def build_word_table(word_data, word_offsets, bits):
    """Open-addressing table hash(word bytes) -> word id, 2**bits slots."""
    size = 1 << bits
    shift = np.uint64(64 - bits)
    keys = np.full(size, _EMPTY, dtype=np.int64)
    values = np.full(size, _EMPTY, dtype=np.int32)
    mask = size - 1
    for word in range(word_offsets.shape[0] - 1):
        hashed = _hash_bytes(word_data, word_offsets[word], word_offsets[word + 1])
        slot = _slot(hashed, shift)
        while keys[slot] != _EMPTY:
            slot = (slot + 1) & mask
        keys[slot] = hashed
        values[slot] = word
    return keys, values


@njit(cache=True, inline="always")
def find_slot(data, begin, stop, hashed, word_data, word_offsets, table_keys, table_values,
              bits):
    """The slot of the bytes ``data[begin:stop]`` (hash ``hashed``) in an open-addressing
    table of 2**``bits`` slots laid out as `build_word_table`'s (``table_keys``: each slot's
    hash or -1, ``table_values``: its entry, whose bytes are
    ``word_data[word_offsets[entry]:word_offsets[entry + 1]]``), or of the empty slot where
    they would go (``table_keys[slot] == -1``). Exact whatever the hash: the bytes are
    compared on a hash hit. The one probe loop of the word tables, the exact-key tables and
    the key memo (`xroute.engines._memo_kernel`)."""
    mask = (1 << bits) - 1
    slot = _slot(hashed, np.uint64(64 - bits))
    size = stop - begin
    while table_keys[slot] != _EMPTY:
        if table_keys[slot] == hashed:
            first = word_offsets[table_values[slot]]
            if word_offsets[table_values[slot] + 1] - first == size and _same_bytes(
                    word_data, first, data, begin, size):
                return slot
        slot = (slot + 1) & mask
    return slot


@njit(cache=True, inline="always")
def _word_id(data, begin, stop, vocabulary):
    """The id of the word ``data[begin:stop]``, or -1 if no trie edge carries it."""
    word_data, word_offsets, table_keys, table_values, bits = vocabulary
    slot = find_slot(data, begin, stop, _hash_bytes(data, begin, stop), word_data,
                     word_offsets, table_keys, table_values, bits)
    if table_keys[slot] == _EMPTY:
        return _EMPTY
    return table_values[slot]


@njit(cache=True, inline="always")
def _lookup(table_keys, table_values, key, bits):
    shift = np.uint64(64 - bits)
    mask = (1 << bits) - 1
    slot = _slot(key, shift)
    while table_keys[slot] != _EMPTY:
        if table_keys[slot] == key:
            return table_values[slot]
        slot = (slot + 1) & mask
    return _EMPTY


@njit(cache=True, inline="always")
def _copy(source, begin, out, at, count):
    """``out[at:at + count] = source[begin:begin + count]``, as a loop over two views, which
    LLVM vectorizes: numba's slice assignment copied a broadcast's 10k ids per key 3.5 times
    slower, and a loop over offset indexes 4 times."""
    source = source[begin : begin + count]
    into = out[at : at + count]
    for i in range(count):
        into[i] = source[i]


@njit(cache=True, inline="always")
def _chain(node, hash_child, mark, stamp, live, count):
    # A '#' may match zero words: entering a node enters its '#' child too, and so on.
    while node >= 0 and mark[node] != stamp:
        mark[node] = stamp
        live[count] = node
        count += 1
        node = hash_child[node]
    return count


@njit(cache=True, inline="always")
def _step(live, count, word, into, trie, mark, stamp):
    """`trie.step`: the nodes after one more word into ``into``, each once; returns how many."""
    edge_keys, edge_values, edge_bits, vocabulary_size, star_child, hash_child, is_hash = trie[:7]
    has_literal = trie[7]
    found = 0
    for i in range(count):
        node = live[i]
        # A node without literal children (a '#' tail) skips the probe of the edge table, a
        # cache miss on a large trie for each word of a long key.
        if word >= 0 and has_literal[node]:
            child = _lookup(
                edge_keys, edge_values, np.int64(node) * vocabulary_size + word, edge_bits
            )
            if child >= 0:
                found = _chain(child, hash_child, mark, stamp, into, found)
        found = _chain(star_child[node], hash_child, mark, stamp, into, found)
        if is_hash[node]:
            found = _chain(node, hash_child, mark, stamp, into, found)
    return found


@njit(cache=True, inline="always")
def _gather(live, count, destinations, seen, stamp, out, found):
    """Append the destinations of the live nodes to ``out``, each once; ``out`` may grow."""
    destination_start, destination_ids = destinations
    for i in range(count):
        node = live[i]
        for j in range(destination_start[node], destination_start[node + 1]):
            destination = destination_ids[j]
            if seen[destination] != stamp:
                seen[destination] = stamp
                if found == out.shape[0]:
                    grown = np.empty(out.shape[0] * 2, dtype=np.int32)
                    grown[:found] = out[:found]
                    out = grown
                out[found] = destination
                found += 1
    return out, found


@njit(cache=True, inline="always")
def _absorbing(live, count, trie):
    """True if every live node is a '#' node with no literal or '*' child: any further word
    leaves the set as it is (the '#' tail of ``device.{s}.*.{n}.#``)."""
    star_child, is_hash, has_literal = trie[4], trie[6], trie[7]
    for i in range(count):
        node = live[i]
        if not is_hash[node] or has_literal[node] or star_child[node] >= 0:
            return False
    return True


@njit(cache=True, inline="always")
def _destination_count(live, count, destinations):
    """How many destinations the live nodes hold, repeats counted."""
    destination_start = destinations[0]
    total = 0
    for i in range(count):
        total += destination_start[live[i] + 1] - destination_start[live[i]]
    return total


@njit(cache=True, inline="always")
def _mix(node):
    # splitmix64's finalizer: the node sets' hash is a sum of these (order does not matter),
    # and sets whose node numbers merely sum alike must not collide.
    z = np.uint64(node) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _intern(nodes, count, dfa, meta, mark):
    """The state holding exactly the distinct ``nodes[:count]``, in any order, made if new; -1
    if no room. The nodes are stamped in ``mark`` and hashed by a sum, so a set is found
    again without sorting it (a sort was a quarter of building a state of 70 nodes): a kept
    state of as many nodes is the same set if every one of its nodes bears the stamp."""
    state_start, state_nodes = dfa[0], dfa[1]
    state_destination_count = dfa[3]
    set_keys, set_values, set_bits = dfa[5], dfa[6], dfa[7]
    meta[STAMP] += 1
    stamp = meta[STAMP]
    total = np.uint64(0)
    for i in range(count):
        mark[nodes[i]] = stamp
        total += _mix(nodes[i])
    hashed = np.int64(total >> np.uint64(1))
    shift = np.uint64(64 - set_bits)
    mask = (1 << set_bits) - 1
    slot = _slot(hashed, shift)
    while set_keys[slot] != _EMPTY:
        if set_keys[slot] == hashed:
            state = set_values[slot]
            first = state_start[state]
            if state_start[state + 1] - first == count:
                same = True
                for i in range(count):
                    if mark[state_nodes[first + i]] != stamp:
                        same = False
                        break
                if same:
                    return state
        slot = (slot + 1) & mask
    states = meta[STATES]
    used = meta[NODE_CELLS]
    # Keep the hash table at most half full, and the node lists within their array.
    if states + 1 >= state_destination_count.shape[0] or states * 2 >= mask or (
        used + count > state_nodes.shape[0]
    ):
        meta[RESET_PENDING] = 1
        return _EMPTY
    state_nodes[used : used + count] = nodes[:count]
    state_start[states + 1] = used + count
    state_destination_count[states] = _EMPTY
    set_keys[slot] = hashed
    set_values[slot] = states
    meta[STATES] = states + 1
    meta[NODE_CELLS] = used + count
    meta[BUILT] += 1
    return states


@njit(cache=True)
def _reset(dfa, meta):
    dfa[0][0] = 0
    dfa[5][:] = _EMPTY
    dfa[8][:] = _EMPTY
    meta[STATES] = 0
    meta[NODE_CELLS] = 0
    meta[DESTINATION_CELLS] = 0
    meta[TRANSITIONS] = 0
    meta[START] = _EMPTY
    meta[RESET_PENDING] = 0
    meta[RESETS] += 1


@njit(cache=True)
def _build_transition(state, word, slot, live, following, trie, dfa, meta, mark):
    """A transition seen for the first time: step the state's nodes, intern the result, and
    remember it at ``slot`` of the transition table. The new state, or -1 with the next live
    nodes in ``following[:count]`` if the DFA is full, or `_PLAIN` with them if both sets are
    small (see `SMALL_SET`)."""
    state_start, state_nodes = dfa[0], dfa[1]
    transition_keys, transition_values, transition_bits = dfa[8], dfa[9], dfa[10]
    meta[STAMP] += 1
    begin = state_start[state]
    size = state_start[state + 1] - begin
    live[:size] = state_nodes[begin : begin + size]
    count = _step(live, size, word, following, trie, mark, meta[STAMP])
    if size <= SMALL_SET and count <= SMALL_SET and state != meta[START]:
        return _PLAIN, count  # (the start state's transitions are few: the first words)
    target = _intern(following, count, dfa, meta, mark)
    if target == _EMPTY:
        return _EMPTY, count
    if meta[TRANSITIONS] * 2 < (1 << transition_bits) - 1:
        transition_keys[slot] = np.int64(state) * (trie[3] + 1) + (word + 1)
        transition_values[slot] = target
        meta[TRANSITIONS] += 1
    else:
        meta[RESET_PENDING] = 1
    return target, 0


@njit(cache=True)
def write_routes(first, stop, final, side, side_start, offsets, dfa, out, literal_ids):
    """Copy the destinations of keys ``first .. stop - 1`` into ``out`` (grown if needed):
    `route_batch`'s second pass."""
    state_destination_start, state_destination_count, state_destinations = dfa[2], dfa[3], dfa[4]
    literal_start, literal_destinations = literal_ids
    needed = offsets[stop]
    if needed > out.shape[0]:
        grown = np.empty(max(needed, 2 * out.shape[0]), dtype=np.int32)
        grown[: offsets[first]] = out[: offsets[first]]
        out = grown
    for k in range(first, stop):
        at = offsets[k]
        count = offsets[k + 1] - at
        state = final[k]
        if state >= 0:
            source, begin = state_destinations, state_destination_start[state]
        elif state == _EMPTY:
            source, begin = side, side_start[k]
        else:
            source, begin = literal_destinations, literal_start[_LITERAL - state]
        _copy(source, begin, out, at, count)
    return out


@njit(cache=True)
def _with_literal(k, literal, final, side, side_used, side_start, offsets, dfa, literal_ids,
                  seen, meta):
    """Key ``k``'s answer so far (a state's list or a ``side`` slice) united with the
    destinations of its literal bindings (entry ``literal`` of the exact-key table), no
    repeats, as a new ``side`` slice; returns ``side`` (maybe grown) and its use."""
    literal_start, literal_destinations = literal_ids
    first, stop = literal_start[literal], literal_start[literal + 1]
    count = offsets[k + 1] - offsets[k]
    if count == 0:  # the usual case, no wildcard binding matched: `_write` copies the list
        final[k] = _LITERAL - literal
        offsets[k + 1] = offsets[k] + stop - first
        return side, side_used
    if final[k] >= 0:
        source, begin = dfa[4], dfa[2][final[k]]
    else:
        source, begin = side, side_start[k]
    needed = side_used + count + stop - first
    if needed > side.shape[0]:
        grown = np.empty(max(needed, 2 * side.shape[0]), dtype=np.int32)
        grown[:side_used] = side[:side_used]
        if final[k] < 0:
            source = grown
        side = grown
    before = side_used
    meta[SEEN] += 1
    stamp = meta[SEEN]
    for i in range(count):
        destination = source[begin + i]
        seen[destination] = stamp
        side[side_used] = destination
        side_used += 1
    for j in range(first, stop):
        destination = literal_destinations[j]
        if seen[destination] != stamp:
            seen[destination] = stamp
            side[side_used] = destination
            side_used += 1
    final[k] = _EMPTY
    side_start[k] = before
    offsets[k + 1] = offsets[k] + side_used - before
    return side, side_used


@njit(cache=True)
def route_batch(data, key_offsets, vocabulary, start_nodes, trie, destinations, dfa, meta,
                mark, seen, literal_keys, literal_ids):
    """Each key's final state, for `write_routes` to copy out as (offsets int64[n + 1], ids
    int32), no repeats per key.

    Key ``i`` is the UTF-8 ``data[key_offsets[i] : key_offsets[i + 1]]`` (Arrow's layout).
    ``vocabulary``, ``trie`` and ``destinations`` are the flat trie (see
    `xroute.engines.compiled.FlatTrie`), ``dfa`` and ``meta`` the DFA carried between calls,
    ``mark`` (one per node) and ``seen`` (one per destination) scratch stamps.
    ``literal_keys`` is the exact-key table of the literal bindings kept outside the trie
    (laid out as ``vocabulary``, whole keys for words) and ``literal_ids`` their destination
    lists: a key found there gets them besides what the walk finds.

    Returns (offsets, the ids of keys ``0 .. written - 1``, ``written``, and for the other
    keys their final states, side array and where each starts in it): keys before a DFA reset
    are written out here, the rest by the caller (`xroute.engines.compiled.FlatTrie.route`).
    """
    state_start, state_nodes = dfa[0], dfa[1]
    state_destination_start, state_destination_count, state_destinations = dfa[2], dfa[3], dfa[4]
    transition_keys, transition_values, transition_bits = dfa[8], dfa[9], dfa[10]
    transition_shift = np.uint64(64 - transition_bits)
    transition_mask = (1 << transition_bits) - 1
    vocabulary_size = trie[3]
    keys = key_offsets.shape[0] - 1
    nodes = mark.shape[0]
    live = np.empty(nodes, dtype=np.int32)
    following = np.empty(nodes, dtype=np.int32)
    offsets = np.zeros(keys + 1, dtype=np.int64)
    final = np.empty(keys, dtype=np.int32)  # final state of each key; -1: see `side`
    side = np.empty(64, dtype=np.int32)  # destinations of keys routed without the DFA
    side_start = np.zeros(keys, dtype=np.int64)
    side_used = 0
    out = np.empty(0, dtype=np.int32)
    written = 0  # keys before this one are in `out` already
    has_literals = literal_keys[1].shape[0] > 1
    for k in range(keys):
        if meta[RESET_PENDING]:
            out = write_routes(written, k, final, side, side_start, offsets, dfa, out,
                               literal_ids)
            written = k
            side_used = 0
            _reset(dfa, meta)
        state = meta[START]
        if state == _EMPTY:
            count = start_nodes.shape[0]
            live[:count] = start_nodes
            state = _intern(live, count, dfa, meta, mark)
            meta[START] = state
        position = key_offsets[k]
        end = key_offsets[k + 1]
        # hot: `--shapes` unicast / literal / nats batches: one probe for the whole key
        literal = _word_id(data, position, end, literal_keys) if has_literals else _EMPTY
        plain = -1  # once the DFA runs out of room: how many live nodes are in `live`
        more = position < end  # a key "" has no words; "a." has two, the second empty
        while more:
            stop = position
            while stop < end and data[stop] != _DOT:
                stop += 1
            word = _word_id(data, position, stop, vocabulary)
            more = stop < end
            position = stop + 1
            if plain >= 0:
                meta[STAMP] += 1
                plain = _step(live, plain, word, following, trie, mark, meta[STAMP])
                for i in range(plain):
                    live[i] = following[i]
                if plain == 0 or _absorbing(live, plain, trie):
                    break  # no word can change the live set any more
            else:
                if state_start[state + 1] == state_start[state]:
                    break  # the dead state: nothing can match any more
                # hot: the warm path of `xroute bench engines` compiled match_many_ids
                key = np.int64(state) * (vocabulary_size + 1) + (word + 1)
                slot = _slot(key, transition_shift)
                target = _EMPTY
                while transition_keys[slot] != _EMPTY:
                    if transition_keys[slot] == key:
                        target = transition_values[slot]
                        break
                    slot = (slot + 1) & transition_mask
                if target == _EMPTY:
                    target, count = _build_transition(state, word, slot, live, following, trie,
                                                      dfa, meta, mark)
                if target < 0:  # small sets, or no room: finish with the plain walk
                    for i in range(count):
                        live[i] = following[i]
                    plain = count
                    if target == _EMPTY:
                        meta[FALLBACKS] += 1
                    else:
                        meta[SMALL_WALKS] += 1
                    if plain == 0:
                        break
                else:
                    state = target
        if plain >= 0:
            state = _EMPTY
            if _destination_count(live, plain, destinations) > GATHER_KEEP:
                state = _intern(live, plain, dfa, meta, mark)
            if state == _EMPTY:
                meta[SEEN] += 1
                before = side_used
                side, side_used = _gather(live, plain, destinations, seen, meta[SEEN], side,
                                          side_used)
                final[k] = _EMPTY
                side_start[k] = before
                offsets[k + 1] = offsets[k] + side_used - before
                if literal != _EMPTY:
                    side, side_used = _with_literal(k, literal, final, side, side_used,
                                                    side_start, offsets, dfa, literal_ids,
                                                    seen, meta)
                continue
        cached = state_destination_count[state]
        if cached == _EMPTY:
            # First key to end here: gather the destinations once and keep them in the state.
            meta[SEEN] += 1
            begin = state_start[state]
            before = side_used
            side, side_used = _gather(state_nodes[begin : state_start[state + 1]],
                                      state_start[state + 1] - begin, destinations, seen,
                                      meta[SEEN], side, side_used)
            cached = side_used - before
            used = meta[DESTINATION_CELLS]
            if used + cached <= state_destinations.shape[0]:
                _copy(side, before, state_destinations, used, cached)
                state_destination_start[state] = used
                state_destination_count[state] = cached
                meta[DESTINATION_CELLS] = used + cached
                side_used = before
            else:
                meta[RESET_PENDING] = 1
                final[k] = _EMPTY
                side_start[k] = before
                offsets[k + 1] = offsets[k] + cached
                if literal != _EMPTY:
                    side, side_used = _with_literal(k, literal, final, side, side_used,
                                                    side_start, offsets, dfa, literal_ids,
                                                    seen, meta)
                continue
        final[k] = state
        offsets[k + 1] = offsets[k] + cached
        if literal != _EMPTY:
            side, side_used = _with_literal(k, literal, final, side, side_used, side_start,
                                            offsets, dfa, literal_ids, seen, meta)
    # The rest is written by the caller into an array NumPy allocates (see `write_shapes`).
    return offsets, out, written, final, side, side_start


@njit(cache=True, inline="always")
def _gather_part(side, used, ids, begin, stop, seen, stamp):
    """The ids of ``ids[begin:stop]`` not stamped yet, after ``side[:used]`` (grown as
    needed), each stamped as it is written."""
    if used + stop - begin > side.shape[0]:
        grown = np.empty(max(2 * side.shape[0], used + stop - begin), dtype=np.int32)
        grown[:used] = side[:used]
        side = grown
    for i in range(begin, stop):
        destination = ids[i]
        if seen[destination] != stamp:
            seen[destination] = stamp
            side[used] = destination
            used += 1
    return side, used


@njit(cache=True)
def route_shapes(data, key_offsets, shapes, heads, entries, entry_ids, literal_keys,
                 literal_ids, seen, stamp_box):
    """Where each key's destinations are, by pattern shape: the tuple space search of
    `xroute.engines.shapes`, in arrays (`xroute.engines.flat_shapes`). `write_shapes` then
    copies them out as (offsets int64[n + 1], ids int32).

    ``shapes`` is (min_words, exact, position_starts, positions) per shape; a position below
    zero counts from the key's end. ``heads``, laid out as the word table, holds the literal
    first words of the patterns while every pattern begins with one (else it is empty): a
    key whose first word is not there matches no shape (NATS's subjects, none under
    ``cloud``), so one probe replaces one per shape. A key's entry in shape ``s`` is looked
    up in ``entries`` (laid out as the word table) by the bytes ``s`` (two bytes) then the
    key's words at the shape's positions, each after a dot. ``literal_keys`` and
    ``literal_ids``: the exact-key table of the literal bindings; ``entry_ids`` and
    ``literal_ids`` are (starts, ids) of each entry's and each literal key's destinations.

    Two passes, as `route_batch`: this one finds each key's parts; a key of one part (the
    usual case) is copied from it by `write_shapes`, into an array of exactly the right size;
    a key of several is gathered without repeats here (``seen``, stamped from
    ``stamp_box[0]``) into a side array. Returns (offsets, the one part of each key or -1,
    where each key's ids start in the side array, the side array).
    """
    min_words, exact, position_starts, positions = shapes
    entry_starts, entry_destinations = entry_ids
    literal_starts, literal_destinations = literal_ids
    shape_count = min_words.shape[0]
    keys = key_offsets.shape[0] - 1
    offsets = np.zeros(keys + 1, dtype=np.int64)
    # Per key: its one part (an entry, or -2 - a literal key), or -1 for none or for several
    # (then its ids are side[side_start[k]:...]).
    single = np.full(keys, _EMPTY, dtype=np.int64)
    side_start = np.zeros(keys, dtype=np.int64)
    side = np.empty(64, dtype=np.int32)
    side_used = 0
    word_begin = np.empty(257, dtype=np.int64)  # a key of 255 bytes has at most 256 words
    word_end = np.empty(257, dtype=np.int64)
    scratch = np.empty(520, dtype=np.uint8)
    has_literals = literal_keys[1].shape[0] > 1
    check_heads = heads[1].shape[0] > 1
    stamp = stamp_box[0]
    for k in range(keys):
        begin = key_offsets[k]
        end = key_offsets[k + 1]
        words = 0
        if begin < end:  # a key "" has no words; "a." has two, the second empty
            start = begin
            for i in range(begin, end):
                if data[i] == _DOT:
                    word_begin[words] = start
                    word_end[words] = i
                    words += 1
                    start = i + 1
            word_begin[words] = start
            word_end[words] = end
            words += 1
        first = _EMPTY  # the first part: an entry, or -2 - a literal key
        several = False
        count = 0
        first_shape = 0
        if check_heads and (words == 0 or _word_id(data, word_begin[0], word_end[0],
                                                   heads) == _EMPTY):
            first_shape = shape_count  # the exact-key table alone
        # hot: `xroute bench engines --shapes` auto batches on EMQX and unicast
        for s in range(first_shape, shape_count + 1):
            if s < shape_count:
                if words < min_words[s] or (exact[s] and words != min_words[s]):
                    continue
                scratch[0] = s & 255
                scratch[1] = s >> 8
                length = 2
                for p in range(position_starts[s], position_starts[s + 1]):
                    at = positions[p]
                    if at < 0:
                        at += words
                    scratch[length] = _DOT
                    length += 1
                    for i in range(word_begin[at], word_end[at]):
                        scratch[length] = data[i]
                        length += 1
                entry = _word_id(scratch, 0, length, entries)
                if entry == _EMPTY:
                    continue
                part = entry
                ids, part_begin, part_stop = (entry_destinations, entry_starts[entry],
                                              entry_starts[entry + 1])
            else:
                if not has_literals:
                    break
                literal = _word_id(data, begin, end, literal_keys)
                if literal == _EMPTY:
                    break
                part = _LITERAL - literal
                ids, part_begin, part_stop = (literal_destinations, literal_starts[literal],
                                              literal_starts[literal + 1])
            if first == _EMPTY:
                first = part
                count = part_stop - part_begin
                continue
            if not several:  # a second part: gather the first one, then this one, apart
                several = True
                stamp += 1
                side_start[k] = side_used
                if first >= 0:
                    side, side_used = _gather_part(side, side_used, entry_destinations,
                                                   entry_starts[first],
                                                   entry_starts[first + 1], seen, stamp)
                else:
                    side, side_used = _gather_part(side, side_used, literal_destinations,
                                                   literal_starts[_LITERAL - first],
                                                   literal_starts[_LITERAL - first + 1],
                                                   seen, stamp)
            side, side_used = _gather_part(side, side_used, ids, part_begin, part_stop, seen,
                                           stamp)
        if several:
            count = side_used - side_start[k]
        else:
            single[k] = first
        offsets[k + 1] = offsets[k] + count
    stamp_box[0] = stamp
    return offsets, single, side_start, side


@njit(cache=True)
def write_shapes(offsets, single, side_start, side, entry_ids, literal_ids, out):
    """The second pass of `route_shapes`: each key's ids into ``out``, of exactly the size
    ``offsets[-1]`` (allocated by NumPy, which asks the kernel for huge pages: an array of a
    broadcast's 30M ids filled 4 times slower when numba allocated it)."""
    entry_starts, entry_destinations = entry_ids
    literal_starts, literal_destinations = literal_ids
    for k in range(single.shape[0]):
        at = offsets[k]
        size = offsets[k + 1] - at
        if size == 0:
            continue
        part = single[k]
        if part == _EMPTY:
            _copy(side, side_start[k], out, at, size)
        elif part >= 0:
            _copy(entry_destinations, entry_starts[part], out, at, size)
        else:
            _copy(literal_destinations, literal_starts[_LITERAL - part], out, at, size)
