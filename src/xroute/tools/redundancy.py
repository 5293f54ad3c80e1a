"""Bindings that add nothing: on one exchange, to one destination, a binding whose messages all
reach that destination through another binding anyway (a queue gets one copy however many of
its bindings match).

Decided exactly for every exchange type: topic patterns by `xroute.tools.patterns` inclusion, headers
criteria by the message that meets a binding's criteria and nothing more (routed by the
library's own headers index), direct and x-delimiter by equal keys, fanout always.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from xroute.core.errors import InclusionTooCostly, XRouteError
from xroute.core.headers import VOID
from xroute.core.keys import split_words
from xroute.core.model import Binding
from xroute.exchanges.headers import HeadersExchange, criteria
from xroute.tools.patterns import WILDCARDS, includes_normal, normal_words


@dataclass(frozen=True)
class Cover:
    """``covered`` is made useless by ``by``: ``equivalent`` if each covers the other."""

    covered: Binding
    by: Binding
    equivalent: bool


@dataclass(frozen=True)
class Undecided:
    """A pair whose inclusion was too costly to decide (`InclusionTooCostly`)."""

    covered: Binding
    by: Binding


def covers(exchange_type: str, bindings: list[Binding]) -> Iterator[Cover | Undecided]:
    """For bindings of one exchange to one destination (in declaration order), each binding that
    another one covers, once; of equivalent bindings the first declared is kept."""
    if exchange_type == "topic":
        yield from _topic_covers(bindings)
    elif exchange_type in ("direct", "x-delimiter"):
        first: dict[str, Binding] = {}
        for binding in bindings:
            keeper = first.setdefault(binding.routing_key, binding)
            if keeper is not binding:
                yield Cover(binding, keeper, True)
    elif exchange_type == "fanout":
        for binding in bindings[1:]:
            yield Cover(binding, bindings[0], True)
    elif exchange_type == "headers":
        yield from _headers_covers(bindings)


def _first_cover(
    index: int, bindings: list[Binding], candidates: list[int], includes_pair
) -> Cover | Undecided | None:
    undecided = None
    for other in candidates:
        if other == index:
            continue
        try:
            if not includes_pair(other, index):
                continue
            mutual = includes_pair(index, other)
        except InclusionTooCostly:
            undecided = undecided or Undecided(bindings[index], bindings[other])
            continue
        if mutual and other > index:
            continue  # equivalent to a later binding: that one is reported, this one kept
        return Cover(bindings[index], bindings[other], mutual)
    return undecided


def _topic_covers(bindings: list[Binding]) -> Iterator[Cover | Undecided]:
    # Same normal form: equivalent outright; the first one stands for its group below.
    groups: dict[tuple[str, ...], Binding] = {}
    reps: list[Binding] = []
    words: list[tuple[str, ...]] = []
    for binding in bindings:
        form = normal_words(split_words(binding.routing_key))
        keeper = groups.setdefault(form, binding)
        if keeper is not binding:
            yield Cover(binding, keeper, True)
        else:
            reps.append(binding)
            words.append(form)
    # `a` can include `b` only if every literal word of `a` is in `b`. Each pattern is filed
    # under its rarest literal word, so thousands of bindings to one queue cost each binding a
    # few candidates, not all pairs.
    needs = [frozenset(w for w in form if w not in WILDCARDS) for form in words]
    frequency = Counter(word for need in needs for word in need)
    by_rarest: dict[str, list[int]] = {}
    wildcards_only = []
    for i, need in enumerate(needs):
        if need:
            by_rarest.setdefault(min(need, key=lambda w: (frequency[w], w)), []).append(i)
        else:
            wildcards_only.append(i)

    def includes_pair(a: int, b: int) -> bool:
        return includes_normal(words[a], words[b])

    for i, need in enumerate(needs):
        filed = [j for word in need for j in by_rarest.get(word, ()) if needs[j] <= need]
        found = _first_cover(i, reps, sorted(wildcards_only + filed), includes_pair)
        if found is not None:
            yield found


def _meets_only(binding: Binding) -> list[dict]:
    """The messages that meet ``binding``'s criteria with nothing to spare: every other message
    it matches has more headers, or the same ones."""
    any_mode, wanted = criteria(binding.arguments)
    # A value the binding does not ask for; presence-only criteria get it.
    other = "\x00xroute-other-value"

    def value(name: str, canon: tuple):
        return other if canon == VOID else binding.arguments[name]

    if any_mode:
        return [{name: value(name, canon)} for name, canon in wanted]
    return [{name: value(name, canon) for name, canon in wanted}]


def _headers_covers(bindings: list[Binding]) -> Iterator[Cover]:
    indexes = []
    for binding in bindings:
        index = HeadersExchange()
        index.bind(binding)
        indexes.append(index)
    tight = [_meets_only(b) for b in bindings]

    def includes_pair(a: int, b: int) -> bool:
        # `a` matches every message `b` does iff it matches b's tightest messages: more headers
        # only add hits, and a value b does not fix is best taken as one a does not want.
        try:
            return all(indexes[a].route((), message) for message in tight[b])
        except XRouteError:
            return False

    for i in range(len(bindings)):
        found = _first_cover(i, bindings, range(len(bindings)), includes_pair)
        if found is not None:
            yield found
