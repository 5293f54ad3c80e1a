"""One virtual host of the broker: the `Topology` (routing is its alone), the queues' state,
exclusive owners, auto-delete, dead-lettering, and a record of what tests want to look at."""

from __future__ import annotations

import asyncio
import datetime
import secrets
import threading
from base64 import urlsafe_b64encode
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xroute.amqp.errors import (
    ACCESS_REFUSED,
    PRECONDITION_FAILED,
    AMQPError,
    locked,
    not_found,
)
from xroute.amqp.memory import MemoryWatermark
from xroute.amqp.message import Message, QueuedMessage
from xroute.amqp.properties import rewrite
from xroute.amqp.queues import ARGUMENT_RULES, BrokerQueue, check_queue_arguments
from xroute.amqp.replies import refusal
from xroute.core.dead_letter import dead_letter_settings
from xroute.core.errors import (
    BindingNotFound,
    InvalidHeaders,
    InvalidRoutingKey,
    ReplayFailed,
    UnknownExchange,
    UnknownQueue,
    XRouteError,
)
from xroute.core.profiles import is_3x
from xroute.core.topology import DEFAULT_EXCHANGE, STANDARD_EXCHANGES, Topology
from xroute.core.values import field_type
from xroute.exchanges.recent_history import Replay

# The broker keeps this many returned, dead-lettered and settled records for the test view.
RECORD_LIMIT = 10_000


@dataclass
class Record:
    """Something tests may wait for: a message returned, dead-lettered, acked or nacked."""

    kind: str  # "returned", "dead-lettered", "ack", "nack", "reject"
    queue: str | None
    exchange: str
    routing_key: str
    body: bytes
    headers: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None


def server_name(prefix: str) -> str:
    """A name as RabbitMQ's rabbit_guid makes them: ``amq.gen-`` and 22 URL-safe characters."""
    return prefix + "-" + urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")


