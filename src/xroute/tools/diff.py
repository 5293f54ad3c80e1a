"""``diff``, the static part: what changes between two topologies, before any message is routed.

`static_diff` compares an old and a new `Topology` of one virtual host and reports

* bindings added and removed, and bindings *changed*: a binding removed and one added for the
  same source and destination (a pattern replaced, headers arguments edited);
* exchanges added, removed, or whose type or alternate exchange changed;
* queues added, removed, and queues that would receive nothing any more (no publishable
  exchange reaches them, through bindings and alternate exchanges; the default exchange, which
  reaches every queue by its name, is left out, or no queue would ever be starved);
* for topic bindings, how the pattern changed, decided exactly with `xroute.tools.patterns`
  (widened, narrowed, equivalent or different) with a witness key for each direction, and the
  key lengths (in words) that gain or lose.

The traffic part (which of a log's messages go elsewhere) is `xroute.spark.diff`, on Spark.
Everything here is pure: two topologies in, data out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import combinations_with_replacement
from typing import Any

from xroute.core.errors import InclusionTooCostly
from xroute.core.headers import frozen_arguments
from xroute.core.keys import HASH, STAR, split_words
from xroute.core.model import Binding
from xroute.core.topology import ALTERNATE_EXCHANGE, DEFAULT_EXCHANGE, Topology
from xroute.exchanges.headers import X_MATCH
from xroute.tools.explain import Explanation, explain
from xroute.tools.findings import binding_ref, describe_binding
from xroute.tools.patterns import (
    counterexample,
    equivalent,
    fresh_word,
    includes,
    includes_normal,
    normal_words,
)

# Key lengths are checked one by one, exactly, up to the two patterns' lengths plus this
# margin; past it every further word of a key falls under a '#' of both patterns, so the answer
# at the last length checked is taken for all longer ones (tests/test_diff.py checks this
# against brute force on random patterns).
LENGTH_MARGIN = 2
# Checking one length expands each '#' of a pattern into '*'s: a pattern with many '#' and a
# long key has many expansions. Past this many, the lengths are not listed (witnesses still are).
MAX_EXPANSIONS = 5000


@dataclass(frozen=True)
class PatternChange:
    """How a topic pattern changed: ``relation`` is ``widened`` (every key the old one routed,
    and more), ``narrowed``, ``equivalent``, ``different`` (each routes keys the other does not)
    or ``undecided`` (`xroute.core.errors.InclusionTooCostly`). ``gained_key`` is a key routed now and
    not before, ``lost_key`` the reverse; the lengths are those, in words, where such keys exist
    (``open_ended``: and every longer length)."""

    before: str
    after: str
    relation: str
    gained_key: str | None
    lost_key: str | None
    gained_lengths: tuple[int, ...] | None = None
    lost_lengths: tuple[int, ...] | None = None
    gained_open_ended: bool = False
    lost_open_ended: bool = False

    def describe(self) -> str:
        """``'a.*' replaced by 'a.#': widened; now also routes keys of 1 and 3+ words (e.g.
        'a')``."""
        head = f"{self.before!r} replaced by {self.after!r}: {self.relation}"
        parts = []
        if self.gained_key is not None:
            parts.append(
                f"now also routes {_lengths(self.gained_lengths, self.gained_open_ended)}"
                f"(e.g. {self.gained_key!r})"
            )
        if self.lost_key is not None:
            parts.append(
                f"no longer routes {_lengths(self.lost_lengths, self.lost_open_ended)}"
                f"(e.g. {self.lost_key!r})"
            )
        return head + ("; " + "; ".join(parts) if parts else "")

    def to_dict(self) -> dict[str, Any]:
        """As JSON-ready data, with `describe`'s sentence."""
        return {
            "before": self.before,
            "after": self.after,
            "relation": self.relation,
            "gained_key": self.gained_key,
            "lost_key": self.lost_key,
            "gained_lengths": list(self.gained_lengths) if self.gained_lengths is not None else None,
            "gained_open_ended": self.gained_open_ended,
            "lost_lengths": list(self.lost_lengths) if self.lost_lengths is not None else None,
            "lost_open_ended": self.lost_open_ended,
            "description": self.describe(),
        }


