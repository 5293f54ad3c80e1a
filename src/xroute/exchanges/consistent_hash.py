"""x-consistent-hash (rabbitmq_consistent_hash_exchange): each message goes to one destination,
picked by a jump consistent hash over a ring of buckets.

- A binding's key is its weight: that many buckets, numbered on from the last one, in the
  order bindings are made (a definitions export's order stands for it).
- A binding to a destination that already has buckets adds none. Removing any binding to a
  destination removes all of its buckets, and the buckets after them move down.
- The value hashed is the first routing key, or the header named by the exchange's
  ``hash-header``, or the property named by ``hash-property`` (``message_id``,
  ``correlation_id``, ``timestamp`` as decimal text). A header is hashed with its AMQP type
  up to 3.12, ``{Type, Value}`` (`xroute.exchanges.terms`: ``{binary, <<>>}`` for ``b""``),
  and as its bare value from 3.13. An integer is the key itself; anything else goes through
  ``erlang:phash2``. The key seeds OTP's ``exs1024`` generator, which
  drives the jump hash (Lamping and Veach) to a bucket.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xroute.core.errors import BrokerCrash, InvalidArguments, PreconditionFailed, short_repr
from xroute.core.keys import check_pattern
from xroute.core.model import Binding, Destination, properties_of
from xroute.core.profiles import DEFAULT_PROFILE, Profile
from xroute.core.values import field_type, longstr
from xroute.erlang import UNDEFINED, Exs1024, phash2
from xroute.erlang.terms import io_format
from xroute.exchanges.terms import binary_or_undefined, plain, routing_keys, timestamp_seconds
from xroute.exchanges.terms import typed as typed_term

HASH_HEADER = "hash-header"
HASH_PROPERTY = "hash-property"
HASHED_PROPERTIES = ("correlation_id", "message_id", "timestamp")
_WEIGHT = re.compile(r"[+-]?[0-9]+")  # what Erlang's list_to_integer reads


def jump_consistent_hash(key: Any, buckets: int) -> int:
    """RabbitMQ's ``jump_consistent_hash(Key, N)``: an integer key seeds ``exs1024`` as is,
    any other term through ``erlang:phash2``."""
    if buckets == 1:
        return 0
    if type(key) is not int:
        key = phash2(key)
    generator = Exs1024((key, key, key))
    b, j = -1, 0
    while j < buckets:
        b = j
        j = int((b + 1) / generator.uniform())
    return b


def weight(routing_key: str, max_weight: int | None) -> int:
    """A binding key's weight; `InvalidArguments` as RabbitMQ refuses the binding."""
    # The replies are the plugin's validate_binding's (binding_invalid: 406).
    if not _WEIGHT.fullmatch(routing_key):
        raise InvalidArguments(
            f"x-consistent-hash: the binding key must be an integer (the weight), got "
            f"{routing_key!r}",
            routing_key,
        ).replying(
            406, f"The binding key must be an integer: {io_format(routing_key, False)}"
        )
    value = int(routing_key)
    if value < 1:
        raise InvalidArguments(
            "x-consistent-hash: the binding key must be greater than 0"
        ).replying(406, "The binding key must be greater than 0")
    if max_weight is not None and value > max_weight:
        raise InvalidArguments(
            f"x-consistent-hash: the weight {value} is above {max_weight}, the most RabbitMQ "
            "4.3 accepts"
        ).replying(406, f"The binding key must not exceed {max_weight}")
    return value


