"""The headers exchange, indexed by criterion as in OpenAMQ's field matching (seed 001).

Each binding's arguments become criteria: a (name, value) pair, or a name alone when the value
is void (presence only). An index maps each criterion to the bindings that ask for it, so a
message touches only the entries of its own headers and counts hits per binding: an ``all``
binding matches when every criterion is hit, an ``any`` binding when one is. No message scans
every binding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xroute.core.errors import InvalidArguments, XRouteError, short_repr
from xroute.core.headers import VOID, canonical
from xroute.core.model import Binding
from xroute.core.profiles import DEFAULT_PROFILE, Profile
from xroute.core.values import field_type, longstr
from xroute.erlang.terms import io_format

X_MATCH = "x-match"
# x-match value -> (match any criterion?, do x- arguments count as criteria?)
MATCH_MODES = {
    "all": (False, False),
    "any": (True, False),
    "all-with-x": (False, True),
    "any-with-x": (True, True),
}


def match_mode(arguments: Mapping[str, Any]) -> tuple[bool, bool]:
    """(any?, with x-?) for a binding's arguments; `InvalidArguments` for a bad ``x-match``."""
    mode = arguments.get(X_MATCH, "all")
    if type(mode) is longstr:  # a longstr that is not text, or one py-amqp sent as bytes
        mode = bytes(mode).decode("utf-8", "surrogateescape")
    elif type(mode) is not str:
        # bytes too: RabbitMQ takes only a longstr (a client decodes one as str) and answers 406
        # to binary "any". The replies are rabbit_exchange_type_headers:validate_binding's.
        raise InvalidArguments(
            f"invalid x-match {short_repr(mode)} ({type(mode).__name__}); expected text: "
            f"{', '.join(MATCH_MODES)}",
            arguments,
        ).replying(
            406,
            f"Invalid x-match field type {_type_name(mode)} (value {io_format(mode, False)}); "
            "expected longstr",
        )
    try:
        return MATCH_MODES[mode]
    except KeyError:
        raise InvalidArguments(
            f"invalid x-match {mode!r}; expected one of {', '.join(MATCH_MODES)}", arguments
        ).replying(
            406,
            f"Invalid x-match field value {io_format(mode, False)}; expected all, any, "
            "all-with-x, or any-with-x",
        ) from None


def _type_name(value: Any) -> str:
    try:
        return field_type(value)
    except XRouteError:
        return type(value).__name__


def criteria(
    arguments: Mapping[str, Any], canonical_of: Any = canonical
) -> tuple[bool, list[tuple[str, tuple]]]:
    """(any?, criteria) of a binding: (name, canonical value), or (name, VOID) for presence."""
    any_mode, with_x = match_mode(arguments)
    found = [
        (name, canonical_of(value, name))
        for name, value in arguments.items()
        if name != X_MATCH and (with_x or not name.startswith("x-"))
    ]
    return any_mode, found


def canonical_3x(value: Any, name: str = "?", timestamp_unit: int = 1) -> tuple:
    """`canonical` as RabbitMQ up to 3.12 compares a top-level value (``==``): an integral
    float equals the integer (``1.0 == 1``); 3.13 and later tell them apart (``=:=``)."""
    found = canonical(value, name, timestamp_unit)
    if found[0] == "float" and found[1].is_integer():
        return ("int", int(found[1]))
    return found


def comparers(profile: Profile) -> tuple[Any, int]:
    """How ``profile``'s RabbitMQ compares values at the top of a table: (the canonical
    function, `canonical_3x` for ``==`` up to 3.12, `canonical` for ``=:=`` from 3.13; the
    ``timestamp_unit`` of a message's header, 1000 from 3.13, where a timestamp header is its
    milliseconds). A binding argument is ``function(value, name)``, a header
    ``function(value, name, unit)``."""
    of_binding = canonical_3x if profile.int_equals_float_at_top else canonical
    return of_binding, 1000 if profile.timestamp_header_millis else 1


class HeadersExchange:
    """A message goes to the bindings whose criteria its headers meet."""

    type_name = "headers"

    def __init__(self, profile: Profile = DEFAULT_PROFILE) -> None:
        self._canonical, self._timestamp_unit = comparers(profile)
        self._by_value: dict[tuple[str, tuple], set[Binding]] = {}
        # Value criteria per header name: a message's other headers are never canonicalized.
        self._valued: dict[str, int] = {}
        self._by_presence: dict[str, set[Binding]] = {}
        self._needed: dict[Binding, int] = {}  # hits an 'all' binding needs; 1 for 'any'
        self._always: set[Binding] = set()  # 'all' with no criteria matches every message
        self._never: set[Binding] = set()  # 'any' with no criteria matches none

    def validate_binding(self, routing_key: str, arguments: Mapping[str, Any]) -> None:
        criteria(arguments)

    def _entries(self, binding: Binding) -> tuple[bool, list[tuple[dict, Any]]]:
        # (any?, the (index, entry key) pairs that this binding is filed under)
        any_mode, wanted = criteria(binding.arguments, self._canonical)
        entries = [
            (self._by_presence, name) if value == VOID else (self._by_value, (name, value))
            for name, value in wanted
        ]
        return any_mode, entries

    def bind(self, binding: Binding) -> None:
        any_mode, entries = self._entries(binding)
        if not entries:
            (self._never if any_mode else self._always).add(binding)
            return
        for index, key in entries:
            bound = index.setdefault(key, set())
            if index is self._by_value and not bound:
                self._valued[key[0]] = self._valued.get(key[0], 0) + 1
            bound.add(binding)
        self._needed[binding] = 1 if any_mode else len(entries)

    def unbind(self, binding: Binding) -> None:
        any_mode, entries = self._entries(binding)
        self._always.discard(binding)
        self._never.discard(binding)
        self._needed.pop(binding, None)
        for index, key in entries:
            bound = index[key]
            bound.discard(binding)
            if not bound:
                del index[key]
                if index is self._by_value:
                    left = self._valued[key[0]] - 1
                    if left:
                        self._valued[key[0]] = left
                    else:
                        del self._valued[key[0]]

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        hits: dict[Binding, int] = {}
        by_presence, valued, canonical_of = self._by_presence, self._valued, self._canonical
        unit = self._timestamp_unit
        for name, value in headers.items():
            for binding in by_presence.get(name, ()):
                hits[binding] = hits.get(binding, 0) + 1
            if name in valued:
                for binding in self._by_value.get((name, canonical_of(value, name, unit)), ()):
                    hits[binding] = hits.get(binding, 0) + 1
        needed = self._needed
        matched = [binding for binding, count in hits.items() if count >= needed[binding]]
        if self._always:
            matched.extend(self._always)
        return matched
