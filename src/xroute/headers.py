"""Message headers and binding arguments as Python values: validation, and the typed equality
that the headers exchange uses (integers of any width are equal, ``1`` is not ``1.0`` nor
``True``, ``str`` and ``bytes`` holding the same UTF-8 are equal)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xroute.errors import InvalidHeaders
from xroute.keys import MAX_KEY_BYTES

Canonical = tuple
VOID: Canonical = ("void",)
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # an AMQP long-long


def canonical(value: Any, name: str = "?") -> Canonical:
    """A hashable form of a field value, equal exactly when RabbitMQ's typed comparison is.

    Raises `InvalidHeaders` for a type that an AMQP field table cannot carry.
    """
    kind = type(value)
    if kind is str:
        return ("str", value)
    if kind is bool:
        return ("bool", value)
    if kind is int:
        if not _INT_MIN <= value <= _INT_MAX:
            raise InvalidHeaders(
                f"header {name!r}: integer {value} does not fit in 64 bits", name, value
            )
        return ("int", value)
    if kind is float:
        return ("float", value)
    if value is None:
        return VOID
    if kind is bytes or kind is bytearray:
        try:
            return ("str", bytes(value).decode("utf-8"))
        except UnicodeDecodeError:
            return ("bytes", bytes(value))
    if kind is list or kind is tuple:
        return ("array", tuple(canonical(item, name) for item in value))
    if isinstance(value, Mapping):
        return ("table", tuple(sorted((_field_name(k), canonical(v, k)) for k, v in value.items())))
    raise InvalidHeaders(
        f"header {name!r}: a value of type {kind.__name__} ({value!r:.40}) cannot be carried in "
        "an AMQP table; use str, bytes, int, float, bool, None, list or dict",
        name,
        value,
    )


def _field_name(name: Any) -> str:
    if not isinstance(name, str):
        raise InvalidHeaders(f"header name {name!r} is not text", name)
    if len(name.encode("utf-8", "replace")) > MAX_KEY_BYTES:
        raise InvalidHeaders(f"header name {name[:40]!r}... is longer than 255 bytes", name)
    return name


def check_headers(headers: Any) -> dict[str, Any]:
    """Validate a message's headers (``None`` is an empty table) and return them as a dict."""
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise InvalidHeaders(
            f"headers must be a dict, got {type(headers).__name__} ({headers!r:.40})", None, headers
        )
    for name, value in headers.items():
        canonical(value, _field_name(name))
    return dict(headers)


def sender_selected_keys(headers: Mapping[str, Any], name: str) -> list[str]:
    """The routing keys in a ``CC`` or ``BCC`` header: a list of strings, else `InvalidHeaders`."""
    keys = headers.get(name)
    if keys is None and name not in headers:
        return []
    if not isinstance(keys, (list, tuple)):
        raise InvalidHeaders(
            f"header {name!r} must be a list of strings, got {type(keys).__name__} ({keys!r:.40})",
            name,
            keys,
        )
    out = []
    for key in keys:
        if isinstance(key, (bytes, bytearray)):
            try:
                key = bytes(key).decode("utf-8")
            except UnicodeDecodeError:
                pass
        if not isinstance(key, str):
            raise InvalidHeaders(
                f"header {name!r} must be a list of strings; it holds {key!r} "
                f"({type(key).__name__})",
                name,
                keys,
            )
        out.append(key)
    return out