@dataclass(frozen=True)
class BindingChange:
    """A binding replaced by another with the same source and destination."""

    exchange_type: str
    before: dict[str, Any]  # binding_ref of the old binding
    after: dict[str, Any]
    pattern: PatternChange | None  # topic exchanges only
    note: str

    def to_dict(self) -> dict[str, Any]:
        """As JSON-ready data."""
        return {
            "exchange_type": self.exchange_type,
            "before": self.before,
            "after": self.after,
            "pattern": self.pattern.to_dict() if self.pattern else None,
            "note": self.note,
        }


@dataclass(frozen=True)
class ExchangeChange:
    """An exchange added or removed, or one of its properties changed: ``what`` is ``added``,
    ``removed``, ``type``, ``alternate-exchange`` or ``internal``."""

    exchange: str
    what: str
    before: Any
    after: Any

    def describe(self) -> str:
        """One line for people."""
        if self.what in ("added", "removed"):
            kind = self.after if self.what == "added" else self.before
            return f"exchange {self.exchange!r} ({kind}) {self.what}"
        return f"exchange {self.exchange!r}: {self.what} {self.before!r} -> {self.after!r}"

    def to_dict(self) -> dict[str, Any]:
        """As JSON-ready data."""
        return {
            "exchange": self.exchange,
            "what": self.what,
            "before": self.before,
            "after": self.after,
            "description": self.describe(),
        }


@dataclass
class StaticDiff:
    """Every difference between two topologies that needs no message to see."""

    bindings_added: list[dict[str, Any]] = field(default_factory=list)
    bindings_removed: list[dict[str, Any]] = field(default_factory=list)
    bindings_changed: list[BindingChange] = field(default_factory=list)
    exchanges: list[ExchangeChange] = field(default_factory=list)
    queues_added: list[str] = field(default_factory=list)
    queues_removed: list[str] = field(default_factory=list)
    queues_starved: list[str] = field(default_factory=list)  # fed before, by nothing now

    @property
    def changed(self) -> bool:
        """True if the topologies differ in anything this diff looks at."""
        return any(
            (
                self.bindings_added,
                self.bindings_removed,
                self.bindings_changed,
                self.exchanges,
                self.queues_added,
                self.queues_removed,
            )
        )

    @property
    def may_lose(self) -> bool:
        """True if some message could lose a queue: a binding, queue or exchange removed, a
        pattern that no longer routes some key, a type or alternate exchange changed, a queue
        starved. (Only the traffic diff says whether a real message does.)"""
        return bool(
            self.bindings_removed
            or self.queues_removed
            or self.queues_starved
            or any(c.what != "added" for c in self.exchanges)
            or any(
                c.pattern is None or c.pattern.lost_key is not None or c.pattern.relation == "undecided"
                for c in self.bindings_changed
            )
        )

    def to_dict(self) -> dict[str, Any]:
        """As JSON-ready data."""
        return {
            "changed": self.changed,
            "may_lose": self.may_lose,
            "bindings_added": self.bindings_added,
            "bindings_removed": self.bindings_removed,
            "bindings_changed": [c.to_dict() for c in self.bindings_changed],
            "exchanges": [c.to_dict() for c in self.exchanges],
            "queues_added": self.queues_added,
            "queues_removed": self.queues_removed,
            "queues_starved": self.queues_starved,
        }

    def lines(self) -> Iterator[str]:
        """The diff as readable lines, most consequential first."""
        for queue in self.queues_starved:
            yield f"queue {queue!r} would receive nothing any more"
        for queue in self.queues_removed:
            yield f"queue {queue!r} removed"
        for change in self.exchanges:
            yield change.describe()
        for change in self.bindings_changed:
            yield f"changed on {change.before['source']!r}: {change.note}"
        for ref in self.bindings_removed:
            yield f"removed from {ref['source']!r}: {describe_binding(ref)}"
        for ref in self.bindings_added:
            yield f"added to {ref['source']!r}: {describe_binding(ref)}"
        for queue in self.queues_added:
            yield f"queue {queue!r} added"


