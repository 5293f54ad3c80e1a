"""A classic queue in memory: ready messages (FIFO, or by priority with ``x-max-priority``),
consumers served round-robin within their prefetch, TTL, ``x-expires``, length limits and
dead-lettering, as RabbitMQ's classic queues behave."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from xroute.amqp.errors import PRECONDITION_FAILED, AMQPError
from xroute.amqp.message import Message, QueuedMessage
from xroute.core.values import field_type

if TYPE_CHECKING:
    from xroute.amqp.channel import Consumer
    from xroute.amqp.vhost import VirtualHost

OVERFLOW_MODES = ("drop-head", "reject-publish", "reject-publish-dlx")
QUEUE_TYPES = ("classic", "quorum")  # quorum queues are served with classic semantics
# Arguments compared on a redeclare (RabbitMQ's declare_args), and what each accepts.
_NON_NEGATIVE = "non-negative"
_POSITIVE = "positive"
ARGUMENT_RULES: dict[str, Any] = {
    "x-message-ttl": _NON_NEGATIVE,
    "x-expires": _POSITIVE,
    "x-max-length": _NON_NEGATIVE,
    "x-max-length-bytes": _NON_NEGATIVE,
    "x-max-priority": _NON_NEGATIVE,
    "x-overflow": OVERFLOW_MODES,
    "x-dead-letter-exchange": str,
    "x-dead-letter-routing-key": str,
    "x-queue-type": QUEUE_TYPES,
    "x-queue-mode": ("default", "lazy"),
    "x-single-active-consumer": bool,
}
MAX_PRIORITY = 255
# rabbit_amqqueue's ?INTEGER_ARG_TYPES: what an integer queue argument may be.
INTEGER_TYPES = frozenset(("byte", "short", "signedint", "long", "unsignedbyte",
                           "unsignedshort", "unsignedint"))


def check_queue_arguments(name: str, vhost: str, arguments: dict[str, Any]) -> None:
    """RabbitMQ's 406 for a queue argument of the wrong type or out of range."""

    def bad(key: str, reason: str) -> AMQPError:
        return AMQPError(
            PRECONDITION_FAILED,
            f"invalid arg '{key}' for queue '{name}' in vhost '{vhost}': {reason}",
        )

    for key, rule in ARGUMENT_RULES.items():
        if key not in arguments:
            continue
        value = arguments[key]
        if rule in (_NON_NEGATIVE, _POSITIVE):
            # rabbit_amqqueue's check_int_arg: any integer width (aiormq sends a small one as
            # a byte), nothing else.
            kind = field_type(value)
            if kind not in INTEGER_TYPES:
                raise bad(key, f'"expected integer, got {kind}"')
            if value < 0:
                raise bad(key, f"{{value_negative,{value}}}")
            if value == 0 and rule == _POSITIVE:
                raise bad(key, "{value_zero,0}")
        elif isinstance(rule, tuple):
            if value not in rule:
                raise bad(key, f"{{invalid_value,{value!r}}}")
        elif not isinstance(value, rule):
            raise bad(key, f"{{unacceptable_type,{type(value).__name__}}}")
    if arguments.get("x-max-priority", 0) > MAX_PRIORITY:
        raise bad("x-max-priority", f"{{value_too_large,{arguments['x-max-priority']},255}}")
    if "x-dead-letter-routing-key" in arguments and "x-dead-letter-exchange" not in arguments:
        raise bad("x-dead-letter-routing-key", "routing key given without a dead letter exchange")


class ReadyMessages:
    """Ready messages in FIFO order; requeued ones go back to their original place."""

    def __init__(self) -> None:
        self._items: deque[QueuedMessage] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[QueuedMessage]:
        return iter(self._items)

    def append(self, item: QueuedMessage) -> None:
        self._items.append(item)

    def peek(self) -> QueuedMessage:
        return self._items[0]

    def popleft(self) -> QueuedMessage:
        return self._items.popleft()

    def requeue(self, items: list[QueuedMessage]) -> None:
        _merge_front(self._items, items)

    def clear(self) -> list[QueuedMessage]:
        items = list(self._items)
        self._items.clear()
        return items


