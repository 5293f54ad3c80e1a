"""The exchange types that route a message to one of their bindings: x-modulus-hash (by a hash
of the routing keys), x-random and x-local-random (at random).

Each lists its bindings as RabbitMQ's ``rabbit_router:match_routing_key(X, ['_'])`` does: one
entry per binding, so a destination bound twice counts twice (a weight). In 3.x (and 4.0) the
list comes from the ordered route table: by binding key, then destination, then arguments. From
4.3 x-modulus-hash sorts the destinations themselves (Erlang term order: exchanges before
queues, then by name).

RabbitMQ's random pick cannot be replayed. `Topology` asks for the candidates (every binding)
when it wants them; otherwise the pick is made by `RandomChoice`: a generator the caller seeds,
or, by default, deterministically from the message (``phash2`` of its ``message_id``, else of
its routing keys), so that a rerun of the pipeline gives the same output.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xroute.core.errors import InvalidArguments
from xroute.core.keys import check_pattern
from xroute.core.model import Binding, MessageHeaders, properties_of
from xroute.core.profiles import DEFAULT_PROFILE, Profile
from xroute.erlang import Atom, phash2, term_key
from xroute.exchanges.terms import routing_keys, table

PHASH2_RANGE = 2**27


def destination_key(binding: Binding) -> tuple:
    """A destination as RabbitMQ's ``#resource{}`` sorts: kind (exchange < queue), then name."""
    kind, name = binding.destination
    return term_key((Atom(kind), name))


def route_table_key(binding: Binding) -> tuple:
    """A binding's place in RabbitMQ's ordered route table: key, destination, arguments."""
    arguments = sorted(table(binding.arguments), key=lambda field: field[0])
    return (term_key(binding.routing_key), destination_key(binding), term_key(arguments))


class RandomChoice:
    """How `Topology` picks for the random types: ``generator`` if set (`seed`), else from the
    message (deterministic)."""

    def __init__(self) -> None:
        self.generator: random.Random | None = None

    def seed(self, seed: Any = None) -> None:
        """Pick with a `random.Random` seeded with ``seed`` from now on."""
        self.generator = random.Random(seed)

    def index(self, count: int, keys: Sequence[str], headers: Mapping[str, Any]) -> int:
        """Which of ``count`` candidates a message goes to."""
        if self.generator is not None:
            return self.generator.randrange(count)
        message_id = properties_of(headers).get("message_id")
        if message_id is not None:
            return phash2(str(message_id)) % count
        return phash2(routing_keys(list(keys))) % count


class _PickOne:
    """Bindings kept in RabbitMQ's listing order; subclasses say which one a message takes."""

    type_name = ""

    def __init__(self, profile: Profile = DEFAULT_PROFILE) -> None:
        self.profile = profile
        self._bindings: list[Binding] = []
        self._sorted = True

    def validate_binding(self, routing_key: str, arguments: Mapping[str, Any]) -> None:
        check_pattern(routing_key)

    def bind(self, binding: Binding) -> None:
        self._bindings.append(binding)
        self._sorted = False

    def unbind(self, binding: Binding) -> None:
        self._bindings.remove(binding)

    def listed(self) -> list[Binding]:
        """The bindings in the order RabbitMQ lists them."""
        if not self._sorted:
            self._bindings.sort(key=route_table_key)
            self._sorted = True
        return self._bindings


class ModulusHashExchange(_PickOne):
    """x-modulus-hash: binding number ``phash2(RoutingKeys, 2^27) rem N``."""

    type_name = "x-modulus-hash"

    def __init__(self, profile: Profile = DEFAULT_PROFILE) -> None:
        super().__init__(profile)
        self._by_destination: list[Binding] | None = None

    def bind(self, binding: Binding) -> None:
        super().bind(binding)
        self._by_destination = None

    def unbind(self, binding: Binding) -> None:
        super().unbind(binding)
        self._by_destination = None

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        listed = self.listed()
        if not listed:
            return ()
        if self.profile.modulus_sorted:
            if self._by_destination is None:
                self._by_destination = sorted(listed, key=destination_key)
            listed = self._by_destination
        return (listed[phash2(routing_keys(list(keys)), PHASH2_RANGE) % len(listed)],)


class RandomExchange(_PickOne):
    """x-random: one binding at random (all of them as candidates)."""

    type_name = "x-random"

    def __init__(self, choice: RandomChoice, profile: Profile = DEFAULT_PROFILE) -> None:
        super().__init__(profile)
        self.choice = choice

    def candidates(self) -> list[Binding]:
        """The bindings a message may go to."""
        return self.listed()

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        candidates = self.candidates()
        if not candidates:
            return ()
        if type(headers) is MessageHeaders and headers.candidates:
            return candidates
        return (candidates[self.choice.index(len(candidates), keys, headers)],)


class LocalRandomExchange(RandomExchange):
    """x-local-random (RabbitMQ 4.x): a random local queue bound with the empty key. A
    definitions export does not say where queues live: every queue counts as local."""

    type_name = "x-local-random"

    def candidates(self) -> list[Binding]:
        """The queues bound (RabbitMQ finds no local queue behind an exchange binding)."""
        return [b for b in self.listed() if b.destination.kind == "queue"]

    def validate_binding(self, routing_key: str, arguments: Mapping[str, Any]) -> None:
        check_pattern(routing_key)
        if routing_key != "":
            raise InvalidArguments(
                f"x-local-random: non empty binding key {routing_key!r} not permitted"
            )