class VirtualHost:
    """Exchanges, bindings (a `Topology`) and queues of one virtual host, on one event loop."""

    def __init__(self, name: str = "/", topology: Topology | None = None) -> None:
        self.name = name
        self.topology = topology if topology is not None else Topology()
        self.queues: dict[str, BrokerQueue] = {}
        self.records: list[Record] = []
        self.changed = threading.Condition()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.memory = MemoryWatermark()
        for queue in list(self.topology.queues.values()):
            self.queues[queue.name] = self._new_queue(
                queue.name, queue.durable, queue.auto_delete, None, dict(queue.arguments)
            )

    @property
    def rabbitmq_3x(self) -> bool:
        """True when the topology's profile is a RabbitMQ 3.x one (replies and limits as 3.x)."""
        return is_3x(self.topology.profile)

    def refusal(self, error: XRouteError) -> AMQPError:
        """The reply RabbitMQ (of the topology's profile) gives for what `Topology` refused."""
        return refusal(error, self.name, unicode=not self.rabbitmq_3x)

    # ------------------------------------------------------------------ time

    def now(self) -> float:
        return self.loop.time() if self.loop is not None else 0.0

    def call_at(self, when: float, callback: Callable[[], None]) -> Any:
        if self.loop is None:
            return None
        return self.loop.call_at(when, callback)

    def call_soon(self, callback: Callable[[], None]) -> None:
        if self.loop is None:
            callback()
        else:
            self.loop.call_soon(callback)

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run timers on ``loop`` (queues loaded from definitions start their clocks now)."""
        self.loop = loop
        for queue in self.queues.values():
            queue.touch()

    # ------------------------------------------------------------------ records

    def record(self, item: Record) -> None:
        with self.changed:
            self.records.append(item)
            if len(self.records) > RECORD_LIMIT:
                del self.records[: len(self.records) - RECORD_LIMIT]
            self.changed.notify_all()

    # ------------------------------------------------------------------ exchanges

    def exchange_type(self, name: str) -> str:
        try:
            return self.topology.exchanges[name].type
        except KeyError:
            raise not_found("exchange", name, self.name) from None

    def delete_exchange(self, name: str, if_unused: bool) -> None:
        if name == DEFAULT_EXCHANGE:
            raise AMQPError(ACCESS_REFUSED, "operation not permitted on the default exchange")
        if name not in self.topology.exchanges:
            return  # RabbitMQ: deleting a missing exchange succeeds
        if name in STANDARD_EXCHANGES:
            raise AMQPError(
                ACCESS_REFUSED,
                f"deletion of system exchange '{name}' in vhost '{self.name}' is not allowed",
            )
        if if_unused and self.topology.bindings(name):
            raise AMQPError(PRECONDITION_FAILED, f"exchange '{name}' in vhost '{self.name}' in use")
        sources = {b.source for b in self.topology.bindings() if b.destination == ("exchange", name)}
        self.topology.delete_exchange(name)
        self._auto_delete_exchanges(sources)

    def _auto_delete_exchanges(self, names: set[str]) -> None:
        # An auto-delete exchange goes when its last binding from it goes (RabbitMQ).
        for name in names:
            exchange = self.topology.exchanges.get(name)
            if exchange is not None and exchange.auto_delete and not self.topology.bindings(name):
                self.delete_exchange(name, False)

    def bind(self, source: str, destination: str, key: str, arguments: dict, kind: str) -> None:
        """Bind by `Topology.bind`, and deliver what the new binding receives at once (a
        recent-history exchange's kept messages); when the topology refuses the binding
        after some of them (`ReplayFailed`), those are delivered and the refusal raised."""
        try:
            replays = self.topology.bind(source, destination, key, arguments, kind)
        except ReplayFailed as error:
            self._deliver_replays(error.replayed)
            raise self.refusal(error) from None
        self._deliver_replays(replays)

    def _deliver_replays(self, replays: list[Replay]) -> None:
        for message, queues in replays:
            if isinstance(message.payload, Message):  # kept by this broker, not loaded
                self.enqueue(message.payload, queues)

    def unbind(self, source: str, destination: str, key: str, arguments: dict, kind: str) -> None:
        try:
            self.topology.unbind(source, destination, key, arguments, kind)
        except (BindingNotFound, UnknownExchange, UnknownQueue):
            return  # RabbitMQ: removing a missing binding (or one whose ends are gone) succeeds
        self._auto_delete_exchanges({source})

    # ------------------------------------------------------------------ queues

    def _new_queue(
        self, name: str, durable: bool, auto_delete: bool, owner: Any, arguments: dict
    ) -> BrokerQueue:
        check_queue_arguments(name, self.name, arguments)
        return BrokerQueue(
            self, name, durable=durable, auto_delete=auto_delete, owner=owner, arguments=arguments
        )

    def queue(self, name: str, connection: Any) -> BrokerQueue:
        """The queue ``name`` as ``connection`` may use it: 404 if missing, 405 if exclusive
        to another connection."""
        queue = self.queues.get(name)
        if queue is None:
            raise not_found("queue", name, self.name)
        if queue.owner is not None and queue.owner is not connection:
            raise locked(name, self.name)
        return queue

    def declare_queue(
        self,
        name: str,
        *,
        passive: bool,
        durable: bool,
        exclusive: bool,
        auto_delete: bool,
        arguments: dict[str, Any],
        connection: Any,
    ) -> BrokerQueue:
        if passive:
            return self.queue(name, connection)
        if not name:
            name = server_name("amq.gen")
        elif name.startswith("amq."):
            raise AMQPError(
                ACCESS_REFUSED, f"queue name '{name}' contains reserved prefix 'amq.*'"
            )
        durable = durable and not exclusive
        existing = self.queues.get(name)
        if existing is not None:
            # RabbitMQ's strict check: the owner must be this connection for an exclusive
            # redeclare and none otherwise (the exclusive flag must match).
            if existing.owner is not (connection if exclusive else None):
                raise locked(name, self.name)
            self._check_equivalent(existing, durable, auto_delete, arguments)
            existing.touch()
            return existing
        queue = self._new_queue(
            name, durable, auto_delete, connection if exclusive else None, arguments
        )
        try:
            self.topology.declare_queue(
                name, durable=durable, auto_delete=auto_delete, arguments=arguments
            )
        except XRouteError as error:
            queue.stop_timers()
            raise self.refusal(error) from None
        self.queues[name] = queue
        return queue

    def _check_equivalent(
        self, queue: BrokerQueue, durable: bool, auto_delete: bool, arguments: dict[str, Any]
    ) -> None:
        def differs(what: str, received: Any, current: Any) -> AMQPError:
            return AMQPError(
                PRECONDITION_FAILED,
                f"inequivalent arg '{what}' for queue '{queue.name}' in vhost '{self.name}': "
                f"received '{_show(received)}' but current is '{_show(current)}'",
            )

        if queue.durable != durable:
            raise differs("durable", durable, queue.durable)
        if queue.auto_delete != auto_delete:
            raise differs("auto_delete", auto_delete, queue.auto_delete)
        for key in ARGUMENT_RULES:
            if key == "x-queue-type" and arguments.get(key, "classic") == queue.arguments.get(
                key, "classic"
            ):
                continue
            if arguments.get(key) != queue.arguments.get(key):
                raise differs(key, arguments.get(key), queue.arguments.get(key))

    def delete_queue(
        self, queue: BrokerQueue, *, if_unused: bool = False, if_empty: bool = False
    ) -> int:
        """Delete ``queue``; its consumers are cancelled; returns its ready message count."""
        if if_unused and queue.consumers:
            raise AMQPError(
                PRECONDITION_FAILED, f"queue '{queue.name}' in vhost '{self.name}' in use"
            )
        if if_empty and queue.ready:
            raise AMQPError(
                PRECONDITION_FAILED, f"queue '{queue.name}' in vhost '{self.name}' not empty"
            )
        count = len(queue.ready)
        queue.deleted = True
        queue.stop_timers()
        sources = {
            b.source for b in self.topology.bindings() if b.destination == ("queue", queue.name)
        }
        if self.queues.get(queue.name) is queue:
            del self.queues[queue.name]
            self.topology.delete_queue(queue.name)
        # Consumers hear of it after the reply to the delete (as from RabbitMQ, where the
        # queue process's exit reaches their channels later).
        for consumer in list(queue.consumers):
            self.call_soon(consumer.cancelled_by_broker)
        queue.consumers.clear()
        queue.purge()
        self._auto_delete_exchanges(sources)
        return count

    # ------------------------------------------------------------------ messages

    def route(self, exchange: str, message: Message, keep: bool = True) -> frozenset[str]:
        """The queues ``message`` reaches from ``exchange``, by `Topology`'s routing: with its
        routing properties when a type may read them, kept by the recent-history exchanges
        it passes (unless not ``keep``: a transaction's early check)."""
        topology = self.topology
        headers = message.headers
        if message.has_bcc:
            headers = {**headers, "BCC": message.bcc}
        properties = message.routing_properties() if topology.reads_properties else None
        try:
            if keep and topology.keeps_history:
                return topology.publish(
                    exchange, message.routing_key, headers, properties=properties,
                    payload=message,
                )
            if headers or properties:
                return topology.route(
                    exchange, message.routing_key, headers, properties=properties
                )
            return topology.route(exchange, message.routing_key)
        except InvalidHeaders as error:
            raise AMQPError(PRECONDITION_FAILED, f"invalid message: {_invalid(error)}") from None
        except InvalidRoutingKey as error:
            raise AMQPError(PRECONDITION_FAILED, f"invalid message: {error}") from None
        except XRouteError as error:
            raise self.refusal(error) from None

    def enqueue(self, message: Message, queue_names: frozenset[str]) -> bool:
        """Put ``message`` in each queue; False if any refused it (x-overflow reject-publish)."""
        accepted = True
        for name in queue_names:
            queue = self.queues.get(name)
            if queue is not None and not queue.offer(message):
                accepted = False
        return accepted

    def dead_letter(
        self, queue: BrokerQueue, message: Message, reason: str, item: QueuedMessage | None = None
    ) -> None:
        """Dead-letter ``message`` from ``queue`` (reason rejected, expired or maxlen) as
        `Topology.dead_letter_copy` and `Topology.route_dead_letter` say (x-death, the
        death headers of the profile, the dead-letter exchange and key, cycles dropped);
        the copy keeps every other property byte for byte, less its expiration."""
        topology = self.topology
        if queue.name not in topology.queues:
            return
        headers = message.headers
        if message.has_bcc:
            headers = {**headers, "BCC": message.bcc}
        expiration = message.read("expiration") if message.expiration is not None else None
        try:
            copy = topology.dead_letter_copy(
                queue.name, message.routing_key, headers, reason, exchange=message.exchange,
                time=_now(), expiration=expiration,
            )
        except XRouteError:
            return  # a message the broker routed once always has a valid key and headers
        if copy.exchange is None:
            return  # no dead-letter exchange: dropped
        letter = Message(
            copy.exchange,
            copy.keys[0],
            rewrite(message.properties, {"headers": copy.headers, "expiration": None}),
            message.body,
        )
        _, routing_key = dead_letter_settings(
            topology.queues[queue.name].arguments, topology.policies, queue.name
        )
        if routing_key is None and message.has_bcc:  # the copy keeps the message's keys
            letter.bcc, letter.has_bcc = message.bcc, True
        self.record(
            Record("dead-lettered", queue.name, message.exchange, message.routing_key,
                   message.body, copy.headers, reason)
        )
        properties = message.routing_properties() if topology.reads_properties else None
        try:
            targets = topology.route_dead_letter(copy, properties=properties)
        except XRouteError:
            return  # RabbitMQ drops a dead letter its exchanges cannot route
        self.enqueue(letter, targets)


def _invalid(error: InvalidHeaders) -> str:
    # rabbit_basic:header_routes' reason, as the channel prints it (~p): a CC or BCC header
    # that is not an array.
    if error.name in ("CC", "BCC"):
        return f'{{unacceptable_type_in_header,"{error.name}",{field_type(error.value)}}}'
    return str(error)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return "none" if value is None else str(value)
