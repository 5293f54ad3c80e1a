"""Topic binding patterns as objects to reason about: a canonical form, exact inclusion and
equivalence, and which words each wildcard took in a match. ``xroute lint`` and ``xroute explain``
are built on these; everything is validated through `xroute.core.keys`.

Inclusion (``includes(a, b)``: every key that ``b`` matches, ``a`` matches too) is decided
exactly by walking the keys of ``b`` in step with the set of live positions of ``a``, one word
at a time (an automaton product, with ``a`` determinised on the fly). Two facts keep the walk
finite and small:

* A pattern only ever compares a word with its own literal words, so a word that is in neither
  pattern (a *fresh* word) stands for every such word, and where ``b`` allows any word
  (a ``*``, or a word under a ``#``), a fresh word is the hardest for ``a`` to match: if some key
  of ``b`` escapes ``a``, the same key with those words made fresh escapes it too. So ``b`` is
  walked over its own literal words and one fresh word only.
* Positions of ``a`` that can only do worse than another live position are dropped (see
  `_prune`), so the live set holds the last ``#`` reached and offsets into one segment.

When ``a`` does not include ``b``, the walk found a key that proves it: `counterexample`
returns it (the shortest one, as the walk is breadth-first).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from xroute.core.errors import InclusionTooCostly
from xroute.core.keys import HASH, STAR, check_pattern, check_routing_key, split_words
from xroute.engines.base import Words
from xroute.engines.reference import pattern_matches

WILDCARDS = (STAR, HASH)
# Inclusion is exact; this bound only stops a pathological pair (long runs of `*` between
# literals in `a`, many `#` in `b`) from running for minutes. Real binding sets stay in the
# hundreds of states; the property tests and lint never come near it.
MAX_STATES = 200_000
_FRESH = None  # stands for any word that neither pattern names
STEP_ONLY = object()  # a move of the inclusion walk that reads no word (leaving a '#' of `b`)


def _words(pattern: str) -> Words:
    return split_words(check_pattern(pattern))


def normal_words(words: Iterable[str]) -> Words:
    """`normalise` on words: in each run of wildcards, the ``*`` first, then at most one ``#``."""
    out: list[str] = []
    stars, hashed = 0, False

    def flush() -> None:
        out.extend([STAR] * stars)
        if hashed:
            out.append(HASH)

    for word in words:
        if word == STAR:
            stars += 1
        elif word == HASH:
            hashed = True
        else:
            flush()
            stars, hashed = 0, False
            out.append(word)
    flush()
    return tuple(out)


def normalise(pattern: str) -> str:
    """The canonical spelling of a topic pattern: ``#.#`` is ``#``, ``#.*`` and ``*.#`` are
    ``*.#``, ``a.#.*.#.*`` is ``a.*.*.#``. It matches exactly the keys ``pattern`` matches and
    is never longer; `InvalidPattern` for a pattern that is not one."""
    return ".".join(normal_words(_words(pattern)))


def has_wildcard(pattern: str) -> bool:
    """True if some word of the pattern is ``*`` or ``#`` (``a*`` and ``##`` are plain words)."""
    return any(word in WILDCARDS for word in _words(pattern))


def literals(pattern: str) -> Words:
    """The plain words of a pattern, in order, repeats kept."""
    return tuple(word for word in _words(pattern) if word not in WILDCARDS)


def min_words(words: Words) -> int:
    """The fewest words a key matched by these pattern words can have."""
    return sum(1 for word in words if word != HASH)


# ------------------------------------------------------------------------- inclusion


def _closure(a: Words, live: Iterable[int]) -> set[int]:
    # A '#' may take no word, so being before it is also being after it.
    out: set[int] = set()
    for i in live:
        while i not in out:
            out.add(i)
            if i < len(a) and a[i] == HASH:
                i += 1
            else:
                break
    return out


