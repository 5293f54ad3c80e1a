"""``explain``: the whole path of one message, as data and as a tree a person can read.

The route itself is the library's: `Topology.route_message` is called with an observer that
records, for each exchange visited, the bindings it matched and how the message got there.
This module only adds the reading of it: which key each binding matched and which words each
``*`` and ``#`` took, which header criteria hit, and, where an exchange matched nothing, the
bindings that nearly did.

Near misses (an exchange that matched nothing, so the message fell through to its alternate or
was dropped there):

* topic, direct, x-delimiter: a binding is a near miss when changing, inserting or removing
  one word of one of the message's keys would make it match ("one word away");
* headers: an ``all`` binding with exactly one criterion unmet, or an ``any`` binding whose
  header is present with another value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.markup import escape
from rich.tree import Tree

from xroute.core.dead_letter import DeadLetter
from xroute.core.headers import VOID, check_headers, sender_selected_keys
from xroute.core.keys import HASH, split_words
from xroute.core.model import Binding, Exchange
from xroute.core.topology import DEFAULT_EXCHANGE, Topology
from xroute.engines.reference import pattern_matches
from xroute.exchanges.direct import delimited_keys
from xroute.exchanges.headers import X_MATCH, comparers, criteria
from xroute.tools.findings import binding_ref, describe_binding
from xroute.tools.patterns import WILDCARDS, captures, fresh_word, min_words

# Per exchange: enough to spot a typo, few enough to read.
MAX_NEAR_MISSES = 10


@dataclass
class Match:
    """A binding that matched, and how: ``how`` is readable text, ``detail`` the same as data."""

    binding: Binding
    how: list[str]
    detail: list[dict[str, Any]]


@dataclass
class NearMiss:
    """A binding of an exchange that matched nothing, which one small change would have matched."""

    binding: Binding
    reason: str


@dataclass
class Visit:
    """One exchange the message went through."""

    exchange: str
    type: str
    via: str  # "published", "binding" or "alternate" (as `Topology.route_message` reports)
    parent: str | None  # the exchange whose binding or alternate led here
    keys: list[str]  # the keys this exchange routed on (x-delimiter: the pieces)
    matched: list[Match] = field(default_factory=list)
    near_misses: list[NearMiss] = field(default_factory=list)
    default_queues: list[str] = field(default_factory=list)  # default exchange: queues by name
    alternate: str | None = None
    alternate_note: str = ""


@dataclass
class Explanation:
    """Where a message went and why: the visits in routing order, and the queues it reached."""

    exchange: str
    routing_key: str
    headers: dict[str, Any]
    keys: list[str]  # the routing key, then the CC and BCC keys
    visits: list[Visit]
    queues: frozenset[str]
    dead_letter: DeadLetter | None = None  # set when this is a dead-lettered copy's path
    cycle_dropped: list[str] = field(default_factory=list)  # queues dropped as a DL cycle
    # Header values whose AMQP type was assumed from a plain Python value where the type
    # changes the route (`type_notes`).
    type_notes: list[str] = field(default_factory=list)

    @property
    def routed(self) -> bool:
        """False if the message reached no queue (it is unroutable)."""
        return bool(self.queues)

    def to_dict(self) -> dict[str, Any]:
        """The explanation as JSON-ready data."""
        return {
            "exchange": self.exchange,
            "routing_key": self.routing_key,
            "keys": self.keys,
            "visits": [
                {
                    "exchange": v.exchange,
                    "type": v.type,
                    "via": v.via,
                    "parent": v.parent,
                    "keys": v.keys,
                    "matched": [
                        {"binding": binding_ref(m.binding), "how": m.how, "detail": m.detail}
                        for m in v.matched
                    ],
                    "near_misses": [
                        {"binding": binding_ref(n.binding), "reason": n.reason}
                        for n in v.near_misses
                    ],
                    "default_queues": v.default_queues,
                    "alternate": v.alternate,
                    "alternate_note": v.alternate_note,
                }
                for v in self.visits
            ],
            "queues": sorted(self.queues),
            "routed": self.routed,
            "type_notes": self.type_notes,
            **(
                {
                    "dead_letter": {
                        "queue": self.dead_letter.queue,
                        "reason": self.dead_letter.reason,
                        "exchange": self.dead_letter.exchange,
                    },
                    "cycle_dropped": self.cycle_dropped,
                }
                if self.dead_letter is not None
                else {}
            ),
        }


def explain(
    topology: Topology,
    exchange: str,
    routing_key: str,
    headers: Mapping[str, Any] | None = None,
    *,
    properties: Mapping[str, Any] | None = None,
) -> Explanation:
    """Route one message with `Topology.route_message` and explain every step of it.

    The queues are exactly what `Topology.route` returns; bad input raises the same typed
    errors it does.
    """
    observed: list[tuple[Exchange, list[Binding], str]] = []

    def observe(visited: Exchange, matched: list[Binding], via: str) -> None:
        observed.append((visited, list(dict.fromkeys(matched)), via))

    queues = topology.route_message(
        exchange, routing_key, headers, observer=observe, properties=properties
    )
    table = check_headers(headers)
    keys = [routing_key, *sender_selected_keys(table, "CC"), *sender_selected_keys(table, "BCC")]
    table.pop("BCC", None)  # as route_message: exchanges never see BCC
    visits: list[Visit] = []
    for visited, matched, via in observed:
        visits.append(_visit(topology, visited, matched, via, keys, table, visits))
    notes = type_notes(dict(check_headers(headers)), [v for v, _, _ in observed], topology)
    return Explanation(exchange, routing_key, table, keys, visits, queues, type_notes=notes)


# ------------------------------------------------------------------------- assumed types

_ASSUMED = {
    bytes: "bytes taken as binary, as pika sends them (py-amqp sends a longstr)",
    bytearray: "bytes taken as binary, as pika sends them (py-amqp sends a longstr)",
    int: "int taken as {kind} (pika's rule; a client may send another width)",
    float: "float taken as double (a client may send a float32)",
}
_SAY_IT = "; say it with a typed value of xroute.core.values"
MAX_TYPE_NOTES = 20  # binding arguments of a large headers exchange: enough to see the point


def type_notes(headers: dict[str, Any], visited: list[Exchange], topology: Topology) -> list[str]:
    """The header values whose AMQP type xroute assumed from a plain Python value (`PIKA`'s
    rule) where the type changes this route: inside arrays and tables on a headers exchange
    (``[short 1]`` is not ``[1]``) and in ``CC``/``BCC`` (only longstr elements are keys);
    at the top, bytes read by a JMS selector (a binary crashes it) or hashed by a consistent
    hash, and numbers hashed with their type (3.x). Typed values (`xroute.core.values`), and
    values whose type no client chooses (str, bool, None...), give no note."""
    kinds = {x.type for x in visited}
    hashed = {
        name: topology.profile.chx_hashes_type_tag
        for x in visited if x.type == "x-consistent-hash" and x.kind.hash_on is not None
        for source, name in [x.kind.hash_on] if source == "header"
    }
    notes = []
    for name, value in headers.items():
        top, tagged = repr(name), hashed.get(name, False)
        for path, item in _plain_scalars(name, value):
            kind = type(item)
            if path != top:
                matters = "headers" in kinds or name in ("CC", "BCC")
            elif kind is bytes or kind is bytearray:
                matters = "x-jms-topic" in kinds or tagged
            else:
                matters = tagged
            if matters:
                notes.append(f"header {path}: {_assumed(item)}{_SAY_IT}")
    # The bindings' side: a definitions export's JSON carries no width either (an integer is
    # read as a client declares it, a signedint; RabbitMQ's own import makes it a long).
    for exchange in visited:
        if exchange.type != "headers":
            continue
        for binding in topology.bindings(exchange.name):
            for name in binding.arguments.keys() & headers.keys():
                for path, item in _plain_scalars(name, binding.arguments[name]):
                    if path != repr(name) and len(notes) < MAX_TYPE_NOTES:
                        notes.append(
                            f"binding of {binding.destination.kind} "
                            f"{binding.destination.name!r} to {exchange.name!r}, argument "
                            f"{path}: {_assumed(item)}{_SAY_IT}"
                        )
    return notes


def _assumed(item: Any) -> str:
    kind = type(item)
    width = "signedint" if kind is int and -(2**31) <= item < 2**31 else "long"
    return _ASSUMED[kind].format(kind=width)


def _plain_scalars(name: str, value: Any) -> list[tuple[str, Any]]:
    """(path, value) of every plain bytes, int or float in a header value, containers walked
    without recursion."""
    found, stack = [], [(repr(name), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend((f"{path}[{k!r}]", v) for k, v in reversed(list(item.items())))
        elif type(item) is list or type(item) is tuple:
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item))))
        elif type(item) in (bytes, bytearray, int, float):
            found.append((path, item))
    return found


def explain_dead_letter(
    topology: Topology,
    queue: str,
    routing_key: str,
    headers: Mapping[str, Any] | None = None,
    reason: str = "rejected",
    *,
    exchange: str = "",
    properties: Mapping[str, Any] | None = None,
) -> Explanation:
    """The path of the copy ``queue`` dead-letters (`Topology.dead_letter`): from its
    dead-letter exchange on, and the queues dropped because they would close a cycle."""
    copy = topology.dead_letter_copy(queue, routing_key, headers, reason, exchange=exchange)
    observed: list[tuple[Exchange, list[Binding], str]] = []

    def observe(visited: Exchange, matched: list[Binding], via: str) -> None:
        observed.append((visited, list(dict.fromkeys(matched)), via))

    queues = topology.route_dead_letter(copy, observe, properties=properties)
    visits: list[Visit] = []
    for visited, matched, via in observed:
        via = "dead-lettered" if via == "published" else via
        visits.append(_visit(topology, visited, matched, via, copy.keys, copy.headers, visits))
    reached = {
        m.binding.destination.name
        for v in visits
        for m in v.matched
        if m.binding.destination.kind == "queue"
    } | {q for v in visits for q in v.default_queues}
    return Explanation(
        copy.exchange or "",
        copy.keys[0],
        copy.headers,
        copy.keys,
        visits,
        queues,
        dead_letter=copy,
        cycle_dropped=sorted(reached - queues),
    )


def _parent(name: str, via: str, earlier: list[Visit]) -> str | None:
    # Each exchange is visited once, from the first earlier visit that sent the message on.
    for visit in earlier:
        if via == "binding" and any(
            m.binding.destination == ("exchange", name) for m in visit.matched
        ):
            return visit.exchange
        if via == "alternate" and visit.alternate == name and not visit.matched:
            return visit.exchange
    return None


def _visit(
    topology: Topology,
    exchange: Exchange,
    matched: list[Binding],
    via: str,
    keys: list[str],
    headers: dict[str, Any],
    earlier: list[Visit],
) -> Visit:
    used = [p for k in keys for p in delimited_keys(k)] if exchange.type == "x-delimiter" else keys
    visit = Visit(exchange.name, exchange.type, via, _parent(exchange.name, via, earlier), used)
    ordered = sorted(matched, key=lambda b: (b.destination, b.routing_key))
    compare = comparers(topology.profile)  # as this profile compares header values
    visit.matched = [Match(b, *_how(exchange.type, b, used, headers, compare)) for b in ordered]
    if exchange.name == DEFAULT_EXCHANGE:
        visit.default_queues = sorted({k for k in keys if k in topology.queues})
    elif not matched:
        bindings = topology.bindings(exchange.name)
        visit.near_misses = _near_misses(bindings, exchange.type, used, headers, compare)
    visit.alternate = exchange.alternate_exchange
    if visit.alternate is not None:
        if matched or visit.default_queues:
            visit.alternate_note = "not used: the exchange's own bindings matched"
        elif visit.alternate not in topology.exchanges:
            visit.alternate_note = "dangling: no such exchange, the message is dropped here"
        elif any(v.exchange == visit.alternate for v in earlier):
            visit.alternate_note = "already visited: not routed again"
        else:
            visit.alternate_note = "followed: nothing matched here"
    return visit


# ------------------------------------------------------------------------- how it matched


def _how(
    exchange_type: str,
    binding: Binding,
    keys: list[str],
    headers: dict[str, Any],
    compare: tuple[Any, Any],
) -> tuple[list[str], list[dict[str, Any]]]:
    if exchange_type == "topic":
        how, detail = [], []
        for key in dict.fromkeys(keys):
            taken = captures(binding.routing_key, key, cc_key=True)
            if taken is None:
                continue
            parts = [f"{w!r} (word {i + 1}) = {'.'.join(ws)!r}" for i, w, ws in taken]
            how.append(f"key {key!r}: " + (", ".join(parts) if parts else "equal, no wildcard"))
            took = [{"word": i + 1, "wildcard": w, "took": list(ws)} for i, w, ws in taken]
            detail.append({"key": key, "captures": took})
        return how, detail
    if exchange_type in ("direct", "x-delimiter"):
        hits = [k for k in dict.fromkeys(keys) if k == binding.routing_key]
        what = "piece" if exchange_type == "x-delimiter" else "key"
        return [f"{what} {k!r} equals the binding key" for k in hits], [{"key": k} for k in hits]
    if exchange_type == "fanout":
        return ["fanout: every binding gets the message"], [{"fanout": True}]
    if exchange_type == "headers":
        return _criteria_report(binding, headers, compare)
    if exchange_type == "x-recent-history":
        return ["recent history: routes as fanout"], [{"fanout": True}]
    if exchange_type == "x-consistent-hash":
        return [f"consistent hash: the message's bucket belongs to weight {binding.routing_key}"], [
            {"weight": binding.routing_key}
        ]
    if exchange_type == "x-modulus-hash":
        return ["modulus hash: phash2 of the routing keys picks this binding"], [{"modulus": True}]
    if exchange_type in ("x-random", "x-local-random"):
        return ["random: one binding picked (xroute picks by message id; RabbitMQ at random)"], [
            {"random": True}
        ]
    if exchange_type == "x-jms-topic":
        selector = binding.arguments.get("rjms_erlang_selector")
        return [f"JMS selector {selector!r} is true for the headers"], [{"selector": selector}]
    return [], []


def _criterion_state(
    name: str, wanted: tuple, headers: dict[str, Any], compare: tuple[Any, Any]
) -> str:
    if name not in headers:
        return "absent"
    if wanted == VOID or compare[0](headers[name], name, compare[1]) == wanted:
        return "hit"
    return "differs"


def _criteria_report(
    binding: Binding, headers: dict[str, Any], compare: tuple[Any, Any]
) -> tuple[list[str], list[dict[str, Any]]]:
    any_mode, wanted = criteria(binding.arguments, compare[0])
    mode = binding.arguments.get(X_MATCH, "all")
    if not wanted:
        text = "matches every message" if not any_mode else "matches no message"
        return [f"x-match {mode} with no criteria: {text}"], [{"x-match": mode, "criteria": []}]
    rows = []
    for name, value in wanted:
        state = _criterion_state(name, value, headers, compare)
        rows.append({"header": name, "wants": _shown(binding.arguments[name]), "state": state})
    text = ", ".join(
        f"{r['header']}{'' if r['wants'] is None else '=' + repr(r['wants'])} ({r['state']})"
        for r in rows
    )
    return [f"x-match {mode}: {text}"], [{"x-match": mode, "criteria": rows}]


def _shown(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return value


# ------------------------------------------------------------------------- near misses


def _near_misses(
    bindings: list[Binding],
    exchange_type: str,
    keys: list[str],
    headers: dict[str, Any],
    compare: tuple[Any, Any],
) -> list[NearMiss]:
    found: list[NearMiss] = []
    for binding in bindings:
        if exchange_type == "headers":
            reason = _headers_near_miss(binding, headers, compare)
        elif exchange_type in ("topic", "direct", "x-delimiter"):
            reason = _key_near_miss(binding.routing_key, exchange_type == "topic", keys)
        else:
            reason = None
        if reason is not None:
            found.append(NearMiss(binding, reason))
            if len(found) == MAX_NEAR_MISSES:
                break
    return found


def _key_near_miss(binding_key: str, is_pattern: bool, keys: list[str]) -> str | None:
    words = split_words(binding_key)
    if is_pattern:
        candidates = list(dict.fromkeys(w for w in words if w not in WILDCARDS))

        def accepts(key_words: tuple[str, ...]) -> bool:
            return pattern_matches(words, key_words)

        fewest = min_words(words)
        most = None if HASH in words else len(words)
    else:
        candidates = list(dict.fromkeys(words))

        def accepts(key_words: tuple[str, ...]) -> bool:
            return key_words == words

        fewest = most = len(words)
    for key in dict.fromkeys(keys):
        key_words = split_words(key)
        size = len(key_words)
        if size + 1 < fewest or (most is not None and size - 1 > most):
            continue
        reason = _one_word_away(key_words, accepts, candidates, is_pattern)
        if reason is not None:
            return f"key {key!r}: {reason}"
    return None


def _one_word_away(
    key: tuple[str, ...],
    accepts: Callable[[tuple[str, ...]], bool],
    candidates: list[str],
    any_word: bool,
) -> str | None:
    # A pattern tells words apart only by its own literal words, so those, and one word it does
    # not name (standing for all others), are the only replacements worth trying.
    for i, word in enumerate(key):
        for other in candidates:
            if other != word and accepts(key[:i] + (other,) + key[i + 1 :]):
                return f"word {i + 1} is {word!r}; the binding wants {other!r}"
    fresh = [(fresh_word(candidates, key), "any word")] if any_word else []
    for i in range(len(key) + 1):
        where = "at the end" if i == len(key) else f"before word {i + 1}"
        for other, label in [(c, repr(c)) for c in candidates] + fresh:
            if accepts(key[:i] + (other,) + key[i:]):
                return f"one more word {where} ({label}) would match"
    for i, word in enumerate(key):
        if accepts(key[:i] + key[i + 1 :]):
            return f"without word {i + 1} ({word!r}) it would match"
    return None


def _headers_near_miss(
    binding: Binding, headers: dict[str, Any], compare: tuple[Any, Any]
) -> str | None:
    try:
        any_mode, wanted = criteria(binding.arguments, compare[0])
    except Exception:  # a binding the topology holds has valid arguments; be safe for display
        return None
    states = [(name, _criterion_state(name, value, headers, compare)) for name, value in wanted]
    if any_mode:
        differ = [name for name, state in states if state == "differs"]
        if differ:
            return f"x-match any: header {differ[0]!r} is present with another value"
        return None
    unmet = [(name, state) for name, state in states if state != "hit"]
    if len(unmet) == 1:
        name, state = unmet[0]
        wants = _shown(binding.arguments[name])
        if state == "absent":
            return f"x-match all: only header {name!r} is missing"
        has = _shown(headers[name])
        return (
            f"x-match all: only header {name!r} differs "
            f"(binding wants {wants!r}, message has {has!r})"
        )
    return None


# ------------------------------------------------------------------------- the tree


def render_tree(explanation: Explanation) -> Tree:
    """The explanation as a `rich.tree.Tree`: exchanges nested where one led to the next."""
    keys = ", ".join(repr(k) for k in explanation.keys)
    root = Tree(
        f"message to exchange [bold]{escape(repr(explanation.exchange))}[/], "
        f"key{'s' if len(explanation.keys) > 1 else ''} {escape(keys)}"
    )
    nodes: dict[str, Tree] = {}
    for visit in explanation.visits:
        parent = nodes.get(visit.parent) if visit.parent is not None else None
        label = _visit_label(visit)
        node = (parent or root).add(label)
        nodes[visit.exchange] = node
        for match in visit.matched:
            shown = describe_binding(binding_ref(match.binding))
            branch = node.add(f"[green]matched[/] {escape(shown)}")
            for line in match.how:
                branch.add(escape(line))
        for queue in visit.default_queues:
            node.add(f"[green]default exchange[/]: queue {escape(repr(queue))} is named by the key")
        if not visit.matched and not visit.default_queues:
            node.add("[yellow]no binding matched[/]")
            for miss in visit.near_misses:
                node.add(
                    f"[yellow]near miss[/] {escape(describe_binding(binding_ref(miss.binding)))}: "
                    f"{escape(miss.reason)}"
                )
        if visit.alternate is not None:
            note = f"alternate exchange {visit.alternate!r}: {visit.alternate_note}"
            node.add(escape(note))
    if explanation.dead_letter is not None:
        copy = explanation.dead_letter
        root.label = (
            f"copy dead-lettered by queue [bold]{escape(repr(copy.queue))}[/] "
            f"({escape(copy.reason)}) to exchange {escape(repr(copy.exchange))}, "
            f"keys {escape(keys)}"
        )
        if copy.exchange is None:
            root.add("[bold red]dropped[/]: the queue has no dead-letter exchange")
        elif copy.exchange not in {v.exchange for v in explanation.visits}:
            root.add("[bold red]dropped[/]: the dead-letter exchange does not exist")
        for queue in explanation.cycle_dropped:
            root.add(f"[yellow]cycle[/]: queue {escape(repr(queue))} dropped (it already "
                     "dead-lettered this message, with no rejection since)")
    for note in explanation.type_notes:
        root.add(f"[yellow]type assumed[/]: {escape(note)}")
    if explanation.queues:
        root.add("[bold green]queues[/]: " + escape(", ".join(sorted(explanation.queues))))
    else:
        root.add("[bold red]unroutable[/]: the message reaches no queue")
    return root


def _visit_label(visit: Visit) -> str:
    how = {
        "published": "published",
        "binding": f"via an exchange-to-exchange binding from {visit.parent!r}",
        "alternate": f"as the alternate exchange of {visit.parent!r}",
        "dead-lettered": "as the dead-letter exchange",
    }.get(visit.via, visit.via)
    name = "(default)" if visit.exchange == DEFAULT_EXCHANGE else repr(visit.exchange)
    keys = ""
    if visit.type == "x-delimiter":
        keys = f"; pieces {', '.join(repr(k) for k in visit.keys)}"
    return f"exchange [bold]{escape(name)}[/] ({visit.type}), {escape(how)}{escape(keys)}"
