"""Hypothesis strategies shared by the property tests: small vocabularies so that patterns
and keys collide often, with empty words, literal ``*``/``#`` in keys and runs of ``#``."""

from __future__ import annotations

from hypothesis import strategies as st

WORDS = ["a", "b", "c", ""]
pattern_words = st.lists(st.sampled_from(WORDS + ["*", "#", "#", "a*", "##"]), max_size=6)
patterns = pattern_words.map(".".join)
keys = st.lists(st.sampled_from(WORDS + ["d", "*", "#"]), max_size=7).map(".".join)
destinations = st.sampled_from(["q1", "q2", "q3", "q4"])
bindings = st.lists(st.tuples(patterns, destinations), max_size=25)


def binding_sessions(batch_keys: int) -> st.SearchStrategy:
    """Random sessions of up to 40 steps: add a binding, remove the i-th live one
    (`apply_binding_step`), match a key, or match a batch of up to ``batch_keys`` keys."""
    return st.lists(
        st.one_of(
            st.tuples(st.just("add"), patterns, destinations),
            st.tuples(st.just("remove"), st.integers(0, 30)),
            st.tuples(st.just("match"), keys),
            st.tuples(st.just("batch"), st.lists(keys, min_size=1, max_size=batch_keys)),
        ),
        max_size=40,
    )


def apply_binding_step(step: tuple, matchers: list, live: list[tuple[str, str]]) -> None:
    """Carry out one step of a random session on every matcher: ``("add", pattern,
    destination)``, or ``("remove", i)``, which unbinds the i-th live binding (modulo their
    number; nothing if there is none). ``live`` keeps the bindings in order."""
    if step[0] == "add":
        _, pattern, destination = step
        for matcher in matchers:
            matcher.add(pattern, destination)
        if (pattern, destination) not in live:
            live.append((pattern, destination))
    elif step[0] == "remove" and live:
        pattern, destination = live.pop(step[1] % len(live))
        for matcher in matchers:
            matcher.remove(pattern, destination)


def route_topologies(queues: list[str]) -> list:
    """A topology with its route cache, one without, and the reference engine's: each with
    topic exchange ``t``, the ``queues``, and fanout exchange ``e`` bound to queue ``via-e``
    (a wildcard binding to ``e`` makes routes take the full walk)."""
    from xroute import Topology

    made = [Topology(), Topology(route_cache=False), Topology("reference", False)]
    for topology in made:
        topology.declare_exchange("t", "topic")
        topology.declare_exchange("e", "fanout")
        for queue in [*queues, "via-e"]:
            topology.declare_queue(queue)
        topology.bind("e", "via-e")
    return made


def apply_route_step(topologies: list, operation: str, pattern: str, destination: str,
                     arguments: dict | None) -> None:
    """``operation`` (bind or unbind) of ``pattern`` from ``t`` to ``destination`` (exchange
    ``e``, else a queue) on every topology; a refusal is the same on all of them."""
    from xroute.core.errors import XRouteError

    kind = "exchange" if destination == "e" else "queue"
    for topology in topologies:
        try:
            getattr(topology, operation)("t", destination, pattern, arguments, kind)
        except XRouteError:
            pass  # refused alike by all: the routes compared after are


def check_route_steps(queues: list[str], steps: list[tuple], probes: list[str]) -> None:
    """Carry out ``steps`` (`apply_route_step`'s arguments) on `route_topologies`; after
    each, every probe key's route (a first route: a change drops the routes it may change),
    then its cached repeat, and the route without a cache equal the reference's walk."""
    cached, plain, truth = topologies = route_topologies(queues)
    for step in steps:
        apply_route_step(topologies, *step)
        expected = [truth.route("t", key) for key in probes]
        assert [cached.route("t", key) for key in probes] == expected
        assert [cached.route("t", key) for key in probes] == expected  # from the cache
        assert [plain.route("t", key) for key in probes] == expected


# AMQP field values with exact types (xroute.core.values) and plain ones (pika's rule), nested.
def _typed_scalars() -> st.SearchStrategy:
    from datetime import datetime, timezone
    from decimal import Decimal

    from xroute.core import values as v

    return st.one_of(
        st.sampled_from([0, 1, -1, 2**40, 1.5, True, False, "a", "", b"a", b"", None]),
        st.sampled_from([
            v.byte(1), v.unsignedbyte(1), v.short(1), v.unsignedshort(1), v.signedint(1),
            v.unsignedint(1), v.long(1), v.float32(1.5), v.double(1.5), v.longstr(b"a"),
            v.binary(b"a"), v.longstr(b"\xff"), v.timestamp(1), v.timestamp(2**40),
        ]),
        st.sampled_from([datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc),
                         Decimal("1.5"), Decimal("1.50")]),
    )


typed_values = st.recursive(
    st.deferred(_typed_scalars),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
    max_leaves=6,
)
