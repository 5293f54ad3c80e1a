"""kombu channels and transports (memory, Redis) that keep RabbitMQ's broker state through a
`xroute.kombu.broker.Broker` and route every publish with its `Topology`.

kombu's virtual channel keys a binding by (queue, exchange, routing key), keeps exchange types
per connection, bypasses routing on the default exchange and restores unacknowledged messages
by routing them again. These channels replace those parts: declarations, bindings, deletes and
publishes go through the broker (shared by every connection of the process on memory, kept in
Redis on Redis), and every delivery remembers its queue, so that a rejected or unacknowledged
message goes back to that queue, marked redelivered. Message storage, consuming and kombu's
Redis keys stay kombu's.
"""

from __future__ import annotations

import json
import time
import warnings
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import memory as kombu_memory
from kombu.transport import virtual
from kombu.transport.virtual.base import (
    UNDELIVERABLE_FMT,
    Empty,
    UndeliverableWarning,
    queue_declare_ok_t,
)
from kombu.utils.uuid import uuid

from xroute.core.errors import PreconditionFailed
from xroute.kombu.broker import Broker, MemoryBroker
from xroute.kombu.exchange import EXCHANGE_TYPES

# Where a delivered message came from, kept in its raw payload (kombu's restore ignores it).
QUEUE_FIELD = "xroute-queue"


def _received(raw: dict, queue: str) -> dict:
    # Each delivery gets its own tag (kombu gives every copy of a message the publish's tag, so
    # two unacknowledged copies on one channel would collide) and remembers its queue.
    raw[QUEUE_FIELD] = queue
    properties = raw["properties"]
    properties["delivery_tag"] = uuid()
    properties.setdefault("delivery_info", {}).setdefault("redelivered", False)
    return raw


def _requeued(payload: dict) -> dict:
    payload.pop(QUEUE_FIELD, None)
    payload["properties"].setdefault("delivery_info", {})["redelivered"] = True
    return payload


