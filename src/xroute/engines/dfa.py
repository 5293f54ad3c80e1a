"""A lazily built deterministic automaton over words, on top of the breadth-first trie.

A DFA state is the set of trie nodes alive after the words read so far (what `trie.step`
computes), interned so that equal sets share one state. Its transitions are built on first
use: one dict entry per literal word that some trie edge carries, plus one shared transition
for every other word (all words that label no edge lead to the same next set). A state knows
its destinations, so once warm a key of L words costs L dict lookups (seed 002's DFA, built
lazily like RE2's, so it never enumerates states that no key reaches).

A new transition is not a step of every live node: the next set is the shared one (where
words that label no edge go) united with the nodes entered along the word's own edges, found
from the few trie nodes that have such an edge (`trie.step_labelled`); a state so made keeps
those two parts, so that its own shared transition and its destinations are unions too (see
`State`). At 10k seed-mix bindings a new transition stepped about 16 live nodes in Python
(20 µs with the profiler on); the first `match` of a key went from 5.5 to 3.0 µs.

Memory is bounded by `DFA_MAX_STATES` and `DFA_MAX_CELLS`; when either is reached the whole
automaton is dropped and rebuilt on demand (as RE2 resets its DFA cache): trimming only some
states would also mean finding every transition that points at them.

A binding change drops only the states that hold a trie node on the changed pattern's path
(the nodes whose edges or destinations change). No other state can reach such a node (its
parent is on the path too), so every other state and its transitions stay exact and warm.
When they are most of the automaton (a pattern that starts with ``#`` changes the node every
state holds), the whole automaton is dropped instead, which is cheaper.

The doomed states are found by a scan (each state's nodes tested against the path) while
changes are rare, and by a reverse index (node -> states holding it) while bindings churn. The
index costs a set insertion per node of every state built: at 100k seed bindings, where most
keys build new states, it made the DFA slower than the trie walk it caches (138 µs a new key
against 75), for changes that most deployments make only at start. So it is built when a
change comes fewer walks after the previous one than the automaton has states, and dropped
when the automaton fills up and starts again.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from xroute.core.keys import HASH, STAR
from xroute.engines.base import EMPTY, Words, register
from xroute.engines.trie import Node, TrieEngine, step, step_labelled, step_unlabelled

# RabbitMQ measured its DFA as fastest per message but found its memory the problem (seed 002).
# A state costs about 300 bytes before its cells; 20,000 states cover the warm key sets of the
# benchmarks (10k bindings, a few thousand distinct keys of up to 10 words).
DFA_MAX_STATES = 20_000
# Every node of a state's set, every transition and every destination of a state that a key
# ended in is a "cell", about 60-90 bytes each with the reverse index (measured with
# tracemalloc, `xroute bench engines`): one million cells keeps a DFA under about 100 MB,
# however few and large its states. Most of it is destination sets: at 10k bindings of the
# seed mix a 5-word key matches about 225 of them.
DFA_MAX_CELLS = 1_000_000
# When the automaton fills up in fewer matches than it holds states, most keys are new to it
# (40k distinct user keys, say) and building states costs more than it saves: like RE2 falling
# back to its NFA, the engine then walks the trie for this many matches per state of the cap
# before it tries the automaton again.
DFA_BYPASS_FACTOR = 4
# A state of at most this many live nodes steps them all for a new transition, as the trie
# does: on so few (a literal key's path) the two-part build of `_advance` costs more than it
# saves (NATS's literal subjects: 6.1 -> 6.8 µs a first match with it). `auto` keeps literal
# bindings out of its trie and sets none: there a large state made from a small one would
# lose its parts (seed-10k first match 3.0 -> 3.4 µs with this bound).
DFA_SMALL_STATE = 4


class State(frozenset):  # type: ignore[type-arg]
    """One DFA state: a set of live trie nodes, its transitions so far, and its destinations
    once a key has ended in it (most states are only passed through, and a union of
    destinations can be large).

    A state made by a transition is a ``base`` state (where every unlabelled word leads from
    the previous one) plus the few nodes ``entered`` along the word's own edges. Its own
    unlabelled transition and its destinations are then the base's united with those of the
    entered nodes: a few set operations in C, not a Python loop over every live node. (The
    base holds a subset of the state's nodes, so a binding change that drops the base drops
    the state too.)"""

    __slots__ = ("destinations", "next", "other", "base")

    # A state *is* the frozenset of its nodes (one object a state, not two: every object a
    # first route leaves behind counts towards Python's next collection); states are
    # interned, so two states are never equal but as the same object. Only
    # `DfaEngine._intern` makes them, and sets every slot there: no ``__init__`` (a Python
    # frame more on each state a first route builds).
    destinations: frozenset | None
    # literal word -> state: `_NO_NEXT` (shared, never written) until the first one, as half
    # the states are only ends; each object a state keeps is one more for Python's collector
    # to count, and enough of them made on routes set off a full collection
    next: dict[str, State]
    other: State | None  # any word that labels no trie edge
    base: State | None

    @property
    def nodes(self) -> frozenset[Node]:
        """The live trie nodes: the state itself."""
        return self

    @property
    def entered(self) -> frozenset[Node]:
        """The nodes this state holds beyond its base's (all of them without a base): made
        when asked, not kept (a set a state). The union with the base's is the same set as
        the nodes entered along the word's edges, so what is derived from them is too."""
        base = self.base
        return self.nodes if base is None else self.nodes - base.nodes


