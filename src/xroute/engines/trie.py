"""A word trie with ``*`` and ``#`` edges, walked breadth-first so that it is never exponential.

RabbitMQ's trie walk restarts the search below a ``#`` edge once for every tail of the key,
and the same (node, position) pair is explored again and again: with bindings ``#.#.#...``
the work doubles with every ``#`` (seed 000). Here the walk advances all live nodes one word
at a time and keeps each node once per position, so routing a key of L words costs at most
L times the number of trie nodes, whatever the patterns.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

from xroute.core.keys import HASH, STAR, split_words
from xroute.engines.base import EMPTY, Words, register

# A trie of 100k seed bindings has about 300k nodes, half of them with exactly one literal
# child and most with at most one destination. Such a node keeps its child as a (word, node)
# pair and its destinations in a tuple: a one-entry dict is 184 bytes, a pair 56; an empty set
# alone is 216 bytes. Leaves share one empty dict.
_NO_CHILDREN: dict[str, Node] = {}
_SMALL = 8  # destinations kept in a tuple up to this many, in a set beyond


class Node:
    """One trie node: the pattern prefix spelled by the edges from the root to it."""

    __slots__ = ("children", "star", "hash", "destinations")
    # A node reached through a '#' edge may absorb any number of further words: such nodes
    # are `HashNode`s (a class attribute, not a slot: 8 bytes less on each of 300k nodes).
    is_hash = False

    def __init__(self) -> None:
        # Literal children: a dict, or one (word, node) pair.
        self.children: dict[str, Node] | tuple[str, Node] = _NO_CHILDREN
        self.star: Node | None = None
        self.hash: Node | None = None
        self.destinations: tuple[Hashable, ...] | set[Hashable] = ()

    def literal(self, word: str) -> Node | None:
        """The child along the literal ``word``, if any."""
        kids = self.children
        if kids.__class__ is tuple:
            return kids[1] if kids[0] == word else None
        return kids.get(word)

    def child(self, word: str) -> Node | None:
        """The child along ``word`` (a literal, ``*`` or ``#``), if any."""
        if word == STAR:
            return self.star
        if word == HASH:
            return self.hash
        return self.literal(word)

    def add_literal(self, word: str, child: Node) -> None:
        """Add a child along a literal word that has none yet."""
        kids = self.children
        word = sys.intern(word)
        if kids is _NO_CHILDREN:
            self.children = (word, child)
        elif kids.__class__ is tuple:
            self.children = {kids[0]: kids[1], word: child}
        else:
            kids[word] = child

    def remove_literal(self, word: str) -> None:
        """Remove the child along a literal word."""
        kids = self.children
        if kids.__class__ is tuple:
            self.children = _NO_CHILDREN
            return
        del kids[word]
        if len(kids) == 1:
            self.children = next(iter(kids.items()))

    def bind(self, destination: Hashable) -> None:
        """Add a destination that is not bound here yet."""
        held = self.destinations
        if isinstance(held, set):
            held.add(destination)
        elif len(held) < _SMALL:
            self.destinations = (*held, destination)
        else:
            self.destinations = {*held, destination}

    def unbind(self, destination: Hashable) -> None:
        """Remove a destination bound here."""
        held = self.destinations
        if isinstance(held, set):
            held.discard(destination)
        else:
            self.destinations = tuple(d for d in held if d != destination)

    def is_empty(self) -> bool:
        """True if nothing is bound here or below."""
        return not (self.destinations or self.children or self.star or self.hash)


class HashNode(Node):
    """A node reached through a ``#`` edge."""

    __slots__ = ()
    is_hash = True


def _with_hash_chain(node: Node | None, into: set[Node]) -> None:
    # A '#' may match zero words, so entering a node also enters its '#' child, and so on.
    while node is not None and node not in into:
        into.add(node)
        node = node.hash


def step(live: set[Node], word: str) -> set[Node]:
    """The live nodes after reading one more word: each node at most once, so never exponential."""
    advanced: set[Node] = set()
    # The hot loop of the trie engine (benchmark: `xroute bench engines`): most nodes have no
    # '#' child, so the chain helper is called only when there is one.
    enter = advanced.add
    for node in live:
        kids = node.children
        if kids.__class__ is tuple:
            literal = kids[1] if kids[0] == word else None
        else:
            literal = kids.get(word)
        for child in (literal, node.star, node if node.is_hash else None):
            if child is not None and child not in advanced:
                enter(child)
                if child.hash is not None:
                    _with_hash_chain(child.hash, advanced)
    return advanced


def step_unlabelled(live: frozenset[Node] | set[Node]) -> set[Node]:
    """The live nodes after a word that labels no literal edge of ``live``: what `step` gives
    for such a word, without looking the word up (``*`` children and ``#`` nodes only)."""
    advanced: set[Node] = set()
    enter = advanced.add
    # (No tuple of the two children per node, as `step` makes: this runs for every state the
    # DFA builds, over the nodes it entered: 1.4 times faster on those of the seed mix.)
    for node in live:
        child = node.star
        if child is not None and child not in advanced:
            enter(child)
            if child.hash is not None:
                _with_hash_chain(child.hash, advanced)
        if node.is_hash and node not in advanced:
            enter(node)
            if node.hash is not None:
                _with_hash_chain(node.hash, advanced)
    return advanced


def step_labelled(live: frozenset[Node], parents: set[Node], word: str) -> set[Node]:
    """The nodes that ``live`` enters along the literal edges labelled ``word``, with their
    ``#`` chains; ``parents`` holds every node with such an edge. ``step(live, word)`` is this
    united with `step_unlabelled` (the union is the same set, whatever the order)."""
    entered: set[Node] = set()
    for parent in live.intersection(parents):  # C: over the smaller of the two
        kids = parent.children
        child = kids[1] if kids.__class__ is tuple else kids[word]
        _with_hash_chain(child, entered)
    return entered


@register
class TrieEngine:
    """Bindings in a word trie; a route walks every live node in step with the key's words."""

    name = "trie"

    def __init__(self) -> None:
        self._root = Node()
        self._nodes = 1

    def add(self, words: Words, destination: Hashable) -> None:
        self.insert(words, destination)

    def remove(self, words: Words, destination: Hashable) -> None:
        self.delete(words, destination)

    # hot: binding churn (`xroute bench engines`, add/remove of 100k bindings); the child
    # lookups are inlined because a method call per word was a third of the cost.
    def insert(self, words: Words, destination: Hashable) -> tuple[list[Node], int]:
        """Bind ``destination`` at the end of ``words``; returns the path of nodes from the
        root down and the depth of the first node this call created (``len(words) + 1`` if
        none), for subclasses that keep state about nodes."""
        node = self._root
        path = [node]
        append = path.append
        depth = 0
        for word in words:
            if word == STAR:
                child = node.star
            elif word == HASH:
                child = node.hash
            else:
                kids = node.children
                if kids.__class__ is tuple:
                    child = kids[1] if kids[0] == word else None
                else:
                    child = kids.get(word)
            if child is None:
                break
            append(child)
            node = child
            depth += 1
        else:  # every node there already
            node.bind(destination)
            return path, depth + 1
        # The rest of the path is new (most wildcard binds of a varied mix: 4 nodes of 5):
        # made and linked without looking up; below the first new node every parent is
        # new too, so its one literal child is set as the pair itself (`add_literal`).
        fresh = False
        for word in words[depth:]:
            if word == STAR:
                child = node.star = Node()
            elif word == HASH:
                child = node.hash = HashNode()
            elif fresh:
                child = Node()
                node.children = (sys.intern(word), child)
            else:
                child = Node()
                node.add_literal(word, child)
            fresh = True
            append(child)
            node = child
        self._nodes += len(words) - depth
        node.destinations = (destination,)  # a new leaf: `bind` of its first destination
        return path, depth + 1

    def delete(self, words: Words, destination: Hashable) -> tuple[list[Node], int]:
        """Unbind ``destination`` from the end of ``words`` and prune what no longer leads to
        a binding; returns the path as it was and the depth of the first pruned node
        (``len(words) + 1`` if none)."""
        node = self._root
        path = [node]
        for word in words:
            if word == STAR:
                node = node.star
            elif word == HASH:
                node = node.hash
            else:
                kids = node.children
                node = kids[1] if kids.__class__ is tuple else kids[word]
            path.append(node)
        node.unbind(destination)
        # Prune the nodes that no longer lead to any binding, deepest first.
        pruned = len(words) + 1
        for depth in range(len(words), 0, -1):
            node = path[depth]
            if node.destinations or node.children or node.star or node.hash:
                break
            parent, word = path[depth - 1], words[depth - 1]
            if word == STAR:
                parent.star = None
            elif word == HASH:
                parent.hash = None
            elif parent.children.__class__ is tuple:  # `remove_literal` of an only child
                parent.children = _NO_CHILDREN
            else:
                parent.remove_literal(word)
            self._nodes -= 1
            pruned = depth
        return path, pruned

    def patterns(self) -> Iterator[tuple[Words, Hashable]]:
        """Every (pattern words, destination) bound, in no particular order."""
        pending: list[tuple[Node, Words]] = [(self._root, ())]
        while pending:
            node, words = pending.pop()
            for destination in node.destinations:
                yield words, destination
            kids = node.children
            for word, child in ((kids,) if kids.__class__ is tuple else kids.items()):
                pending.append((child, (*words, word)))
            if node.star is not None:
                pending.append((node.star, (*words, STAR)))
            if node.hash is not None:
                pending.append((node.hash, (*words, HASH)))

    def start(self) -> set[Node]:
        """The live nodes before any word is read: the root and its chain of ``#`` children."""
        live: set[Node] = set()
        _with_hash_chain(self._root, live)
        return live

    def live_nodes(self, words: Words) -> set[Node]:
        """The nodes whose pattern prefix matches all of ``words``."""
        live = self.start()
        for word in words:
            live = step(live, word)
            if not live:
                break
        return live

    def match(self, key: str) -> frozenset:
        found: set[Hashable] = set()
        for node in self.live_nodes(split_words(key)):
            if node.destinations:
                found.update(node.destinations)
        return frozenset(found) if found else EMPTY

    def match_many(self, keys: Sequence[str]) -> list[frozenset]:
        return [self.match(key) for key in keys]

    def stats(self) -> dict[str, Any]:
        return {"engine": self.name, "nodes": self._nodes}
