"""x-recent-history (rabbitmq_recent_history_exchange): routes as fanout, and keeps the last N
messages it routed (``x-recent-history-length``, default 20). A destination bound later
receives them at once: a queue oldest first, an exchange newest first (the plugin's
``add_binding``: ``deliver_messages`` reverses the cached list for a queue; for an exchange it
routes each cached message, newest first, through that exchange). A message with the header
``x-recent-history-no-store`` set to true is routed but not kept.

`Topology.route` stays a pure function of the message: only `Topology.publish` adds to the
history, and `Topology.bind` returns what the new binding receives (`Replay`), or refuses the
binding as the plugin does when a kept message routes nowhere through the bound exchange.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from xroute.core.errors import PreconditionFailed
from xroute.core.model import Binding, Destination
from xroute.core.values import field_type
from xroute.erlang.terms import io_format
from xroute.exchanges.fanout import FanoutExchange

LENGTH = "x-recent-history-length"
NO_STORE = "x-recent-history-no-store"
DEFAULT_LENGTH = 20


@dataclass(frozen=True)
class RecordedMessage:
    """A message as a recent-history exchange keeps it."""

    routing_key: str
    headers: dict[str, Any] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)
    # What the publisher gave `Topology.publish` to be handed back with a replay (the AMQP
    # front's own message: its property bytes and body); the topology never reads it.
    payload: Any = field(default=None, compare=False)


class Replay(NamedTuple):
    """A kept message that a new binding receives at once, and the queues it lands in."""

    message: RecordedMessage
    queues: frozenset[str]


# The integer types the plugin's validate/1 takes (its INTEGER_ARG_TYPES): not the unsigned
# ones, nor a timestamp.
_LENGTH_TYPES = ("byte", "short", "signedint", "long")


def history_length(arguments: Mapping[str, Any]) -> int:
    """The exchange's ``x-recent-history-length``; `PreconditionFailed` as RabbitMQ refuses
    anything but a positive integer of a signed type (``unsignedint(5)`` included)."""
    value = arguments.get(LENGTH, DEFAULT_LENGTH)
    if type(value) is bool or not isinstance(value, int) or value <= 0 or (
        field_type(value) not in _LENGTH_TYPES
    ):
        raise PreconditionFailed(
            f"{LENGTH} must be a positive integer (byte, short, signedint or long), got "
            f"{value!r}; RabbitMQ refuses the declaration (406)"
        ).replying(
            406, f"Invalid argument {io_format(value, False)}, '{LENGTH}' must be a positive "
            "integer"
        )
    return int(value)


class RecentHistoryExchange(FanoutExchange):
    """Fanout routing, and the last messages for the destinations bound later."""

    type_name = "x-recent-history"

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        super().__init__()
        self.history: deque[RecordedMessage] = deque(maxlen=history_length(arguments))

    def record(self, message: RecordedMessage) -> None:
        """Keep a message this exchange routed, unless it asks not to be kept."""
        if message.headers.get(NO_STORE) is not True:
            self.history.append(message)

    def replay(self, destination: Destination) -> list[RecordedMessage]:
        """The kept messages a new binding to ``destination`` receives, in the order the
        plugin delivers them: oldest first to a queue, newest first through an exchange."""
        if destination.kind == "queue":
            return list(self.history)
        return list(reversed(self.history))

    def route(self, keys: Sequence[str], headers: Mapping[str, Any]) -> Iterable[Binding]:
        return super().route(keys, headers)
