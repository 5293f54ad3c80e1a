"""What a test sees of a running broker: queues and their messages, unacked deliveries,
bindings, what was returned or dead-lettered, and waits for an ack or a nack.

Every read is a snapshot taken on the broker's own loop, so it is safe from the test's thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xroute.amqp.vhost import Record
from xroute.core.model import Binding

if TYPE_CHECKING:
    from xroute.amqp.broker import Broker


@dataclass(frozen=True)
class MessageView:
    """A message as it sits in a queue (or was delivered from it)."""

    body: bytes
    exchange: str
    routing_key: str
    headers: dict[str, Any]
    properties: Any  # xroute.amqp.properties.Properties (pamqp's attribute names)
    redelivered: bool


@dataclass(frozen=True)
class QueueView:
    """A queue: its ready messages (in delivery order), unacked count and consumers."""

    name: str
    messages: list[MessageView]
    unacked: int
    consumers: int
    durable: bool
    exclusive: bool
    auto_delete: bool
    arguments: dict[str, Any] = field(default_factory=dict)


def _message(item: Any) -> MessageView:
    message = item.message
    return MessageView(
        message.body,
        message.exchange,
        message.routing_key,
        dict(message.headers),
        message.decoded(),
        item.redelivered,
    )


class BrokerView:
    """The test side of a `Broker` (``broker.view``)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def queues(self) -> dict[str, QueueView]:
        """Every queue by name."""

        def snapshot() -> dict[str, QueueView]:
            return {
                name: QueueView(
                    name,
                    [_message(item) for item in queue.ready],
                    queue.unacked,
                    len(queue.consumers),
                    queue.durable,
                    queue.owner is not None,
                    queue.auto_delete,
                    dict(queue.arguments),
                )
                for name, queue in self._broker.vhost.queues.items()
            }

        return self._broker.call(snapshot)

    def queue(self, name: str) -> QueueView:
        """One queue (KeyError if there is none of that name)."""
        return self.queues()[name]

    def messages(self, queue: str) -> list[bytes]:
        """The bodies of the ready messages of ``queue``, in delivery order."""
        return [message.body for message in self.queue(queue).messages]

    def unacked(self) -> dict[str, list[MessageView]]:
        """Deliveries not yet acked, by queue name."""

        def snapshot() -> dict[str, list[MessageView]]:
            out: dict[str, list[MessageView]] = {}
            for connection in self._broker.connections:
                for channel in connection.channels.values():
                    for entry in channel.unacked.values():
                        out.setdefault(entry.queue.name, []).append(_message(entry.item))
            return out

        return self._broker.call(snapshot)

    def bindings(self, source: str | None = None) -> list[Binding]:
        """Every binding (or those from exchange ``source``)."""
        return self._broker.call(lambda: self._broker.vhost.topology.bindings(source))

    def exchanges(self) -> dict[str, str]:
        """Exchange names and types (the default and ``amq.*`` exchanges included)."""
        return self._broker.call(
            lambda: {n: x.type for n, x in self._broker.vhost.topology.exchanges.items()}
        )

    def records(self, kind: str | None = None) -> list[Record]:
        """What happened so far: "returned", "dead-lettered", "ack" and "nack" records."""
        vhost = self._broker.vhost
        with vhost.changed:
            return [r for r in vhost.records if kind is None or r.kind == kind]

    def returned(self) -> list[Record]:
        """Messages returned to their publisher (mandatory and unroutable)."""
        return self.records("returned")

    def dead_lettered(self) -> list[Record]:
        """Messages dead-lettered, with their reason ("rejected", "expired", "maxlen")."""
        return self.records("dead-lettered")

    def wait_settled(
        self, body: bytes | None = None, *, queue: str | None = None, timeout: float = 5.0
    ) -> Record:
        """Wait until a message (with ``body``, from ``queue``) is acked or nacked; its record
        (``.kind`` "ack" or "nack"). Raises TimeoutError after ``timeout`` seconds."""

        def wanted(record: Record) -> bool:
            return (body is None or record.body == body) and (
                queue is None or record.queue == queue
            )

        return self._broker.wait_for(wanted, timeout, kinds=("ack", "nack"))

    def wait_acked(self, body: bytes | None = None, **kwargs: Any) -> Record:
        """`wait_settled`, requiring an ack (AssertionError if the message was nacked)."""
        record = self.wait_settled(body, **kwargs)
        assert record.kind == "ack", f"message {record.body[:60]!r} was nacked ({record.reason})"
        return record

    def wait_nacked(self, body: bytes | None = None, **kwargs: Any) -> Record:
        """`wait_settled`, requiring a nack or reject (AssertionError if it was acked)."""
        record = self.wait_settled(body, **kwargs)
        assert record.kind == "nack", f"message {record.body[:60]!r} was acked"
        return record