def static_diff(old: Topology, new: Topology) -> StaticDiff:
    """What differs between ``old`` and ``new`` (see the module's docstring)."""
    diff = StaticDiff()
    diff.exchanges = list(_exchange_changes(old, new))
    diff.queues_added = sorted(set(new.queues) - set(old.queues))
    diff.queues_removed = sorted(set(old.queues) - set(new.queues))
    fed_before, fed_after = fed_queues(old), fed_queues(new)
    diff.queues_starved = sorted(q for q in fed_before - fed_after if q in new.queues)
    before = {_identity(b): b for b in old.bindings()}
    after = {_identity(b): b for b in new.bindings()}
    removed = [before[k] for k in before if k not in after]
    added = [after[k] for k in after if k not in before]
    groups: dict[tuple, tuple[list[Binding], list[Binding]]] = defaultdict(lambda: ([], []))
    for binding in removed:
        groups[(binding.source, binding.destination)][0].append(binding)
    for binding in added:
        groups[(binding.source, binding.destination)][1].append(binding)
    for (source, _), (gone, came) in sorted(groups.items(), key=lambda item: repr(item[0])):
        exchange = new.exchanges.get(source) or old.exchanges[source]
        pairs, gone_only, came_only = _pair(exchange.type, gone, came)
        for old_binding, new_binding in pairs:
            diff.bindings_changed.append(_binding_change(exchange.type, old_binding, new_binding))
        diff.bindings_removed += [_with_witness(exchange.type, b) for b in gone_only]
        diff.bindings_added += [_with_witness(exchange.type, b) for b in came_only]
    return diff


# ------------------------------------------------------------------------- exchanges, queues


def _exchange_changes(old: Topology, new: Topology) -> Iterator[ExchangeChange]:
    for name in sorted(set(old.exchanges) | set(new.exchanges)):
        was, now = old.exchanges.get(name), new.exchanges.get(name)
        if was is None:
            yield ExchangeChange(name, "added", None, now.type)
        elif now is None:
            yield ExchangeChange(name, "removed", was.type, None)
        else:
            if was.type != now.type:
                yield ExchangeChange(name, "type", was.type, now.type)
            if was.alternate_exchange != now.alternate_exchange:
                yield ExchangeChange(
                    name, ALTERNATE_EXCHANGE, was.alternate_exchange, now.alternate_exchange
                )
            if was.internal != now.internal:
                yield ExchangeChange(name, "internal", was.internal, now.internal)


def fed_queues(topology: Topology) -> set[str]:
    """The queues some publishable exchange (not internal, not the default one) can reach
    through bindings and alternate exchanges."""
    edges: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for binding in topology.bindings():
        edges[binding.source].add(tuple(binding.destination))
    for exchange in topology.exchanges.values():
        if exchange.alternate_exchange in topology.exchanges:
            edges[exchange.name].add(("exchange", exchange.alternate_exchange))
    start = [
        name
        for name, exchange in topology.exchanges.items()
        if name != DEFAULT_EXCHANGE and not exchange.internal
    ]
    seen, queues = set(start), set()
    while start:
        for kind, name in edges.get(start.pop(), ()):
            if kind == "queue":
                queues.add(name)
            elif name not in seen:
                seen.add(name)
                start.append(name)
    return queues


# ------------------------------------------------------------------------- bindings


def _identity(binding: Binding) -> tuple:
    # As Topology keys its bindings: arguments compared with their types.
    frozen = frozen_arguments(binding.arguments)
    return (binding.source, tuple(binding.destination), binding.routing_key, frozen)


def _pair(
    exchange_type: str, gone: list[Binding], came: list[Binding]
) -> tuple[list[tuple[Binding, Binding]], list[Binding], list[Binding]]:
    """Pair removed with added bindings of one (source, destination): the same key first (the
    arguments changed), then, on topic exchanges, patterns where one includes the other, then
    in order. What is left was purely removed or added."""
    gone, came = list(gone), list(came)
    pairs: list[tuple[Binding, Binding]] = []

    def take(related) -> None:
        for old_binding in list(gone):
            match = next((b for b in came if related(old_binding, b)), None)
            if match is not None:
                pairs.append((old_binding, match))
                gone.remove(old_binding)
                came.remove(match)

    take(lambda a, b: a.routing_key == b.routing_key)
    if exchange_type == "topic":
        take(lambda a, b: _comparable(a.routing_key, b.routing_key))
    take(lambda a, b: True)
    return pairs, gone, came


