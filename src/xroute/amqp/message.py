"""A published message as the broker holds it: the property bytes as received, the body, and
the few property values the broker reads itself (decoded once, only when present)."""

from __future__ import annotations

from typing import Any

from xroute.amqp.errors import PRECONDITION_FAILED, AMQPError
from xroute.amqp.frames import (
    FLAG_EXPIRATION,
    FLAG_HEADERS,
    FLAG_PRIORITY,
    FLAG_USER_ID,
    FLAGS_READ,
    FLAGS_ROUTED_ON,
    property_flags,
)
from xroute.amqp.properties import Properties, decode_properties


class Message:
    """One message: where it was published, its properties (bytes, as received), its body.

    ``routing_keys`` are the key it was published with and its CC and BCC keys, as RabbitMQ
    keeps them for dead-lettering. ``headers`` is the decoded header table (``{}`` if none).
    """

    __slots__ = (
        "exchange",
        "routing_key",
        "properties",
        "body",
        "headers",
        "priority",
        "expiration",
        "user_id",
        "bcc",
        "has_bcc",
        "size",
    )

    def __init__(self, exchange: str, routing_key: str, properties: bytes, body: bytes) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.properties = properties
        self.body = body
        self.headers: dict[str, Any] = {}
        self.priority: int | None = None
        self.expiration: int | None = None  # milliseconds
        self.user_id: str | None = None
        # The BCC header as published (stripped from the properties): its keys route the
        # message too; a BCC that is not an array is refused when the message is routed.
        self.bcc: Any = []
        self.has_bcc = False
        # What the broker holds for it (xroute.amqp.memory), fixed when it arrives.
        self.size = len(properties) + len(body)
        flags = property_flags(properties)
        if flags & FLAGS_READ:
            self._read(decode_properties(properties), flags)

    def _read(self, decoded: Properties, flags: int) -> None:
        if flags & FLAG_HEADERS and decoded.headers:
            self.headers = dict(decoded.headers)
        if flags & FLAG_PRIORITY:
            self.priority = decoded.priority
        if flags & FLAG_USER_ID:
            self.user_id = decoded.user_id
        if flags & FLAG_EXPIRATION:
            self.expiration = parse_expiration(decoded.expiration)

    @property
    def routing_keys(self) -> list[Any]:
        """The routing key, then the CC and BCC keys (RabbitMQ's ``routing_keys``)."""
        keys: list[Any] = [self.routing_key]
        cc = self.headers.get("CC")
        if isinstance(cc, list):
            keys += cc
        return keys + (self.bcc if isinstance(self.bcc, list) else [])

    def decoded(self) -> Properties:
        """The properties, decoded now (`xroute.amqp.properties`)."""
        return decode_properties(self.properties)

    def read(self, name: str) -> Any:
        """One property's value as published (None when absent)."""
        return getattr(self.decoded(), name)

    def routing_properties(self) -> dict[str, Any] | None:
        """The properties exchanges may route on (``message_id``, ``correlation_id``,
        ``timestamp``: consistent hash's ``hash-property``, the random types), or None when
        the message has none of them, so its route may come from the topology's cache."""
        if not property_flags(self.properties) & FLAGS_ROUTED_ON:
            return None
        decoded = self.decoded()
        return {
            name: getattr(decoded, name)
            for name in ("message_id", "correlation_id", "timestamp")
            if getattr(decoded, name) is not None
        }

    def __repr__(self) -> str:
        return f"Message(exchange={self.exchange!r}, routing_key={self.routing_key!r}, body={self.body[:40]!r})"


def parse_expiration(value: Any) -> int:
    """The ``expiration`` property as milliseconds, or RabbitMQ's 406 for a bad one."""
    text = value.decode() if isinstance(value, bytes) else str(value)
    try:
        milliseconds = int(text)
    except ValueError:
        raise AMQPError(PRECONDITION_FAILED, f"invalid expiration '{text}': no_integer") from None
    if milliseconds < 0:
        raise AMQPError(
            PRECONDITION_FAILED, f"invalid expiration '{text}': {{value_negative,{milliseconds}}}"
        )
    return milliseconds


class QueuedMessage:
    """A message in one queue: its position (``seq``), redelivery flag and expiry time."""

    __slots__ = ("message", "seq", "redelivered", "expires_at", "priority")

    def __init__(
        self, message: Message, seq: int, expires_at: float | None, priority: int = 0
    ) -> None:
        self.message = message
        self.seq = seq
        self.redelivered = False
        self.expires_at = expires_at
        self.priority = priority