class PriorityMessages(ReadyMessages):
    """Ready messages of a priority queue: highest priority first, FIFO within one."""

    def __init__(self, levels: int) -> None:
        self._levels = [deque() for _ in range(levels + 1)]
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[QueuedMessage]:
        for level in reversed(self._levels):
            yield from level

    def append(self, item: QueuedMessage) -> None:
        self._levels[item.priority].append(item)
        self._count += 1

    def _top(self) -> deque:
        for level in reversed(self._levels):
            if level:
                return level
        raise IndexError("no ready message")

    def peek(self) -> QueuedMessage:
        return self._top()[0]

    def popleft(self) -> QueuedMessage:
        self._count -= 1
        return self._top().popleft()

    def requeue(self, items: list[QueuedMessage]) -> None:
        for level, queue in enumerate(self._levels):
            _merge_front(queue, [item for item in items if item.priority == level])
        self._count += len(items)

    def clear(self) -> list[QueuedMessage]:
        items = list(self)
        for level in self._levels:
            level.clear()
        self._count = 0
        return items


def _merge_front(ready: deque[QueuedMessage], items: list[QueuedMessage]) -> None:
    # Requeued messages were taken from the front; merge them back in publication order.
    if not items:
        return
    last = max(item.seq for item in items)
    front = list(items)
    while ready and ready[0].seq < last:
        front.append(ready.popleft())
    front.sort(key=lambda item: item.seq)
    ready.extendleft(reversed(front))


