"""``lint``: what in a topology is wrong, redundant or expensive, with what to do instead.

`lint_definitions` reads a definitions export the way RabbitMQ imports it, but reports each
binding that RabbitMQ would refuse (an invalid ``x-match``, an unknown destination...) as a
finding instead of failing on the first one; the rest is loaded into a `Topology` and checked
by `lint_topology`. The catalogue of findings is in docs/tools.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from xroute.core.errors import InvalidArguments, InvalidLintInput, XRouteError
from xroute.core.headers import frozen_arguments
from xroute.core.keys import HASH, split_words
from xroute.core.model import Binding
from xroute.core.profiles import NAMES, profile
from xroute.core.topology import DEFAULT_EXCHANGE, STANDARD_EXCHANGES, Topology
from xroute.exchanges import UnsupportedExchange
from xroute.exchanges.headers import X_MATCH, match_mode
from xroute.sources.definitions import pick_vhost, read_definitions, section_entries
from xroute.tools.cost import rank_costs
from xroute.tools.findings import Finding, LintReport, binding_ref, describe_binding, sort_findings
from xroute.tools.patterns import WILDCARDS, normal_words
from xroute.tools.redundancy import Cover, covers

# A topic exchange with this many bindings is "large": the seed article's slowdowns from
# leading '#' patterns show from thousands of bindings; below, any trie walk is cheap.
LARGE_EXCHANGE = 1000
# '#.<id>.#' bindings read as addressing clients by id (seed 004), rather than as a few
# subscriptions to a topic word, when there are at least this many of them and they are a
# tenth of the exchange's bindings or more (or there are CLIENT_ADDRESSING_MANY of them).
CLIENT_ADDRESSING_MIN = 3
CLIENT_ADDRESSING_MANY = 100
# The key of summary.json that fingerprints the topology the pipeline routed with.
FINGERPRINT = "definitions_fingerprint"
_BUILTIN = {DEFAULT_EXCHANGE, *STANDARD_EXCHANGES}
# What the newest profile refuses, which every profile warns of (an export meant for an
# upgrade should know): the most '#' words in a topic binding key (RabbitMQ 4.3.5, #17039)
# and the largest consistent-hash weight (4.3.0, #16118).
NEWEST = profile(NAMES[0])
MAX_HASH_WORDS_43 = NEWEST.max_hash_words
MAX_WEIGHT = NEWEST.chx_max_weight


def lint_definitions(
    source: str | Path | Mapping[str, Any],
    vhost: str | None = None,
    *,
    keys: Mapping[str | None, Sequence[str]] | None = None,
    summary: str | Path | Mapping[str, Any] | None = None,
    large_exchange: int = LARGE_EXCHANGE,
    engine: str = "trie",
    rabbitmq: str | None = None,
) -> LintReport:
    """Lint a RabbitMQ definitions export (a path, JSON text or a parsed dict).

    ``keys`` (`xroute.tools.cost.read_keys`) are real routing keys to measure the topic
    exchanges' cost on; ``summary`` is the pipeline's summary.json, whose bindings with no hits
    are reported as never matched. ``rabbitmq`` is the version profile bindings are checked
    against (a topic key with more than two '#' is refused under "4.3").
    """
    defs = read_definitions(source, vhost)
    chosen = pick_vhost(defs, vhost)
    raw = [e for e in section_entries(defs, "bindings") if e.get("vhost", chosen) == chosen]
    topology = Topology.from_definitions(
        {**defs, "bindings": []}, vhost=chosen, engine=engine, rabbitmq=rabbitmq
    )
    findings = list(_bind_all(topology, raw))
    findings += lint_topology(topology, large_exchange=large_exchange)
    if summary is not None:
        findings += never_matched(summary, topology)
    return LintReport(sort_findings(findings), rank_costs(topology, keys))


def _bind_all(topology: Topology, raw: list[dict[str, Any]]) -> Iterator[Finding]:
    """Bind each raw binding entry, reporting the ones RabbitMQ would refuse and the repeats."""
    seen: dict[tuple, dict[str, Any]] = {}
    for entry in raw:
        ref = binding_ref(entry)
        source, arguments = ref["source"], ref["arguments"]
        exchange = topology.exchanges.get(source) if isinstance(source, str) else None
        if not isinstance(arguments, dict):
            yield _invalid(ref, f"arguments must be an object, got {arguments!r:.60}")
            continue
        if exchange is not None and exchange.type == "headers":
            try:
                match_mode(arguments)
            except InvalidArguments:
                yield Finding(
                    "invalid-x-match",
                    "error",
                    f"x-match {arguments.get(X_MATCH)!r} is not all, any, all-with-x or any-with-x",
                    "RabbitMQ refuses this binding: importing these definitions fails on it, "
                    "and the messages it was meant to select reach nothing",
                    "use x-match 'all' (every criterion must hold) or 'any' (one is enough); "
                    "the '-with-x' forms also compare arguments whose names begin with 'x-'",
                    exchange=source,
                    binding=ref,
                )
                continue
        try:
            topology.bind(
                source,
                ref["destination"],
                ref["routing_key"],
                arguments,
                destination_type=ref["destination_type"],
            )
            identity = (
                source,
                ref["destination_type"],
                ref["destination"],
                ref["routing_key"],
                frozen_arguments(arguments),
            )
        except XRouteError as error:
            yield _invalid(ref, str(error))
            continue
        first = seen.setdefault(identity, ref)
        if first is not ref:
            yield Finding(
                "duplicate-binding",
                "warning",
                "this binding is declared twice",
                "RabbitMQ keeps one binding, so the copy changes nothing, but it often means a "
                "deployment script binds what it meant to bind elsewhere",
                "remove the repeated entry",
                exchange=source,
                binding=ref,
            )


def _invalid(ref: dict[str, Any], reason: str) -> Finding:
    return Finding(
        "invalid-binding",
        "error",
        f"RabbitMQ would refuse this binding: {reason}",
        "importing these definitions fails on it, and the messages it was meant to deliver "
        "reach nothing",
        "correct the binding (declare what it names) or remove it",
        exchange=ref["source"] if isinstance(ref["source"], str) else None,
        binding=ref,
    )


def lint_topology(topology: Topology, *, large_exchange: int = LARGE_EXCHANGE) -> list[Finding]:
    """Every finding about a loaded topology (not those only the raw definitions show)."""
    by_exchange: dict[str, list[Binding]] = {name: [] for name in topology.exchanges}
    bound_queues: set[str] = set()
    for binding in topology.bindings():
        by_exchange[binding.source].append(binding)
        if binding.destination.kind == "queue":
            bound_queues.add(binding.destination.name)
    findings: list[Finding] = []
    for name, exchange in topology.exchanges.items():
        bindings = by_exchange[name]
        alternate = exchange.alternate_exchange
        if alternate is not None and alternate not in topology.exchanges:
            findings.append(
                Finding(
                    "dangling-alternate",
                    "error",
                    f"its alternate-exchange {alternate!r} does not exist",
                    "messages this exchange cannot route are dropped without a trace instead "
                    "of going to the alternate",
                    f"declare exchange {alternate!r}, or correct the name",
                    exchange=name,
                )
            )
        if not bindings and alternate is None and name not in _BUILTIN:
            findings.append(
                Finding(
                    "dead-end-exchange",
                    "warning",
                    "it has no bindings and no alternate exchange",
                    "every message that reaches it is dropped as unroutable",
                    "bind what should receive its messages, give it an alternate-exchange, or "
                    "delete it",
                    exchange=name,
                )
            )
        if type(exchange.kind) is UnsupportedExchange:
            findings.append(
                Finding(
                    "unsupported-exchange-type",
                    "warning",
                    f"its type {exchange.type!r} is not one xroute knows",
                    "xroute loads it and its bindings, but cannot say where a message that "
                    "reaches it goes: routing one there raises UnsupportedExchangeType",
                    "nothing to change in RabbitMQ; expect xroute to refuse the messages that "
                    "reach this exchange",
                    exchange=name,
                )
            )
        if exchange.type == "topic" and bindings:
            findings += _topic_findings(name, bindings, large_exchange)
        if exchange.type == "x-consistent-hash":
            findings += _weight_findings(name, bindings)
        findings += _redundancy_findings(name, exchange.type, bindings)
    for queue in topology.queues:
        if queue not in bound_queues:
            findings.append(
                Finding(
                    "unbound-queue",
                    "info",
                    "no binding leads to it",
                    "it receives only what is published to the default exchange with its name "
                    "as the routing key",
                    "bind it if it should receive routed messages; for a work queue or an RPC "
                    "reply queue this is as intended",
                    queue=queue,
                )
            )
    findings += _cycle_findings(topology)
    return findings


def _weight_findings(name: str, bindings: list[Binding]) -> list[Finding]:
    findings = []
    for binding in bindings:
        try:
            weight = int(binding.routing_key)
        except ValueError:
            continue
        if MAX_WEIGHT is not None and weight > MAX_WEIGHT:
            findings.append(
                Finding(
                    "weight-above-cap",
                    "warning",
                    f"its weight {weight} is above {MAX_WEIGHT}",
                    f"RabbitMQ 4.3 and later refuse a consistent-hash weight above {MAX_WEIGHT} "
                    "(406); before, each unit of weight is a bucket in the ring, and a weight "
                    "this large makes the broker's memory grow with it",
                    f"divide every weight on this exchange by the same factor, so that the "
                    f"largest is at most {MAX_WEIGHT} and the shares stay the same",
                    exchange=name,
                    binding=binding_ref(binding),
                )
            )
    return findings


# ------------------------------------------------------------------------- topic patterns


def _topic_findings(name: str, bindings: list[Binding], large_exchange: int) -> list[Finding]:
    findings = []
    forms = [(b, split_words(b.routing_key)) for b in bindings]
    for binding, words in forms:
        normal = normal_words(words)
        if normal != words:
            dropped_hash = words.count(HASH) > normal.count(HASH)
            findings.append(
                Finding(
                    "non-canonical-pattern",
                    "warning" if dropped_hash else "info",
                    f"{binding.routing_key!r} is written {'.'.join(normal)!r} in normal form",
                    (
                        "a run of '#' matches what one '#' does, but each one multiplies "
                        "RabbitMQ's trie walk (seed 000), and RabbitMQ 4.3.5 and later refuse "
                        "more than two"
                        if dropped_hash
                        else "it matches the same keys; one spelling per meaning makes "
                        "equivalent bindings easy to see"
                    ),
                    f"bind {'.'.join(normal)!r} instead",
                    exchange=name,
                    binding=binding_ref(binding),
                )
            )
        if words.count(HASH) > MAX_HASH_WORDS_43:
            findings.append(
                Finding(
                    "too-many-hash-words",
                    "warning",
                    f"{binding.routing_key!r} has {words.count(HASH)} '#' words",
                    "RabbitMQ 4.3.5 and later refuse a binding key with more than two '#' "
                    "(406), because their trie walk grows exponentially in them",
                    "split the binding into several with at most two '#' each, or route on "
                    "fewer words",
                    exchange=name,
                    binding=binding_ref(binding),
                )
            )
    if not any(w in WILDCARDS for _, words in forms for w in words):
        findings.append(
            Finding(
                "topic-without-wildcards",
                "info",
                f"none of its {len(bindings)} bindings uses '*' or '#'",
                "a direct exchange routes these keys the same way with one lookup instead of a "
                "trie walk (seed 000: the direct exchange beat topic in the MongooseIM test)",
                "declare it as a direct exchange with the same bindings",
                exchange=name,
            )
        )
    clients = [b for b, words in forms if _addresses_a_client(normal_words(words))]
    ids = len({b.routing_key for b in clients})
    addressing = ids >= CLIENT_ADDRESSING_MIN and (
        ids * 10 >= len(bindings) or ids >= CLIENT_ADDRESSING_MANY
    )
    if addressing:
        findings.append(
            Finding(
                "client-addressing",
                "warning",
                f"{len(clients)} bindings of the form '#.<id>.#' address clients by id "
                f"(e.g. {clients[0].routing_key!r})",
                "each one keeps a '#' live over every word of every key routed; seed 004 found "
                "this design too slow to be viable",
                "publish the client ids in one routing key to an x-delimiter exchange "
                "(':client1:client2'), or as CC header keys to a direct exchange, and bind each "
                "client's queue by its plain id",
                exchange=name,
                binding=binding_ref(clients[0]),
                related=tuple(binding_ref(b) for b in clients[1:]),
            )
        )
    if len(bindings) >= large_exchange:
        # Client-addressing patterns have their own finding, with better advice.
        reported = {id(b) for b in clients} if addressing else set()
        leading = [
            b for b, words in forms if normal_words(words)[:1] == (HASH,) and id(b) not in reported
        ]
        if leading:
            findings.append(
                Finding(
                    "leading-hash",
                    "warning",
                    f"{len(leading)} of its {len(bindings)} bindings begin with '#' "
                    f"(e.g. {leading[0].routing_key!r})",
                    "a leading '#' is live from the first word of every key to the last, and "
                    "so is everything below it in the trie: on a large exchange this is the "
                    "expensive case (seeds 000 and 003)",
                    "anchor patterns on their first word where the key format allows "
                    "('floor_1.#.temperature' rather than '#.temperature'), or move catch-all "
                    "subscriptions to a separate exchange",
                    exchange=name,
                    binding=binding_ref(leading[0]),
                    related=tuple(binding_ref(b) for b in leading[1:]),
                )
            )
    return findings


def _addresses_a_client(normal: tuple[str, ...]) -> bool:
    # '#.<id>.#': one literal word with a '#' on each side (seed 004)
    return len(normal) == 3 and normal[0] == normal[2] == HASH and normal[1] not in WILDCARDS


def _redundancy_findings(name: str, exchange_type: str, bindings: list[Binding]) -> list[Finding]:
    by_destination: dict[tuple, list[Binding]] = {}
    for binding in bindings:
        by_destination.setdefault(binding.destination, []).append(binding)
    findings = []
    for group in by_destination.values():
        if len(group) < 2:
            continue
        for found in covers(exchange_type, group):
            covered, by = binding_ref(found.covered), binding_ref(found.by)
            if not isinstance(found, Cover):
                findings.append(
                    Finding(
                        "inclusion-undecided",
                        "info",
                        f"whether {describe_binding(by)} covers it was too costly to decide",
                        "the patterns are a pathological pair for exact inclusion",
                        "simplify the patterns (fewer '*' between literal words)",
                        exchange=name,
                        binding=covered,
                        related=(by,),
                    )
                )
            elif found.equivalent:
                findings.append(
                    Finding(
                        "equivalent-bindings",
                        "warning",
                        f"it matches exactly the messages {describe_binding(by)} matches",
                        "a destination gets one copy of a message however many of its bindings "
                        "match: this one only adds routing work",
                        f"remove it and keep {describe_binding(by)}",
                        exchange=name,
                        binding=covered,
                        related=(by,),
                    )
                )
            else:
                findings.append(
                    Finding(
                        "redundant-binding",
                        "warning",
                        f"every message it matches is matched by {describe_binding(by)}, "
                        "to the same destination",
                        "a destination gets one copy of a message however many of its bindings "
                        "match: this one only adds routing work",
                        "remove it: the destination receives exactly the same messages",
                        exchange=name,
                        binding=covered,
                        related=(by,),
                    )
                )
    return findings


# ------------------------------------------------------------------------- cycles


def _cycle_findings(topology: Topology) -> list[Finding]:
    edges: dict[str, dict[str, str]] = {name: {} for name in topology.exchanges}
    for binding in topology.bindings():
        if binding.destination.kind == "exchange":
            edges[binding.source].setdefault(binding.destination.name, "binding")
    for name, exchange in topology.exchanges.items():
        alternate = exchange.alternate_exchange
        if alternate in topology.exchanges:
            edges[name].setdefault(alternate, "alternate exchange")
    findings = []
    for component in _strong_components(edges):
        start = min(component)
        if len(component) == 1 and start not in edges[start]:
            continue
        path = _cycle_through(start, component, edges)
        hops = " ".join(f"-> ({edges[a][b]}) {b!r}" for a, b in zip(path, path[1:]))
        findings.append(
            Finding(
                "exchange-cycle",
                "warning",
                f"cycle {start!r} {hops}",
                "RabbitMQ visits each exchange once per message, so the loop ends, but the "
                "message is routed again at every exchange of it and the path is hard to "
                "reason about",
                "remove one exchange-to-exchange binding or alternate exchange of the cycle",
                exchange=start,
                related=tuple({"exchange": e} for e in sorted(component)),
            )
        )
    return findings


def _strong_components(edges: dict[str, dict[str, str]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively (deep chains need no recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def _cycle_through(start: str, component: set[str], edges: dict[str, dict[str, str]]) -> list[str]:
    # Breadth-first inside the component, back to `start`: the shortest cycle through it.
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(edges[node]):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if child in component and child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    return [start]


# ------------------------------------------------------------------------- traffic


def _summary_data(source: str | Path | Mapping[str, Any]) -> Any:
    if isinstance(source, Mapping):
        return source
    try:
        return json.loads(Path(source).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidLintInput(f"cannot read summary {str(source)!r}: {error}", source) from None


def read_summary(source: str | Path | Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``bindings`` list of the pipeline's summary.json (each with ``hits``)."""
    data = _summary_data(source)
    bindings = data.get("bindings") if isinstance(data, Mapping) else None
    if not isinstance(bindings, list) or not all(
        isinstance(b, Mapping) and isinstance(b.get("hits"), int) for b in bindings
    ):
        raise InvalidLintInput(
            f"summary {str(source)!r:.80} has no 'bindings' list of objects with integer 'hits'",
            source,
        )
    return [dict(b) for b in bindings]