class XRouteChannel:
    """What xroute changes in a kombu virtual channel (mixed in before the transport's class).

    Subclasses give ``_make_broker`` and ``_requeue(payload, queue, front)``.
    """

    exchange_types = {**virtual.Channel.exchange_types, **EXCHANGE_TYPES}
    _xroute_broker: Broker | None = None

    @property
    def broker(self) -> Broker:
        """The broker state this channel declares into and routes with."""
        if self._xroute_broker is None:
            self._xroute_broker = self._make_broker()
        return self._xroute_broker

    def _make_broker(self) -> Broker:
        raise NotImplementedError

    # ----------------------------------------------------------------- declarations

    def exchange_declare(self, exchange: str | None = None, type: str = "direct",
                         durable: bool = False, auto_delete: bool = False,
                         arguments: dict | None = None, nowait: bool = False,
                         passive: bool = False) -> None:
        """Declare an exchange in the shared state (``passive``: only check it exists)."""
        type = type or "direct"
        exchange = exchange or f"amq.{type}"
        if passive:
            if self.broker.exchange_type(exchange) is None:
                raise _not_found("exchange", exchange, "Channel.exchange_declare")
            return
        self.broker.declare_exchange(exchange, type, durable=durable, auto_delete=auto_delete,
                                     arguments=arguments)

    def exchange_delete(self, exchange: str, if_unused: bool = False, nowait: bool = False) -> None:
        """Delete an exchange and its bindings (from it and to it); queues stay."""
        self.broker.delete_exchange(exchange, if_unused=if_unused)

    def queue_declare(self, queue: str | None = None, passive: bool = False, **kwargs: Any) -> Any:
        """Declare a queue in the shared state."""
        queue = queue or f"amq.gen-{uuid()}"
        if passive:
            if not self.broker.has_queue(queue):
                raise _not_found("queue", queue, "Channel.queue_declare")
        else:
            self._new_queue(queue, **kwargs)
            self.broker.declare_queue(queue, auto_delete=bool(kwargs.get("auto_delete")))
        return queue_declare_ok_t(queue, self._size(queue), 0)

    def queue_delete(self, queue: str, if_unused: bool = False, if_empty: bool = False,
                     **kwargs: Any) -> None:
        """Delete a queue, its messages and every binding to it, for every connection
        (``if_empty`` and messages left: `PreconditionFailed`, as RabbitMQ's 406)."""
        if if_empty and self._size(queue):
            raise PreconditionFailed(f"queue {queue!r} not empty (AMQP 406 PRECONDITION_FAILED)")
        self.broker.delete_queue(queue)
        self._drop_messages(queue)

    def _drop_messages(self, queue: str) -> None:
        """Remove the messages of a deleted queue (where the broker's store does not)."""

    def queue_bind(self, queue: str, exchange: str | None = None, routing_key: str = "",
                   arguments: dict | None = None, **kwargs: Any) -> None:
        """Bind ``queue`` to ``exchange``: one binding per (key, arguments), as RabbitMQ."""
        self.broker.bind(exchange or "", queue, routing_key or "", arguments)

    def queue_unbind(self, queue: str, exchange: str | None = None, routing_key: str = "",
                     arguments: dict | None = None, **kwargs: Any) -> None:
        """Remove the binding with exactly these arguments (none such: nothing happens)."""
        self.broker.unbind(exchange or "", queue, routing_key or "", arguments)

    def exchange_bind(self, destination: str, source: str = "", routing_key: str = "",
                      nowait: bool = False, arguments: dict | None = None) -> None:
        """Bind exchange ``destination`` to exchange ``source`` (``Exchange.bind_to``)."""
        self.broker.bind(source, destination, routing_key or "", arguments, "exchange")

    def exchange_unbind(self, destination: str, source: str = "", routing_key: str = "",
                        nowait: bool = False, arguments: dict | None = None) -> None:
        """Remove an exchange-to-exchange binding."""
        self.broker.unbind(source, destination, routing_key or "", arguments, "exchange")

    # ----------------------------------------------------------------- what kombu reads

    def typeof(self, exchange: str, default: str = "direct") -> Any:
        """The exchange type object of ``exchange`` (``default``'s if it is not declared)."""
        kind = self.broker.exchange_type(exchange) or default
        return self.exchange_types.get(kind) or self.exchange_types[default]

    def get_table(self, exchange: str) -> list[tuple]:
        """kombu's rows (routing key, pattern, queue) of the queue bindings of ``exchange``."""
        return [
            (b.routing_key, None, b.destination.name) for b in self.broker.bindings(exchange)
            if b.destination.kind == "queue"
        ]

    def list_bindings(self) -> Any:
        """(queue, exchange, routing key) of every queue binding."""
        return [(b.destination.name, b.source, b.routing_key) for b in self.broker.bindings()
                if b.destination.kind == "queue"]

    # ----------------------------------------------------------------- publishing

    def route(self, exchange: str, routing_key: str, headers: dict | None = None) -> frozenset[str]:
        """The queues a message published to ``exchange`` reaches (`Topology.route`)."""
        return self.broker.route(exchange or "", routing_key or "", headers)

    def basic_publish(self, message: dict, exchange: str, routing_key: str, **kwargs: Any) -> None:
        """Publish: route through the broker's topology (the default exchange too), strip
        ``BCC``, and put one copy on each queue reached."""
        self._inplace_augment_message(message, exchange, routing_key)
        headers = message.get("headers") or {}
        queues = self.route(exchange, routing_key, headers)
        if "BCC" in headers:
            message["headers"] = {k: v for k, v in headers.items() if k != "BCC"}
        if not queues and self.deadletter_queue:
            warnings.warn(UndeliverableWarning(
                UNDELIVERABLE_FMT.format(exchange=exchange, routing_key=routing_key)))
            queues = frozenset([self.deadletter_queue])
        for queue in sorted(queues):
            self._put(queue, message, **kwargs)

    def _lookup(self, exchange: str, routing_key: str, default: str | None = None) -> list[str]:
        """kombu's lookup (for code that still calls it): the queues, else ``default``."""
        default = default or self.deadletter_queue
        found = sorted(self.route(exchange, routing_key))
        return found or ([default] if default else [])

    # ----------------------------------------------------------------- delivering

    def basic_cancel(self, consumer_tag: str) -> Any:
        """Cancel a consumer; an auto-delete queue that this channel no longer consumes is
        deleted (RabbitMQ deletes one when its last consumer goes; consumers on other
        connections are not known here)."""
        queue = self._tag_to_queue.get(consumer_tag)
        result = super().basic_cancel(consumer_tag)  # type: ignore[misc]
        unused = queue is not None and queue not in self._active_queues
        if unused and self.broker.auto_delete(queue):
            self.queue_delete(queue)
        return result

    def close(self) -> None:
        """Close: cancel the consumers first (deleting auto-delete queues while the channel's
        connections are still open), then kombu's close, which requeues unacked messages."""
        if not self.closed:
            for consumer_tag in list(self._consumers):
                self.basic_cancel(consumer_tag)
        super().close()  # type: ignore[misc]

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        """Get one message; it remembers ``queue`` (for a requeue)."""
        try:
            raw = self._get(queue)
        except Empty:
            return None
        message = self.Message(_received(raw, queue), channel=self)
        if not no_ack:
            self.qos.append(message, message.delivery_tag)
        return message

    def _restore(self, message: Any) -> None:
        # RabbitMQ puts a requeued message back where it was: at the head, the next out.
        self._requeue_message(message, front=True)

    def _restore_at_beginning(self, message: Any) -> None:
        self._requeue_message(message, front=True)

    def _requeue_message(self, message: Any, front: bool) -> None:
        queue = message._raw.get(QUEUE_FIELD)
        payload = _requeued(message.serializable())
        if queue is None:  # not delivered through this class: kombu's way, by routing
            info = message.delivery_info
            for name in self._lookup(info["exchange"], info["routing_key"]):
                self._put(name, payload)
        elif self.broker.has_queue(queue):  # a deleted queue's message goes nowhere
            self._requeue(payload, queue, front)

    def _requeue(self, payload: dict, queue: str, front: bool) -> None:
        self._put(queue, payload)


