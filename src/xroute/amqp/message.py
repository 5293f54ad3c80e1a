"""A published message as the broker holds it: the property bytes as received, the body, and
the few property values the broker reads itself (decoded once, only when present)."""

from __future__ import annotations

import struct
from typing import Any

from xroute.amqp.errors import PRECONDITION_FAILED, SYNTAX_ERROR, AMQPError
from xroute.amqp.frames import FLAGS_READ, decode_properties, property_flags
from xroute.amqp.properties import read_properties

# The properties the broker itself reads, and the ones exchange types route on.
_READ = ("headers", "priority", "expiration", "user_id")
ROUTING_PROPERTIES = ("message_id", "correlation_id", "timestamp")


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
        if property_flags(properties) & FLAGS_READ:
            self._read()

    def _read(self) -> None:
        try:
            found = read_properties(self.properties, _READ)
        except (ValueError, IndexError, struct.error) as error:
            raise AMQPError(SYNTAX_ERROR, f"malformed content header: {error}") from None
        self.headers = found.get("headers") or {}
        self.priority = found.get("priority")
        self.user_id = found.get("user_id")
        if "expiration" in found:
            self.expiration = parse_expiration(found["expiration"])

    def read(self, name: str) -> Any:
        """One property's value as published (None when absent)."""
        return read_properties(self.properties, (name,)).get(name)

    def routing_properties(self) -> dict[str, Any]:
        """The properties exchange types route on (``message_id``, ``correlation_id``,
        ``timestamp``), as `Topology.route` takes them."""
        return read_properties(self.properties, ROUTING_PROPERTIES)

    @property
    def routing_keys(self) -> list[Any]:
        """The routing key, then the CC and BCC keys (RabbitMQ's ``routing_keys``)."""
        keys: list[Any] = [self.routing_key]
        cc = self.headers.get("CC")
        if isinstance(cc, list):
            keys += cc
        return keys + (self.bcc if isinstance(self.bcc, list) else [])

    def decoded(self) -> Any:
        """The properties as pamqp's Basic.Properties (decoded now, for the test view)."""
        return decode_properties(self.properties)

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