def _comparable(a: str, b: str) -> bool:
    try:
        return includes(a, b) or includes(b, a)
    except InclusionTooCostly:
        return False


def _binding_change(exchange_type: str, old: Binding, new: Binding) -> BindingChange:
    before, after = binding_ref(old), binding_ref(new)
    if exchange_type == "topic" and old.routing_key != new.routing_key:
        pattern = pattern_change(old.routing_key, new.routing_key)
        return BindingChange(exchange_type, before, after, pattern, f"{pattern.describe()} -> "
                             f"{old.destination.kind} {old.destination.name!r}")
    if old.routing_key != new.routing_key:
        note = (
            f"key {old.routing_key!r} replaced by {new.routing_key!r} -> "
            f"{old.destination.kind} {old.destination.name!r}"
        )
        if exchange_type in ("fanout", "headers"):
            note += f" (a {exchange_type} exchange ignores the key: routing is unchanged)"
        return BindingChange(exchange_type, before, after, None, note)
    note = f"arguments of {describe_binding(before)} now {after['arguments']!r}"
    if exchange_type == "headers":
        was, now = old.arguments.get(X_MATCH, "all"), new.arguments.get(X_MATCH, "all")
        if was != now:
            note = f"x-match {was!r} -> {now!r}; " + note
    return BindingChange(exchange_type, before, after, None, note)


def _with_witness(exchange_type: str, binding: Binding) -> dict[str, Any]:
    ref = binding_ref(binding)
    if exchange_type == "topic":
        ref["witness_key"] = pattern_witness(binding.routing_key)
    return ref


def pattern_witness(pattern: str) -> str:
    """A routing key that ``pattern`` matches: each ``*`` a fresh word, each ``#`` no word."""
    words = split_words(pattern)
    fresh = fresh_word(words)
    return ".".join(fresh if w == STAR else w for w in words if w != HASH)


# ------------------------------------------------------------------------- patterns


def pattern_change(before: str, after: str) -> PatternChange:
    """How topic pattern ``before`` became ``after``, decided exactly (see `PatternChange`)."""
    try:
        if equivalent(before, after):
            return PatternChange(before, after, "equivalent", None, None, (), ())
        gained = counterexample(before, after)  # a key `after` routes and `before` does not
        lost = counterexample(after, before)
    except InclusionTooCostly:
        return PatternChange(before, after, "undecided", None, None)
    relation = {(True, False): "widened", (False, True): "narrowed"}.get(
        (gained is not None, lost is not None), "different"
    )
    gained_lengths, gained_open = _escaping_lengths(before, after) if gained is not None else ((), False)
    lost_lengths, lost_open = _escaping_lengths(after, before) if lost is not None else ((), False)
    return PatternChange(
        before, after, relation, gained, lost, gained_lengths, lost_lengths, gained_open, lost_open
    )


def _escaping_lengths(a: str, b: str) -> tuple[tuple[int, ...] | None, bool]:
    """The key lengths (in words) at which ``b`` matches a key that ``a`` does not, and whether
    every length past the last one checked does too; (None, False) when too costly to list.

    At one length n, ``b``'s keys are those of its expansions with each ``#`` turned into a run
    of ``*`` (of total length n); one escapes ``a`` iff ``a`` does not include it, exactly.
    """
    wa, wb = normal_words(split_words(a)), normal_words(split_words(b))
    fixed = sum(1 for w in wb if w != HASH)
    hashes = sum(1 for w in wb if w == HASH)
    top = checked_up_to(a, b)
    found: list[int] = []
    budget = MAX_EXPANSIONS
    for n in range(fixed, top + 1):
        if hashes == 0 and n > fixed:
            break
        expansions = list(_expansions(wb, n - fixed, hashes, budget))
        if len(expansions) >= budget:
            return None, False
        budget -= len(expansions)
        if n == 1:
            # A key of one empty word is spelled "", which is the key of no words: no such key.
            expansions = [e for e in expansions if e != ("",)]
        if any(_escapes(wa, e) for e in expansions):
            found.append(n)
    open_ended = hashes > 0 and bool(found) and found[-1] == top
    return tuple(found), open_ended