def _advance(a: Words, live: frozenset[int], word: str | None) -> frozenset[int]:
    moved: list[int] = []
    for i in live:
        if i == len(a):
            continue
        part = a[i]
        if part == HASH:
            moved.append(i)
        elif part == STAR or part == word:
            moved.append(i + 1)
    return _prune(a, _closure(a, moved))


def _prune(a: Words, live: set[int]) -> frozenset[int]:
    """Drop the live positions whose future is contained in another's (it changes no answer).

    * Everything before the last ``#`` reached: what can follow it is ``Σ* rest``, which
      contains whatever can follow an earlier position.
    * Inside the segment after that ``#``, when a ``#`` ends the segment: offset ``i`` gives way
      to a later ``j`` if ``a[j:end]`` accepts, word for word, whatever ``a[i:i + end - j]``
      does (each word of it is ``*`` or the same word): the rest of ``i``'s segment then falls
      under the closing ``#``.
    """
    size = len(a)
    hashes = [i for i in live if i < size and a[i] == HASH]
    if not hashes:
        return frozenset(live)
    last = max(hashes)
    kept = sorted(i for i in live if i >= last)
    end = last + 1
    while end < size and a[end] != HASH:
        end += 1
    if end == size or len(kept) < 3:  # the last segment is anchored: offsets do not compare
        return frozenset(kept)
    offsets = [i for i in kept if last < i < end]
    survivors = [
        i
        for i in offsets
        if not any(
            all(a[j + x] == STAR or a[j + x] == a[i + x] for x in range(end - j))
            for j in offsets
            if j > i
        )
    ]
    return frozenset([last, *survivors, *(i for i in kept if i >= end)])


def fresh_word(*patterns: Iterable[str]) -> str:
    """A short word that none of the given word sequences holds (``z``, else ``z0``, ``z1``...)."""
    taken = set().union(*patterns)
    word, n = "z", 0
    while word in taken:
        word, n = f"z{n}", n + 1
    return word


def _escape(a: Words, b: Words) -> Words | None:
    """The shortest key (words; None for the fresh word) that ``b`` matches and ``a`` does not."""
    size, end_b = len(a), len(b)
    # The third part of a state says whether the words read so far are none (0), exactly one
    # empty word (1) or anything else (2): the key "" has no words, so the one-empty-word key
    # cannot be written and must not be offered as a witness.
    start = (0, _prune(a, _closure(a, [0])), 0)
    parent: dict[tuple, tuple | None] = {start: None}
    pending = deque([start])

    def path(state: tuple) -> list:
        words: list = []
        while parent[state] is not None:
            state, word = parent[state]
            if word is not STEP_ONLY:
                words.append(word)
        return words[::-1]

    while pending:
        state = pending.popleft()
        j, live, shape = state
        if j == end_b:
            if size not in live and shape != 1:
                return tuple(path(state))
            continue
        if not live and shape == 2:
            # `a` is dead: any way of finishing `b` escapes it; the shortest skips every '#'.
            rest = [_FRESH if w == STAR else w for w in b[j:] if w != HASH]
            return tuple(path(state) + rest)
        part = b[j]
        if part == HASH:
            moves = [((j + 1, live), STEP_ONLY), ((j, _advance(a, live, _FRESH)), _FRESH)]
        elif part == STAR:
            moves = [((j + 1, _advance(a, live, _FRESH)), _FRESH)]
        else:
            moves = [((j + 1, _advance(a, live, part)), part)]
        for (k, after), word in moves:
            if word is STEP_ONLY:
                nxt = (k, after, shape)
            else:
                nxt = (k, after, 1 if shape == 0 and word == "" else 2)
            if nxt not in parent:
                parent[nxt] = (state, word)
                pending.append(nxt)
        if len(parent) > MAX_STATES:
            raise InclusionTooCostly(".".join(a), ".".join(b), MAX_STATES)
    return None


def _shortest_key(b: Words) -> int:
    """The fewest words of a key that ``b`` matches (the one-empty-word key cannot be written)."""
    fewest = min_words(b)
    if fewest == 1 and HASH in b and [w for w in b if w != HASH] == [""]:
        return 2
    return fewest


