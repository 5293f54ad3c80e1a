"""One AMQP channel: its methods, as RabbitMQ's ``rabbit_channel`` answers them, its consumers,
unacknowledged deliveries, publisher confirms and transactions."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pamqp import commands as c

from xroute.amqp.errors import (
    ACCESS_REFUSED,
    COMMAND_INVALID,
    NO_METHOD,
    NO_ROUTE,
    NOT_ALLOWED,
    NOT_IMPLEMENTED,
    PRECONDITION_FAILED,
    PUBLISH_METHOD,
    UNEXPECTED_FRAME,
    AMQPError,
    not_found,
)
from xroute.amqp.frames import (
    BASIC_CLASS,
    ack_frame,
    content_frames,
    deliver_frame,
    method_frame,
    split_content_header,
)
from xroute.amqp.message import Message, QueuedMessage
from xroute.amqp.properties import rewrite
from xroute.amqp.vhost import Record, server_name
from xroute.core.errors import XRouteError
from xroute.core.topology import DEFAULT_EXCHANGE

if TYPE_CHECKING:
    from xroute.amqp.connection import Connection
    from xroute.amqp.queues import BrokerQueue

# RabbitMQ's command assembler (rabbit_command_assembler) on content out of turn.
_EXPECTED_METHOD = "expected method frame, got non method frame instead"
_EXPECTED_HEADER = "expected content header for class 60, got non content header frame instead"
_EXPECTED_BODY = "expected content body, got non content body frame instead"

# RabbitMQ 4.x's default max_message_size; 3.x's was 128 MiB (the vhost's profile chooses).
MAX_MESSAGE_SIZE = 16 * 1024 * 1024
MAX_MESSAGE_SIZE_3X = 128 * 1024 * 1024


class Consumer:
    """A basic.consume subscription: its queue, prefetch and deliveries not yet acked."""

    __slots__ = ("tag", "channel", "queue", "no_ack", "prefetch", "unacked", "exclusive")

    def __init__(
        self, tag: str, channel: Channel, queue: BrokerQueue, no_ack: bool, prefetch: int,
        exclusive: bool,
    ) -> None:
        self.tag = tag
        self.channel = channel
        self.queue = queue
        self.no_ack = no_ack
        self.prefetch = prefetch
        self.unacked = 0
        self.exclusive = exclusive

    def has_credit(self) -> bool:
        """Whether the queue may deliver to this consumer now: its and its channel's qos,
        and room in its connection's socket (a consumer that stops reading gets no more
        than its prefetch and one socket buffer; the others are served meanwhile)."""
        channel = self.channel
        if not self.no_ack:
            if self.prefetch and self.unacked >= self.prefetch:
                return False
            if channel.global_prefetch and len(channel.unacked) >= channel.global_prefetch:
                return False
        return channel.connection.may_deliver()

    def deliver(self, item: QueuedMessage) -> None:
        self.channel.deliver(self, item)

    def cancelled_by_broker(self) -> None:
        """The queue went away: tell the client (consumer_cancel_notify) and forget us."""
        self.channel.consumer_gone(self)


class Unacked:
    """A delivery awaiting ack: where it came from, and the consumer whose credit it holds."""

    __slots__ = ("tag", "queue", "item", "consumer")

    def __init__(
        self, tag: int, queue: BrokerQueue, item: QueuedMessage, consumer: Consumer | None
    ) -> None:
        self.tag = tag
        self.queue = queue
        self.item = item
        self.consumer = consumer


class Channel:
    """The state of one open channel; `handle` takes its methods, content frames come through
    `content_header` and `content_body`."""

    def __init__(self, connection: Connection, number: int) -> None:
        self.connection = connection
        self.number = number
        self.vhost = connection.vhost
        self.closing = False
        self.consumers: dict[str, Consumer] = {}
        self.unacked: dict[int, Unacked] = {}
        self.delivery_tag = 0
        self.consumer_prefetch = 0
        self.global_prefetch = 0
        self.confirm = False
        self.publish_seq = 0
        self.tx: tuple[list, list] | None = None  # (publishes, settlements) of the open tx
        self.last_queue: str | None = None
        # The publish in progress: its method, the expected body size, the body so far.
        self._publish: c.Basic.Publish | None = None
        self._properties = b""
        self._body_size = 0
        self._body: list[bytes] = []
        self._received = 0
        self._header_seen = False
        self._overflowed = False  # the body ran past its header's size
        self._handlers: dict[type, Callable[[Any], Any]] = {
            c.Channel.Flow: self._flow,
            c.Exchange.Declare: self._exchange_declare,
            c.Exchange.Delete: self._exchange_delete,
            c.Exchange.Bind: self._exchange_bind,
            c.Exchange.Unbind: self._exchange_unbind,
            c.Queue.Declare: self._queue_declare,
            c.Queue.Bind: self._queue_bind,
            c.Queue.Unbind: self._queue_unbind,
            c.Queue.Purge: self._queue_purge,
            c.Queue.Delete: self._queue_delete,
            c.Basic.Qos: self._qos,
            c.Basic.Consume: self._consume,
            c.Basic.Cancel: self._cancel,
            c.Basic.Publish: self._start_publish,
            c.Basic.Get: self._get,
            c.Basic.Ack: self._ack,
            c.Basic.Reject: self._reject,
            c.Basic.Nack: self._nack,
            c.Basic.Recover: self._recover,
            c.Basic.RecoverAsync: self._recover_async,
            c.Tx.Select: self._tx_select,
            c.Tx.Commit: self._tx_commit,
            c.Tx.Rollback: self._tx_rollback,
            c.Confirm.Select: self._confirm_select,
        }

    # ------------------------------------------------------------------ frames in

    def handle(self, method: Any) -> None:
        """Run one method; raises `AMQPError` for the connection to close us (or itself)."""
        if self._publish is not None:
            # As RabbitMQ's command assembler: content was expected, a method came.
            expected = _EXPECTED_BODY if self._header_seen else _EXPECTED_HEADER
            self._abandon_publish()
            raise AMQPError(UNEXPECTED_FRAME, expected, where=PUBLISH_METHOD)
        handler = self._handlers.get(type(method))
        if handler is None:
            raise AMQPError(COMMAND_INVALID, "unimplemented method")
        try:
            reply = handler(method)
        except AMQPError:
            raise
        except XRouteError as error:
            raise self.vhost.refusal(error) from None
        if reply is not None and not getattr(method, "nowait", False):
            self.send(reply)

    def content_header(self, payload: bytes) -> None:
        """A content header frame: the properties and size of the message being published."""
        if self._publish is None:
            raise AMQPError(UNEXPECTED_FRAME, _EXPECTED_METHOD, where=NO_METHOD)
        if self._header_seen:
            self._abandon_publish()
            raise AMQPError(UNEXPECTED_FRAME, _EXPECTED_BODY, where=PUBLISH_METHOD)
        class_id, weight, body_size, properties = split_content_header(payload)
        if weight != 0:
            self._abandon_publish()
            raise AMQPError(UNEXPECTED_FRAME, _EXPECTED_HEADER, where=PUBLISH_METHOD)
        if class_id != BASIC_CLASS:
            self._abandon_publish()
            raise AMQPError(
                UNEXPECTED_FRAME,
                f"expected content header for class {BASIC_CLASS}, got one for class "
                f"{class_id} instead",
                where=PUBLISH_METHOD,
            )
        limit = MAX_MESSAGE_SIZE_3X if self.vhost.rabbitmq_3x else MAX_MESSAGE_SIZE
        if body_size > limit:
            self._abandon_publish()
            raise AMQPError(
                PRECONDITION_FAILED,
                f"message size {body_size} is larger than configured max size {limit}",
            )
        self._properties = properties
        self._body_size = body_size
        self._header_seen = True
        if body_size == 0:
            self._finish_publish()

    def content_body(self, payload: bytes) -> None:
        """A content body frame: the next part of the message being published."""
        if not self._header_seen:
            if self._publish is not None:
                self._abandon_publish()
                raise AMQPError(UNEXPECTED_FRAME, _EXPECTED_HEADER, where=PUBLISH_METHOD)
            raise AMQPError(UNEXPECTED_FRAME, _EXPECTED_METHOD, where=NO_METHOD)
        received = self._received + len(payload)
        self._received = received
        if self._overflowed:
            return
        if received > self._body_size:
            # RabbitMQ's assembler counts down past zero and never completes: the message is
            # not delivered, and the next frame that is not a body is a 505. Nothing more of
            # it is kept here.
            self._overflowed = True
            self.vhost.memory.release(received - len(payload))
            self._body = []
            return
        self._body.append(payload)
        self.vhost.memory.hold(len(payload))
        if received == self._body_size:
            self._finish_publish()

    def _abandon_publish(self) -> None:
        """Forget the message being published (its channel closes, or its frames were wrong)."""
        if not self._overflowed:
            self.vhost.memory.release(sum(len(part) for part in self._body))
        self._publish = None
        self._body = []
        self._received = 0
        self._header_seen = False
        self._overflowed = False

    # ------------------------------------------------------------------ frames out

    def send(self, method: Any) -> None:
        self.connection.write(method_frame(self.number, method))

    def _send_content(self, method: Any, message: Message) -> None:
        self.connection.write_many(
            [method_frame(self.number, method)]
            + content_frames(self.number, message.properties, message.body,
                             self.connection.frame_max)
        )

    def next_tag(self) -> int:
        self.delivery_tag += 1
        return self.delivery_tag

    def deliver(self, consumer: Consumer, item: QueuedMessage) -> None:
        """Send ``item`` to ``consumer`` (called by its queue)."""
        tag = self.next_tag()
        message = item.message
        if not consumer.no_ack:
            self.unacked[tag] = Unacked(tag, consumer.queue, item, consumer)
            consumer.unacked += 1
            consumer.queue.unacked += 1
            self.vhost.memory.hold(message.size)
        self.connection.write_many(
            [deliver_frame(self.number, consumer.tag, tag, item.redelivered,
                           message.exchange, message.routing_key)]
            + content_frames(self.number, message.properties, message.body,
                             self.connection.frame_max)
        )

    # ------------------------------------------------------------------ channel

    def _flow(self, method: c.Channel.Flow) -> Any:
        if not method.active:
            raise AMQPError(NOT_IMPLEMENTED, "active=false")
        return c.Channel.FlowOk(active=True)

    def release(self) -> None:
        """The channel closes: requeue what it had unacked and drop its consumers."""
        self._abandon_publish()
        for consumer in list(self.consumers.values()):
            consumer.queue.remove_consumer(consumer)
        self.consumers.clear()
        self._requeue_all()

    def _requeue_all(self) -> None:
        pending = list(self.unacked.values())
        self.unacked.clear()
        self._settle_pending(pending, requeue=True)

    # ------------------------------------------------------------------ exchanges

    def _exchange_declare(self, m: c.Exchange.Declare) -> Any:
        topology = self.vhost.topology
        if m.exchange == DEFAULT_EXCHANGE:
            raise AMQPError(ACCESS_REFUSED, "operation not permitted on the default exchange")
        if m.passive:
            self.vhost.exchange_type(m.exchange)
            return c.Exchange.DeclareOk()
        if m.exchange.startswith("amq.") and m.exchange not in topology.exchanges:
            raise AMQPError(
                ACCESS_REFUSED, f"exchange name '{m.exchange}' contains reserved prefix 'amq.*'"
            )
        topology.declare_exchange(
            m.exchange,
            m.exchange_type,
            durable=m.durable,
            auto_delete=m.auto_delete,
            internal=m.internal,
            arguments=dict(m.arguments or {}),
        )
        return c.Exchange.DeclareOk()

    def _exchange_delete(self, m: c.Exchange.Delete) -> Any:
        self.vhost.delete_exchange(m.exchange, m.if_unused)
        return c.Exchange.DeleteOk()

    def _check_bind(self, source: str, destination: str, kind: str, unbind: bool = False):
        self.vhost.topology.check_bindable(destination, kind)
        if source == DEFAULT_EXCHANGE or (kind == "exchange" and destination == DEFAULT_EXCHANGE):
            raise AMQPError(ACCESS_REFUSED, "operation not permitted on the default exchange")
        if unbind:
            # RabbitMQ: removing a binding whose ends are gone succeeds; only a queue that
            # another connection holds exclusively is refused.
            if kind == "queue" and destination in self.vhost.queues:
                self.vhost.queue(destination, self.connection)
            return
        # rabbit_binding's call_with_source_and_destination: a missing source is named
        # first, then a missing destination; only then a queue that is another's.
        if source not in self.vhost.topology.exchanges:
            raise not_found("exchange", source, self.vhost.name)
        if kind == "queue":
            self.vhost.queue(destination, self.connection)
        elif destination not in self.vhost.topology.exchanges:
            raise not_found("exchange", destination, self.vhost.name)

    def _exchange_bind(self, m: c.Exchange.Bind) -> Any:
        self._check_bind(m.source, m.destination, "exchange")
        self.vhost.bind(m.source, m.destination, m.routing_key, dict(m.arguments or {}),
                        "exchange")
        return c.Exchange.BindOk()

    def _exchange_unbind(self, m: c.Exchange.Unbind) -> Any:
        self._check_bind(m.source, m.destination, "exchange", unbind=True)
        self.vhost.unbind(m.source, m.destination, m.routing_key, dict(m.arguments or {}),
                          "exchange")
        return c.Exchange.UnbindOk()

    # ------------------------------------------------------------------ queues

    def _queue_name(self, name: str) -> str:
        # An empty queue name means the channel's last declared queue (RabbitMQ's shortcut).
        if name:
            return name
        if self.last_queue is None:
            raise AMQPError(NOT_ALLOWED, "no previously declared queue")
        return self.last_queue

    def _queue_declare(self, m: c.Queue.Declare) -> Any:
        queue = self.vhost.declare_queue(
            m.queue if not m.passive else self._queue_name(m.queue),
            passive=m.passive,
            durable=m.durable,
            exclusive=m.exclusive,
            auto_delete=m.auto_delete,
            arguments=dict(m.arguments or {}),
            connection=self.connection,
        )
        self.last_queue = queue.name
        return c.Queue.DeclareOk(
            queue=queue.name, message_count=len(queue.ready), consumer_count=len(queue.consumers)
        )

    def _queue_bind(self, m: c.Queue.Bind) -> Any:
        name = self._queue_name(m.queue)
        key = m.routing_key if (m.queue or m.routing_key) else name
        self._check_bind(m.exchange, name, "queue")
        self.vhost.bind(m.exchange, name, key, dict(m.arguments or {}), "queue")
        return c.Queue.BindOk()

    def _queue_unbind(self, m: c.Queue.Unbind) -> Any:
        name = self._queue_name(m.queue)
        self._check_bind(m.exchange, name, "queue", unbind=True)
        self.vhost.unbind(m.exchange, name, m.routing_key, dict(m.arguments or {}), "queue")
        self.send(c.Queue.UnbindOk())  # queue.unbind has no nowait
        return None

    def _queue_purge(self, m: c.Queue.Purge) -> Any:
        queue = self.vhost.queue(self._queue_name(m.queue), self.connection)
        return c.Queue.PurgeOk(message_count=queue.purge())

    def _queue_delete(self, m: c.Queue.Delete) -> Any:
        name = self._queue_name(m.queue)
        if name not in self.vhost.queues:
            return c.Queue.DeleteOk(message_count=0)  # RabbitMQ: deleting a missing queue is ok
        queue = self.vhost.queue(name, self.connection)
        count = self.vhost.delete_queue(queue, if_unused=m.if_unused, if_empty=m.if_empty)
        return c.Queue.DeleteOk(message_count=count)

    # ------------------------------------------------------------------ consuming

    def _qos(self, m: c.Basic.Qos) -> Any:
        if m.prefetch_size:
            raise AMQPError(NOT_IMPLEMENTED, f"prefetch_size!=0 ({m.prefetch_size})")
        if m.global_:
            self.global_prefetch = m.prefetch_count
            for consumer in list(self.consumers.values()):
                consumer.queue.dispatch()
        else:
            self.consumer_prefetch = m.prefetch_count
        return c.Basic.QosOk()

    def _consume(self, m: c.Basic.Consume) -> Any:
        tag = m.consumer_tag or server_name("amq.ctag")
        if tag in self.consumers:
            raise AMQPError(NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'")
        queue = self.vhost.queue(self._queue_name(m.queue), self.connection)
        if queue.consumers and (m.exclusive or any(x.exclusive for x in queue.consumers)):
            raise AMQPError(
                ACCESS_REFUSED, f"queue '{queue.name}' in vhost '{self.vhost.name}' in exclusive use"
            )
        consumer = Consumer(tag, self, queue, m.no_ack, self.consumer_prefetch, m.exclusive)
        self.consumers[tag] = consumer
        if not m.nowait:
            self.send(c.Basic.ConsumeOk(consumer_tag=tag))
        queue.add_consumer(consumer)
        return None

    def _cancel(self, m: c.Basic.Cancel) -> Any:
        consumer = self.consumers.pop(m.consumer_tag, None)
        reply = c.Basic.CancelOk(consumer_tag=m.consumer_tag)
        if not m.nowait:
            self.send(reply)
        if consumer is not None:
            consumer.queue.remove_consumer(consumer)
        return None

    def consumer_gone(self, consumer: Consumer) -> None:
        if self.consumers.pop(consumer.tag, None) is None:
            return
        if self.connection.capability("consumer_cancel_notify"):
            self.send(c.Basic.Cancel(consumer_tag=consumer.tag, nowait=True))

    def _get(self, m: c.Basic.Get) -> Any:
        queue = self.vhost.queue(self._queue_name(m.queue), self.connection)
        item = queue.get()
        if item is None:
            return c.Basic.GetEmpty()
        tag = self.next_tag()
        message = item.message
        if not m.no_ack:
            self.unacked[tag] = Unacked(tag, queue, item, None)
            queue.unacked += 1
            self.vhost.memory.hold(message.size)
        self._send_content(
            c.Basic.GetOk(
                delivery_tag=tag,
                redelivered=item.redelivered,
                exchange=message.exchange,
                routing_key=message.routing_key,
                message_count=len(queue.ready),
            ),
            message,
        )
        return None

    # ------------------------------------------------------------------ settling

    def _collect(self, tag: int, multiple: bool) -> list[Unacked]:
        unacked = self.unacked
        if multiple and tag == 0:
            taken = list(unacked.values())
            unacked.clear()
            return taken
        if tag not in unacked:
            raise AMQPError(PRECONDITION_FAILED, f"unknown delivery tag {tag}")
        if not multiple:
            return [unacked.pop(tag)]
        tags = [t for t in unacked if t <= tag]
        return [unacked.pop(t) for t in tags]

    def _ack(self, m: c.Basic.Ack) -> None:
        pending = self._collect(m.delivery_tag, m.multiple)
        if self.tx is not None:
            self.tx[1].append(("ack", pending))
        else:
            self._settle_pending(pending, requeue=None)

    def _reject(self, m: c.Basic.Reject) -> None:
        self._negative(self._collect(m.delivery_tag, False), m.requeue)

    def _nack(self, m: c.Basic.Nack) -> None:
        self._negative(self._collect(m.delivery_tag, m.multiple), m.requeue)

    def _negative(self, pending: list[Unacked], requeue: bool) -> None:
        if self.tx is not None:
            self.tx[1].append((requeue, pending))
        else:
            self._settle_pending(pending, requeue=requeue)

    def _settle_pending(self, pending: list[Unacked], requeue: bool | None) -> None:
        """Ack (``requeue`` None), requeue (True) or reject (False) deliveries."""
        touched: dict[int, BrokerQueue] = {}
        requeued: dict[int, list[QueuedMessage]] = {}
        record = self.connection.broker_records
        memory = self.vhost.memory
        for entry in pending:
            queue = entry.queue
            queue.unacked -= 1
            memory.release(entry.item.message.size)
            if entry.consumer is not None:
                entry.consumer.unacked -= 1
            touched[id(queue)] = queue
            message = entry.item.message
            if record:
                kind = "ack" if requeue is None else "nack"
                self.vhost.record(Record(kind, queue.name, message.exchange,
                                         message.routing_key, message.body, message.headers,
                                         None if requeue is None else f"requeue={requeue}"))
            if requeue:
                requeued.setdefault(id(queue), []).append(entry.item)
            elif requeue is False and not queue.deleted:
                self.vhost.dead_letter(queue, message, "rejected", entry.item)
        for key, items in requeued.items():
            touched[key].requeue(items)
        for queue in touched.values():
            queue.dispatch()
        if self.global_prefetch:
            for consumer in list(self.consumers.values()):
                consumer.queue.dispatch()

    def _recover(self, m: c.Basic.Recover) -> Any:
        self._recover_async(m)
        return c.Basic.RecoverOk()

    def _recover_async(self, m: Any) -> None:
        if not m.requeue:
            raise AMQPError(NOT_IMPLEMENTED, "requeue=false")
        self._requeue_all()

    # ------------------------------------------------------------------ publishing

    def _start_publish(self, m: c.Basic.Publish) -> None:
        self._publish = m
        self._properties = b""
        self._body_size = 0
        self._body = []
        self._received = 0
        self._header_seen = False

    def _finish_publish(self) -> None:
        method = self._publish
        body = b"".join(self._body) if len(self._body) != 1 else self._body[0]
        self.vhost.memory.release(len(body))
        self._publish = None
        self._body = []
        self._received = 0
        self._header_seen = False
        if method.immediate:
            raise AMQPError(NOT_IMPLEMENTED, "immediate=true")
        vhost = self.vhost
        exchange = vhost.topology.exchanges.get(method.exchange)
        if exchange is None:
            raise not_found("exchange", method.exchange, vhost.name)
        if exchange.internal:
            raise AMQPError(
                ACCESS_REFUSED,
                f"cannot publish to internal exchange '{method.exchange}' in vhost "
                f"'{vhost.name}'",
            )
        message = Message(method.exchange, method.routing_key, self._properties, body)
        if message.user_id is not None and message.user_id != self.connection.user:
            raise AMQPError(
                PRECONDITION_FAILED,
                f"user_id property set to '{message.user_id}' but authenticated user was "
                f"'{self.connection.user}'",
            )
        if "BCC" in message.headers:
            # RabbitMQ strips BCC from the message before any exchange or queue sees it.
            headers = dict(message.headers)
            message.bcc = headers.pop("BCC")
            message.has_bcc = True
            message.properties = rewrite(message.properties, {"headers": headers})
            message.headers = headers
        seq = None
        if self.confirm:
            self.publish_seq += 1
            seq = self.publish_seq
        if self.tx is not None:
            vhost.route(method.exchange, message, keep=False)  # refuse a bad one now
            self.tx[0].append((method, message))
            return
        self._route_and_deliver(method, message, seq)

    def _route_and_deliver(self, method: c.Basic.Publish, message: Message, seq: int | None):
        vhost = self.vhost
        queues = vhost.route(method.exchange, message)
        accepted = vhost.enqueue(message, queues) if queues else True
        if not queues and method.mandatory:
            self._send_content(
                c.Basic.Return(
                    reply_code=NO_ROUTE,
                    reply_text="NO_ROUTE",
                    exchange=method.exchange,
                    routing_key=method.routing_key,
                ),
                message,
            )
            vhost.record(Record("returned", None, method.exchange, method.routing_key,
                                message.body, message.headers, "NO_ROUTE"))
        if seq is not None:
            if accepted:
                self.connection.write(ack_frame(self.number, seq))
            else:
                self.send(c.Basic.Nack(delivery_tag=seq))

    # ------------------------------------------------------------------ tx and confirms

    def _tx_select(self, m: c.Tx.Select) -> Any:
        if self.confirm:
            raise AMQPError(PRECONDITION_FAILED, "cannot switch from confirm to tx mode")
        if self.tx is None:
            self.tx = ([], [])
        return c.Tx.SelectOk()

    def _tx_commit(self, m: c.Tx.Commit) -> Any:
        if self.tx is None:
            raise AMQPError(PRECONDITION_FAILED, "channel is not transactional")
        publishes, settlements = self.tx
        self.tx = ([], [])
        for method, message in publishes:
            self._route_and_deliver(method, message, None)
        for requeue, pending in settlements:
            self._settle_pending(pending, requeue=None if requeue == "ack" else requeue)
        return c.Tx.CommitOk()

    def _tx_rollback(self, m: c.Tx.Rollback) -> Any:
        if self.tx is None:
            raise AMQPError(PRECONDITION_FAILED, "channel is not transactional")
        _, settlements = self.tx
        # Acks and rejects not committed are undone: those deliveries are unacked again.
        for _, pending in settlements:
            for entry in pending:
                self.unacked[entry.tag] = entry
        self.unacked = dict(sorted(self.unacked.items()))
        self.tx = ([], [])
        return c.Tx.RollbackOk()

    def _confirm_select(self, m: c.Confirm.Select) -> Any:
        if self.tx is not None:
            raise AMQPError(PRECONDITION_FAILED, "cannot switch from tx to confirm mode")
        self.confirm = True
        return c.Confirm.SelectOk()