def checked_up_to(a: str, b: str) -> int:
    """The longest key length (in words) checked one by one when comparing ``a`` and ``b``."""
    return len(normal_words(split_words(a))) + len(normal_words(split_words(b))) + LENGTH_MARGIN


def _expansions(words: tuple[str, ...], extra: int, hashes: int, budget: int) -> Iterator[tuple[str, ...]]:
    """Every hash-free form of ``words`` with ``extra`` more words than its non-``#`` words:
    the ``#`` take 0..extra ``*`` each, summing to ``extra``."""
    if hashes == 0:
        if extra == 0:
            yield words
        return
    made = 0
    # Each multiset of '#' indices (with repeats) of size `extra` gives one distribution.
    for picks in combinations_with_replacement(range(hashes), extra):
        counts = [0] * hashes
        for i in picks:
            counts[i] += 1
        out: list[str] = []
        h = 0
        for w in words:
            if w == HASH:
                out.extend([STAR] * counts[h])
                h += 1
            else:
                out.append(w)
        yield tuple(out)
        made += 1
        if made >= budget:
            return


def _escapes(a: tuple[str, ...], expansion: tuple[str, ...]) -> bool:
    return not includes_normal(a, normal_words(expansion))


def _lengths(lengths: tuple[int, ...] | None, open_ended: bool) -> str:
    if not lengths:
        return "keys "
    shown = [str(n) for n in lengths]
    if open_ended:
        # Collapse the run that reaches the last length checked into "N+".
        run = len(lengths) - 1
        while run > 0 and lengths[run - 1] == lengths[run] - 1:
            run -= 1
        shown = [str(n) for n in lengths[:run]] + [f"{lengths[run]}+"]
    text = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    return f"keys of {text} word{'s' if shown != ['1'] else ''} "



# ------------------------------------------------------------------------- one message


def why_changed(
    old: Topology,
    new: Topology,
    exchange: str,
    routing_key: str,
    headers: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Why one message's queues differ between ``old`` and ``new``, `explain`-style: for each
    queue lost, the bindings that delivered it before and what became of them; for each queue
    gained, the bindings that deliver it now and why they did not before. Bad input raises
    what `Topology.route` raises (in either topology)."""
    before = explain(old, exchange, routing_key, headers)
    after = explain(new, exchange, routing_key, headers)
    return {
        "exchange": exchange,
        "routing_key": routing_key,
        "queues_before": sorted(before.queues),
        "queues_after": sorted(after.queues),
        "lost": {
            q: _reasons(q, before, after, new, "lost")
            for q in sorted(before.queues - after.queues)
        },
        "gained": {
            q: _reasons(q, after, before, old, "gained")
            for q in sorted(after.queues - before.queues)
        },
    }


def _reasons(
    queue: str, delivered: Explanation, other: Explanation, other_topology: Topology, how: str
) -> list[str]:
    """Each way ``delivered`` reached ``queue``, and why ``other`` did not go that way."""
    visited = {visit.exchange for visit in other.visits}
    present = {_identity(b) for b in other_topology.bindings()}
    then, now = ("before", "now") if how == "lost" else ("now", "before")
    reasons = []
    for visit in delivered.visits:
        if queue in visit.default_queues:
            reasons.append(f"{then}: the default exchange by the queue's name")
        for match in visit.matched:
            if match.binding.destination != ("queue", queue):
                continue
            shown = f"{visit.exchange!r}: {describe_binding(binding_ref(match.binding))}"
            if visit.via == "alternate":
                shown += f" (as the alternate exchange of {visit.parent!r})"
            if _identity(match.binding) not in present:
                fate = "removed" if how == "lost" else "added"
                reasons.append(f"{then} {shown}; that binding was {fate} ({now} absent)")
            elif visit.exchange not in visited:
                reasons.append(
                    f"{then} {shown}; {now} the message does not reach exchange {visit.exchange!r}"
                )
            else:
                reasons.append(f"{then} {shown}; {now} exchange {visit.exchange!r} routes otherwise")
    return reasons or [f"{then}: reached through an exchange-to-exchange path"]