class BrokerQueue:
    """One queue: its ready messages, its consumers, and the timers of its TTL and expiry."""

    def __init__(
        self,
        vhost: VirtualHost,
        name: str,
        *,
        durable: bool,
        auto_delete: bool,
        owner: Any,
        arguments: dict[str, Any],
    ) -> None:
        self.vhost = vhost
        self.name = name
        self.durable = durable
        self.auto_delete = auto_delete
        self.owner = owner  # the exclusive owner's connection, or None
        self.arguments = arguments
        self.message_ttl: int | None = arguments.get("x-message-ttl")
        self.expires: int | None = arguments.get("x-expires")
        self.max_length: int | None = arguments.get("x-max-length")
        self.max_length_bytes: int | None = arguments.get("x-max-length-bytes")
        self.overflow: str = arguments.get("x-overflow", "drop-head")
        self.dead_letter_exchange: str | None = arguments.get("x-dead-letter-exchange")
        self.dead_letter_routing_key: str | None = arguments.get("x-dead-letter-routing-key")
        self.max_priority: int | None = arguments.get("x-max-priority")
        self.ready: ReadyMessages = (
            PriorityMessages(self.max_priority) if self.max_priority else ReadyMessages()
        )
        self.ready_bytes = 0
        # Whether any message here may expire: queues without TTL never look at the clock.
        self.may_expire = self.message_ttl is not None
        self.consumers: deque[Consumer] = deque()
        self.unacked = 0
        self.had_consumer = False
        self.deleted = False
        self._seq = 0
        self._ttl_timer: Any = None
        self._expiry_timer: Any = None
        self._dispatching = False
        self.touch()

    # ------------------------------------------------------------------ publishing

    def offer(self, message: Message) -> bool:
        """Enqueue ``message``; False when ``x-overflow`` reject-publish refuses it."""
        body_size = len(message.body)
        if self.overflow != "drop-head" and self._full(1, body_size):
            if self.overflow == "reject-publish-dlx":
                self.vhost.dead_letter(self, message, "maxlen")
            return False
        now = self.vhost.now() if self.may_expire or message.expiration is not None else 0.0
        ttl = self.message_ttl
        if message.expiration is not None:
            ttl = message.expiration if ttl is None else min(ttl, message.expiration)
        priority = 0
        if self.max_priority:
            priority = min(message.priority or 0, self.max_priority)
        self._seq += 1
        if ttl is not None:
            self.may_expire = True
        self.ready.append(
            QueuedMessage(message, self._seq, None if ttl is None else now + ttl / 1000, priority)
        )
        self.ready_bytes += body_size
        self.vhost.memory.hold(message.size)
        self.dispatch()
        if self.overflow == "drop-head":
            while self.ready and self._full(0, 0):
                self._drop_head("maxlen")
        self.expire_messages()
        return True

    def _full(self, extra: int, extra_bytes: int) -> bool:
        if self.max_length is not None and len(self.ready) + extra > self.max_length:
            return True
        limit = self.max_length_bytes
        return limit is not None and self.ready_bytes + extra_bytes > limit

    def _drop_head(self, reason: str) -> None:
        item = self._take()
        self.vhost.dead_letter(self, item.message, reason, item)

    def _take(self) -> QueuedMessage:
        item = self.ready.popleft()
        self.ready_bytes -= len(item.message.body)
        self.vhost.memory.release(item.message.size)
        return item

    # ------------------------------------------------------------------ consuming

    def dispatch(self) -> None:
        """Give ready messages to consumers with credit, round-robin, until either runs out."""
        if self._dispatching or self.deleted:
            return
        self._dispatching = True
        try:
            consumers = self.consumers
            while self.ready and consumers:
                self._expire_head()
                if not self.ready:
                    break
                for _ in range(len(consumers)):
                    consumer = consumers[0]
                    consumers.rotate(-1)
                    if consumer.has_credit():
                        consumer.deliver(self._take())
                        break
                else:
                    break
        finally:
            self._dispatching = False

    def get(self) -> QueuedMessage | None:
        """The next ready message for basic.get, or None."""
        self.touch()
        self._expire_head()
        return self._take() if self.ready else None

    def requeue(self, items: list[QueuedMessage]) -> None:
        """Put delivered messages back in their places, marked redelivered."""
        if self.deleted:
            return
        memory = self.vhost.memory
        for item in items:
            item.redelivered = True
            self.ready_bytes += len(item.message.body)
            memory.hold(item.message.size)
        self.ready.requeue(items)
        self.dispatch()
        self.expire_messages()

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.had_consumer = True
        self.touch()
        self.dispatch()

    def remove_consumer(self, consumer: Consumer) -> None:
        """Remove ``consumer``; an auto-delete queue goes with its last consumer."""
        try:
            self.consumers.remove(consumer)
        except ValueError:
            return
        self.touch()
        if self.auto_delete and not self.consumers and not self.deleted:
            self.vhost.delete_queue(self)

    def purge(self) -> int:
        """Drop every ready message; how many there were."""
        items = self._clear()
        return len(items)

    def _clear(self) -> list[QueuedMessage]:
        items = self.ready.clear()
        self.ready_bytes = 0
        self.vhost.memory.release(sum(item.message.size for item in items))
        return items

    # ------------------------------------------------------------------ time

    def _expire_head(self) -> None:
        if not self.may_expire:
            return
        now = self.vhost.now()
        while self.ready:
            head = self.ready.peek()
            if head.expires_at is None or head.expires_at > now:
                return
            self._drop_head("expired")

    def expire_messages(self) -> None:
        """Drop (or dead-letter) expired messages at the head, and wake up for the next one.

        As in RabbitMQ's classic queues, only the head expires: a message with a short
        per-message TTL behind one with a long TTL waits its turn."""
        if not self.may_expire:
            return
        self._expire_head()
        if self._ttl_timer is not None:
            self._ttl_timer.cancel()
            self._ttl_timer = None
        if self.ready and not self.deleted:
            head = self.ready.peek()
            if head.expires_at is not None:
                self._ttl_timer = self.vhost.call_at(head.expires_at, self.expire_messages)

    def touch(self) -> None:
        """Restart the ``x-expires`` clock (a declare, a get, a consumer coming or going)."""
        if self.expires is None or self.deleted:
            return
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        self._expiry_timer = self.vhost.call_at(
            self.vhost.now() + self.expires / 1000, self._expire_queue
        )

    def _expire_queue(self) -> None:
        self._expiry_timer = None
        if self.consumers:
            self.touch()
        elif not self.deleted:
            self.vhost.delete_queue(self)

    def stop_timers(self) -> None:
        for timer in (self._ttl_timer, self._expiry_timer):
            if timer is not None:
                timer.cancel()
        self._ttl_timer = self._expiry_timer = None

    def drain(self, each: Callable[[QueuedMessage], None]) -> None:
        """Hand every ready message to ``each`` and empty the queue."""
        for item in self._clear():
            each(item)