@register
class DfaEngine(TrieEngine):
    """The trie, plus a lazily built and bounded DFA over its live-node sets."""

    name = "dfa"
    # The DFA already remembers per state; a route cache in front adds little but its upkeep.
    route_cache_default = False
    # Keys that end in one state get the same frozenset: callers may key their own work by it.
    shares_results = True
    small_state = DFA_SMALL_STATE  # see `DFA_SMALL_STATE`

    def __init__(self, max_states: int = DFA_MAX_STATES, max_cells: int = DFA_MAX_CELLS) -> None:
        super().__init__()
        self.max_states = max_states
        self.max_cells = max_cells
        self._states: dict[frozenset[Node], State] = {}  # each state is its own key
        # node -> states holding it, kept only while bindings churn (see the module's doc)
        self._holding: dict[Node, set[State]] | None = None
        self._matches_at_change = 0
        self._start: State | None = None
        self._dead: State | None = None
        self._cells = 0
        # literal word -> the trie nodes with an edge labelled by it; other words share
        # `State.other` (see `_advance`). `auto` sets it to None while it routes by shape
        # and never walks the automaton (a set per word: 66 bytes a binding on the MQTT
        # shape, for nothing): it is then made from the trie when needed (`_make_start`).
        self._parents: dict[str, set[Node]] | None = {}
        self._resets = self._invalidated = self._built = 0
        self._matches = self._matches_at_reset = 0
        self._bypass = 0  # matches left to route by the plain trie walk
        self._bypassed = 0

    # -- bindings ------------------------------------------------------------------------
    def add(self, words: Words, destination: Hashable) -> None:
        path, created = self.insert(words, destination)
        # Only the nodes that existed before gain an edge or a destination: drop the states
        # that hold one (new nodes are in no state yet).
        if self._states:
            self._forget(path[:created])
        parents = self._parents
        if parents is None:
            return
        for depth in range(created, len(words) + 1):  # the edges this binding created
            word = words[depth - 1]
            if word != STAR and word != HASH:
                holders = parents.get(word)
                if holders is None:
                    parents[word] = {path[depth - 1]}
                else:
                    holders.add(path[depth - 1])

    def remove(self, words: Words, destination: Hashable) -> None:
        path, pruned = self.delete(words, destination)
        if self._states:
            self._forget(path)
        parents = self._parents
        if parents is None:
            return
        for depth in range(pruned, len(words) + 1):  # the edges pruned
            word = words[depth - 1]
            if word != STAR and word != HASH:
                holders = parents[word]
                holders.discard(path[depth - 1])
                if not holders:
                    del parents[word]

    # -- matching (hot: `xroute bench engines` single-key dfa latency) ----------------------
    def match(self, key: str) -> frozenset:
        self._matches += 1
        if self._bypass:
            self._bypass -= 1
            self._bypassed += 1
            return super().match(key)
        state = self._start or self._make_start()
        if key:
            dead, parents = self._dead, self._parents
            for word in key.split("."):
                following = state.next.get(word)
                if following is None:
                    # a word of no pattern: the state's unlabelled transition, if made
                    following = (word not in parents and state.other
                                 or self._advance(state, word))
                if following is dead:
                    return EMPTY
                state = following
        found = state.destinations
        if found is None:
            found = self._finish(state)
        return found

    def stats(self) -> dict[str, Any]:
        return {
            **super().stats(),
            "engine": self.name,
            "dfa_states": len(self._states),
            "dfa_cells": self._cells,
            "dfa_max_states": self.max_states,
            "dfa_max_cells": self.max_cells,
            "dfa_states_built": self._built,
            "dfa_states_invalidated": self._invalidated,
            "dfa_resets": self._resets,
            "dfa_bypassed_matches": self._bypassed,
            "dfa_reverse_index": self._holding is not None,
        }

    # -- building --------------------------------------------------------------------------
    def _make_start(self) -> State:
        # Every walk of the automaton begins here, so the index of labelled edges is made
        # before any transition needs it.
        if self._parents is None:
            self._parents = self._edges_by_word()
        self._start = self._intern(self.start())
        return self._start

    def _edges_by_word(self) -> dict[str, set[Node]]:
        """Literal word -> the trie nodes with an edge labelled by it (`_parents`)."""
        parents: dict[str, set[Node]] = {}
        pending = [self._root]
        while pending:
            node = pending.pop()
            kids = node.children
            for word, child in ((kids,) if kids.__class__ is tuple else kids.items()):
                holders = parents.get(word)
                if holders is None:
                    parents[word] = {node}
                else:
                    holders.add(node)
                pending.append(child)
            if node.star is not None:
                pending.append(node.star)
            if node.hash is not None:
                pending.append(node.hash)
        return parents

    def _advance(self, state: State, word: str) -> State:
        # Once the automaton is half full it steps every node again: the two-part build also
        # makes the state where unlabelled words go for each state it steps from, and keeps
        # the destinations of both parts, 2.5 times the cells at 100k seed bindings (states
        # of about 40 nodes); the automaton filled up, reset and walked the trie for repeated
        # keys (0.8 -> 100 µs a repeated `dfa` match).
        parents = self._parents.get(word)
        if parents is None:  # not kept per word: words outside the patterns are unbounded
            return state.other or self._other(state)
        # (A state is its own node set: read as such, not through `State.nodes`, on this
        # path that every new transition takes.)
        if len(state) <= self.small_state or self._cells > self.max_cells // 2:
            following = self._intern(step(state, word))
        else:
            # The next set is the one every unlabelled word leads to (`State.other`, made
            # once per state) united with the nodes entered along ``word``'s own edges, found
            # from the few nodes that have one (see the module's doc).
            other = state.other or self._other(state)
            if state.isdisjoint(parents):
                # Most new transitions read a word that labels edges elsewhere in the trie
                # but none of this state's (the seed mix's w0..w999): they lead to `other`,
                # found without a call or a set (2 of 3 new transitions at 10k bindings).
                following = other
            else:
                entered = step_labelled(state, parents, word)
                following = (other if entered <= other
                             else self._intern(other | entered, other, entered))
        if state.next is _NO_NEXT:
            state.next = {word: following}
        else:
            state.next[word] = following
        self._cells += 1
        return following

    def _other(self, state: State) -> State:
        """The state that every word labelling no edge of ``state`` leads to, made once: from
        its base's, made first, down a chain as long as the bases that lack theirs (a loop,
        not a recursion: each base is only a node smaller than its state)."""
        chain: list[State] = []
        roomy = self._cells <= self.max_cells // 2  # `_roomy`, read once
        while state.other is None and state.base is not None and roomy:
            chain.append(state)
            state = state.base
        other = state.other
        if other is None:
            other = state.other = self._intern(step_unlabelled(state))
            self._cells += 1
        for state in reversed(chain):
            entered = step_unlabelled(state - state.base)  # `State.entered`
            if not entered <= other:
                other = self._intern(other | entered, other, entered)
            state.other = other
            self._cells += 1
        return other

    def _intern(self, nodes: set[Node] | frozenset[Node], base: State | None = None,
                entered: set[Node] | None = None) -> State:
        """The state of exactly ``nodes``, made if new (from ``base`` and ``entered``, if
        given: see `State`)."""
        # Made first and looked up by itself: nearly every state a first route interns is
        # new (908 of 930 at 10k seed bindings), and a frozenset made only to look the nodes
        # up was a second copy and a second hash of them.
        key = state = State(nodes)
        found = self._states.get(key)
        if found is not None:
            return found
        if len(self._states) >= self.max_states or self._cells + len(key) > self.max_cells:
            self._reset()
            # The base belongs to the automaton just dropped: through its transitions it
            # would keep all of that alive, so this state is made whole.
            base = None
        state.destinations = state.other = None
        state.next = _NO_NEXT
        state.base = base
        # (Made from a base, it holds the base's nodes: only the entered ones are left to test.)
        if key and (base is None or not base or base.next.__class__ is _SelfLoop) and _hash_tails(
            key if base is None else entered  # type: ignore[arg-type]
        ):
            # Only '#' tails: every word leads back here. No transition is built per word (a
            # long key after ``device.{s}.*.{n}.#`` built one per word and per key).
            state.next = _SelfLoop(state)
            state.other = state
        self._states[key] = state
        self._cells += len(key) + 1
        self._built += 1
        if self._holding is not None:
            _hold(self._holding, state)
        if not key:
            self._dead = state
        return state

    def _roomy(self) -> bool:
        """Whether states are still built in two parts: until the automaton is half full."""
        return self._cells <= self.max_cells // 2

    def _finish(self, state: State) -> frozenset:
        """Gather ``state``'s destinations once: its base's (gathered first, down the chain of
        bases that lack theirs, in a loop) with its entered nodes', or all its nodes'."""
        chain: list[State] = []
        roomy = self._cells <= self.max_cells // 2  # `_roomy`, read once
        while state.base is not None and state.base.destinations is None and roomy:
            chain.append(state)
            state = state.base
        chain.append(state)
        result = EMPTY
        for state in reversed(chain):
            base = state.base
            if base is not None and base.destinations is None:
                base = None  # past half the bound: gathered whole (a base's are cells more)
            found: set[Hashable] = set()
            for node in state if base is None else state - base:  # all, or `State.entered`
                if node.destinations:
                    found.update(node.destinations)
            if base is None:
                result = frozenset(found) if found else EMPTY
            else:
                under = base.destinations
                result = under if found <= under else under | found
            state.destinations = result
            self._cells += len(result)
        if self._cells > self.max_cells:
            self._reset()
        return result

    def _reset(self, full: bool = True) -> None:
        """Drop the whole automaton; the start state is rebuilt on demand. ``full``: because
        it reached its bound (not because bindings changed)."""
        self._states.clear()
        # A full automaton starts again without the index; a change keeps churn's index.
        self._holding = None if full or self._holding is None else {}
        self._start = self._dead = None
        self._cells = 0
        self._resets += 1
        if full and self._matches - self._matches_at_reset < self.max_states:
            self._bypass = DFA_BYPASS_FACTOR * self.max_states  # thrashing: walk the trie
        self._matches_at_reset = self._matches

    # -- invalidation ----------------------------------------------------------------------
    def _forget(self, path: list[Node]) -> None:
        """Drop every state that holds a node of ``path``: only their transitions may change."""
        states = self._states
        churning = self._matches - self._matches_at_change < len(states)
        self._matches_at_change = self._matches
        holding = self._holding
        if holding is None and churning:
            holding = self._holding = {}
            for state in states.values():
                _hold(holding, state)
        doomed: set[State] = set()
        if holding is None:
            doomed.update(state for state in states.values() if not state.nodes.isdisjoint(path))
        else:
            for node in path:
                holders = holding.pop(node, None)
                if holders:
                    doomed |= holders
        if not doomed:
            return
        if 2 * len(doomed) >= len(states):
            # Most states hold the node (a pattern starting with '#' reaches every state):
            # dropping all at once is cheaper than unlinking each from the reverse index.
            self._invalidated += len(doomed)
            self._reset(full=False)
            return
        for state in doomed:
            del states[state.nodes]
            self._cells -= _cells_of(state)
            if holding is not None:
                for node in state.nodes:
                    holders = holding.get(node)
                    if holders is not None:
                        holders.discard(state)
                        if not holders:
                            del holding[node]
        self._invalidated += len(doomed)
        if self._start in doomed:
            self._start = None
        if self._dead in doomed:
            self._dead = None