def hash_on(arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    """("header", name), ("property", name) or None (the routing key), from the exchange's
    arguments; `PreconditionFailed` where RabbitMQ refuses the declaration, `BrokerCrash`
    where it fails on it: a ``hash-header`` or ``hash-property`` that is not a longstr (a
    ``bytes`` is a binary, `xroute.core.values`) meets no clause of its ``hash_args``."""
    found = {}
    for name in (HASH_HEADER, HASH_PROPERTY):
        value = arguments.get(name)
        if value is None:
            continue
        if type(value) is longstr:
            value = bytes(value).decode("utf-8", "surrogateescape")
        elif type(value) is not str:
            raise BrokerCrash(
                f"x-consistent-hash: {name} must be a longstr (text), got "
                f"{field_type(value)} {short_repr(value)}; RabbitMQ fails the declaration "
                "(541, the connection closes)",
                value,
            )
        found[name] = value
    if len(found) == 2:
        raise PreconditionFailed(
            "hash-header and hash-property are mutually exclusive (406)"
        ).replying(406, "hash-header and hash-property are mutually exclusive")
    if HASH_PROPERTY in found:
        if found[HASH_PROPERTY] not in HASHED_PROPERTIES:
            raise PreconditionFailed(
                f"Unsupported property: {found[HASH_PROPERTY]} (406)"
            ).replying(406, f"Unsupported property: {found[HASH_PROPERTY]}")
        return "property", found[HASH_PROPERTY]
    if HASH_HEADER in found:
        return "header", found[HASH_HEADER]
    return None


class ConsistentHashExchange:
    """The ring of one x-consistent-hash exchange: bucket number -> the binding that owns it."""

    type_name = "x-consistent-hash"

    def __init__(
        self, name: str, arguments: Mapping[str, Any], profile: Profile = DEFAULT_PROFILE
    ) -> None:
        self.name = name
        self.hash_on = hash_on(arguments)
        self.profile = profile
        self.buckets: dict[int, Binding] = {}
        self._next = 0
        self._owners: dict[Destination, range] = {}  # each destination's buckets

    def validate_binding(self, routing_key: str, arguments: Mapping[str, Any]) -> None:
        check_pattern(routing_key)
        weight(routing_key, self.profile.chx_max_weight)

    def bind(self, binding: Binding) -> None:
        destination = binding.destination
        if destination in self._owners:
            return  # RabbitMQ keeps one set of buckets per destination (seen on 3.10.8 too)
        owned = range(self._next, self._next + weight(binding.routing_key, None))
        for number in owned:
            self.buckets[number] = binding
        self._owners[destination] = owned
        self._next = owned.stop

    def unbind(self, binding: Binding) -> None:
        self._remove(binding.destination)

    def _remove(self, destination: Destination) -> None:
        # As RabbitMQ's ch_hash_ring_delete_fun: every bucket of the destination goes (they are
        # contiguous); those above them move down by as many.
        own = self._owners.pop(destination, None)
        if own is None:
            return
        count = len(own)
        kept = {n: b for n, b in self.buckets.items() if n < own.start}
        kept.update((n - count, b) for n, b in self.buckets.items() if n >= own.stop)
        self.buckets = kept
        self._owners = {
            d: (r if r.start < own.start else range(r.start - count, r.stop - count))
            for d, r in self._owners.items()
        }
        self._next -= count

    def hashed_value(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Any:
        """The Erlang term RabbitMQ hashes for this message."""
        if self.hash_on is None:
            return routing_keys(list(keys[:1]))[0]
        source, name = self.hash_on
        if source == "property":
            properties = properties_of(headers)
            if name == "timestamp":
                seconds = timestamp_seconds(properties.get("timestamp"))
                return UNDEFINED if seconds is None else str(seconds).encode()
            return binary_or_undefined(properties.get(name))
        if name not in headers:
            # table_lookup's (3.x) and maps:get/3's (4.x) answer. (3.13.0 to 3.13.6 crashed
            # on maps:get/2: fixed by rabbitmq-server PR #11808 in 3.13.7 and 4.0.0.)
            return UNDEFINED
        if self.profile.chx_hashes_type_tag:
            return typed_term(headers[name])  # rabbit_misc:table_lookup: {Type, Value}
        return plain(headers[name])  # mc_amqpl:routing_headers: the value alone

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        count = len(self.buckets)
        if not count:
            return ()
        bucket = jump_consistent_hash(self.hashed_value(keys, headers), count)
        found = self.buckets.get(bucket)
        return () if found is None else (found,)