def topology_fingerprint(topology: Topology) -> str:
    """What identifies a topology, whatever the order of its export: written into the
    pipeline's summary.json, so that a summary is only read against its own topology."""
    exported = topology.to_definitions()
    canonical = {
        name: sorted(json.dumps(e, sort_keys=True, default=str) for e in value)
        if isinstance(value, list)
        else value
        for name, value in exported.items()
    }
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, default=str).encode()).hexdigest()[:24]


def check_summary_topology(
    summary: str | Path | Mapping[str, Any], data: Mapping[str, Any], topology: Topology
) -> None:
    """`InvalidLintInput` unless the summary was made with this topology: by its fingerprint,
    or (a summary written before fingerprints) by every binding it lists being in it."""
    theirs = data.get(FINGERPRINT)
    if theirs is not None:
        if theirs != topology_fingerprint(topology):
            raise InvalidLintInput(
                f"summary {str(summary)!r:.80} was made with another topology (fingerprint "
                f"{theirs}, these definitions {topology_fingerprint(topology)}): lint the "
                "definitions that run routed",
                summary,
            )
        return
    have = {(b.source, b.destination.name, b.routing_key) for b in topology.bindings()}
    for b in data.get("bindings", []):
        if (b.get("source"), b.get("destination"), b.get("routing_key", "")) not in have:
            raise InvalidLintInput(
                f"summary {str(summary)!r:.80} lists a binding these definitions do not have "
                f"({describe_binding(binding_ref(b))} on {b.get('source')!r}): it was made "
                "with another topology; lint the definitions that run routed",
                summary,
            )


def never_matched(
    summary: str | Path | Mapping[str, Any], topology: Topology | None = None
) -> list[Finding]:
    """A finding for each binding of the summary that no message of the traffic matched;
    with ``topology``, a summary of another topology is refused (`check_summary_topology`)."""
    if topology is not None:
        check_summary_topology(summary, _summary_data(summary), topology)
    return [
        Finding(
            "never-matched",
            "info",
            "no message of the pipeline's traffic matched it",
            "a binding real traffic never uses still costs routing work on every message",
            "check that its publishers still exist; remove it if they do not",
            exchange=b.get("source"),
            binding=binding_ref(b),
        )
        for b in read_summary(summary)
        if b["hits"] == 0
    ]


__all__ = [
    "FINGERPRINT",
    "LARGE_EXCHANGE",
    "check_summary_topology",
    "lint_definitions",
    "lint_topology",
    "never_matched",
    "read_summary",
    "topology_fingerprint",
]