def _not_found(what: str, name: str, method: str) -> ChannelError:
    return ChannelError(f"NOT_FOUND - no {what} {name!r} in vhost '/'", (50, 10), method, "404")


# ----------------------------------------------------------------- memory


class MemoryChannel(XRouteChannel, kombu_memory.Channel):
    """kombu's memory channel with RabbitMQ's broker state (one per process, as kombu's) and
    requeueing: unacknowledged messages go back to their queue when the channel closes."""

    do_restore = True

    def _make_broker(self) -> Broker:
        state = self.connection.state
        broker = getattr(state, "xroute_broker", None)
        if broker is None:
            broker = state.xroute_broker = MemoryBroker()
        return broker

    def _put(self, queue: str, message: dict, **kwargs: Any) -> None:
        # One copy per queue: a delivery marks its own copy (its queue and tag).
        copy = {**message, "properties": {**message["properties"]}}
        copy["properties"]["delivery_info"] = dict(message["properties"].get("delivery_info", {}))
        copy["headers"] = dict(message.get("headers") or {})
        self._queue_for(queue).put(copy)

    def _drop_messages(self, queue: str) -> None:
        self.queues.pop(queue, None)

    def _requeue(self, payload: dict, queue: str, front: bool) -> None:
        if not front:
            return self._put(queue, payload)
        target = self._queue_for(queue)
        with target.mutex:
            target.queue.appendleft(payload)  # memory queues take from the left: next out
            target.not_empty.notify()


class MemoryTransport(kombu_memory.Transport):
    """kombu's memory transport with `MemoryChannel`."""

    Channel = MemoryChannel

    def _deliver(self, message: dict, queue: str) -> None:
        return super()._deliver(_received(message, queue), queue)


# ----------------------------------------------------------------- Redis


def redis_classes() -> tuple[type, type]:
    """The Redis channel and transport classes (made on first use: they need redis-py)."""
    global _REDIS
    if _REDIS is None:
        _REDIS = _make_redis_classes()
    return _REDIS


_REDIS: tuple[type, type] | None = None


def _make_redis_classes() -> tuple[type, type]:
    from kombu.transport import redis as kombu_redis

    from xroute.kombu.redis_broker import RedisBroker

    class RedisQoS(kombu_redis.QoS):
        """kombu's Redis ack emulation, recording each unacknowledged message under its queue
        (as a message for the default exchange: kombu without xroute restores it there too)."""

        def append(self, message: Any, delivery_tag: str) -> None:
            queue = message._raw.get(QUEUE_FIELD)
            if queue is None:
                return super().append(message, delivery_tag)
            with self.pipe_or_acquire() as pipe:
                pipe.zadd(self.unacked_index_key, {delivery_tag: time.time()}).hset(
                    self.unacked_key, delivery_tag, json.dumps([message._raw, "", queue])
                ).execute()
            virtual.QoS.append(self, message, delivery_tag)

    class RedisChannel(XRouteChannel, kombu_redis.Channel):
        """kombu's Redis channel with RabbitMQ's broker state kept in Redis, fanout delivered
        to queues like every other type (not over PUB/SUB), and requeueing to the queue a
        message came from."""

        QoS = RedisQoS
        _fanout_queues: dict = {}  # never filled: every queue is a list, consumed by BRPOP

        def _make_broker(self) -> Broker:
            return RedisBroker(self)

        def _drop_messages(self, queue: str) -> None:
            self.auto_delete_queues.discard(queue)  # the broker deleted the lists

        def _do_restore_message(self, payload: dict, exchange: str, routing_key: str,
                                pipe: Any, leftmost: bool = False) -> None:
            # kombu's, except: back to the recorded queue (the default exchange's key) if it
            # still exists, and no 'redelivered' header added (RabbitMQ adds none).
            payload = _requeued(payload)
            if exchange:  # recorded by kombu without xroute: its way, by routing
                queues = self.route(exchange, routing_key, payload.get("headers"))
            else:
                queues = [routing_key] if self.broker.has_queue(routing_key) else []
            priority = self._get_message_priority(payload, reverse=False)
            for queue in sorted(queues):
                # Back at the head (the right end, next out), as RabbitMQ requeues, for a
                # reject too (kombu puts a rejected message at the tail).
                pipe.rpush(self._q_for_pri(queue, priority), json.dumps(payload))

        def _requeue(self, payload: dict, queue: str, front: bool) -> None:
            with self.conn_or_acquire() as client:
                priority = self._get_message_priority(payload, reverse=False)
                # kombu's lists are taken from the right: the right end is next out.
                (client.rpush if front else client.lpush)(
                    self._q_for_pri(queue, priority), json.dumps(payload))

    class RedisTransport(kombu_redis.Transport):
        """kombu's Redis transport with `RedisChannel`."""

        Channel = RedisChannel

        def _deliver(self, message: dict, queue: str) -> None:
            return super()._deliver(_received(message, queue), queue)

    for cls in (RedisQoS, RedisChannel, RedisTransport):
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
    return RedisChannel, RedisTransport


__all__ = ["QUEUE_FIELD", "MemoryChannel", "MemoryTransport", "XRouteChannel", "redis_classes"]