_NO_NEXT: dict[str, State] = {}  # `State.next` of a state without transitions yet


class _SelfLoop(dict):
    """The transitions of a state made only of '#' nodes that lead nowhere else: every word
    comes back to the state (the hot loops call ``get``, which answers without an entry)."""

    __slots__ = ("state",)

    def __init__(self, state: State) -> None:
        super().__init__()
        self.state = state

    def get(self, word: str, default: Any = None) -> State:  # type: ignore[override]
        return self.state


def _hash_tails(nodes: frozenset[Node] | set[Node]) -> bool:
    """Whether every node is a '#' node with no edge but its own (a loop, not `all` over a
    generator: 0.09 against 0.43 µs on the seed mix's entered nodes)."""
    for node in nodes:
        if not node.is_hash or node.children or node.star is not None:
            return False
    return True


def _hold(holding: dict[Node, set[State]], state: State) -> None:
    """Enter ``state`` in the reverse index ``holding`` under each of its nodes."""
    for node in state.nodes:
        holders = holding.get(node)
        if holders is None:
            holding[node] = {state}
        else:
            holders.add(state)


def _cells_of(state: State) -> int:
    """What a state counts against `DFA_MAX_CELLS`: nodes, transitions, destinations."""
    found = state.destinations
    return (
        len(state.nodes) + 1 + len(state.next) + (state.other is not None) + len(found or ())
    )