def _quick_answer(a: Words, b: Words) -> bool | None:
    """Settle most pairs (normalised words) without a walk: necessary conditions, and the
    patterns whose answer is plain."""
    if HASH not in a:
        if HASH in b or len(a) != len(b):
            return False
        return all(x == STAR or x == y for x, y in zip(a, b))
    if min_words(a) > _shortest_key(b):
        return False
    needed: dict[str, int] = {}
    for word in a:
        if word not in WILDCARDS:
            needed[word] = needed.get(word, 0) + 1
    if not needed:
        # a is wildcards with a '#': it matches every key of at least min_words(a) words.
        return True
    # b's shortest keys hold b's literal words and fresh ones; a's literal words must be there.
    have: dict[str, int] = {}
    for word in b:
        if word in needed:
            have[word] = have.get(word, 0) + 1
    if any(have.get(word, 0) < count for word, count in needed.items()):
        return False
    return None


def _as_key(words: Words, a: Words, b: Words) -> str:
    fresh = fresh_word(a, b)
    return ".".join(fresh if w is _FRESH else w for w in words)


def counterexample(a: str, b: str) -> str | None:
    """A routing key that ``b`` matches and ``a`` does not (the shortest), or None when ``a``
    includes ``b``. Words that neither pattern names are spelled ``z`` (``z0``, ... if taken)."""
    wa, wb = _words(a), _words(b)
    na, nb = normal_words(wa), normal_words(wb)
    if _quick_answer(na, nb) is True:
        return None
    found = _escape(na, nb)
    return None if found is None else _as_key(found, na, nb)


def includes(a: str, b: str) -> bool:
    """True if every routing key that pattern ``b`` matches is matched by pattern ``a``.

    Exact, not a heuristic: when it says False, `counterexample` gives a key that proves it.
    Raises `InvalidPattern` for a bad pattern and `InclusionTooCostly` in the pathological
    case described at `MAX_STATES`.
    """
    return includes_normal(normal_words(_words(a)), normal_words(_words(b)))


def includes_normal(a: Words, b: Words) -> bool:
    """`includes` on pattern words already validated and in normal form (`normal_words`), for
    callers that compare one pattern with many."""
    quick = _quick_answer(a, b)
    return quick if quick is not None else _escape(a, b) is None


def equivalent(a: str, b: str) -> bool:
    """True if the two patterns match exactly the same routing keys."""
    wa, wb = normal_words(_words(a)), normal_words(_words(b))
    return wa == wb or (includes_normal(wa, wb) and includes_normal(wb, wa))


# ------------------------------------------------------------------------- captures


def captures(
    pattern: str, key: str, *, cc_key: bool = False
) -> list[tuple[int, str, Words]] | None:
    """How ``pattern`` matches ``key``: for each wildcard, (its word index, ``*`` or ``#``, the
    key's words it took); None if the pattern does not match.

    Where several readings exist (``#.a.#`` on ``a.a``), each ``#`` takes as few words as it can,
    left to right. ``captures("floor_1.#.temperature", "floor_1.bedroom.temperature")`` is
    ``[(1, "#", ("bedroom",))]``. ``cc_key`` takes a CC/BCC key as `Topology.route` does: of
    any length, its undecodable bytes as surrogate escapes.
    """
    p = _words(pattern)
    k = split_words(key if cc_key and isinstance(key, str) else check_routing_key(key))
    if not pattern_matches(p, k):
        return None
    out: list[tuple[int, str, Words]] = []
    j = 0
    for i, part in enumerate(p):
        rest = p[i + 1 :]
        if part == HASH:
            take = next(n for n in range(len(k) - j + 1) if pattern_matches(rest, k[j + n :]))
            out.append((i, HASH, k[j : j + take]))
            j += take
        else:
            if part == STAR:
                out.append((i, STAR, (k[j],)))
            j += 1
    return out
