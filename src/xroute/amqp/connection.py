"""One client connection: the handshake (PLAIN, AMQPLAIN), tuning, heartbeats, frames in and
out, and which errors close a channel or the whole connection."""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import logging
import platform
import struct
from typing import TYPE_CHECKING, Any

from pamqp import commands as c

import xroute
from xroute.amqp.channel import Channel
from xroute.amqp.errors import (
    ACCESS_REFUSED,
    CHANNEL_ERROR,
    CONNECTION_FORCED,
    FRAME_ERROR,
    INTERNAL_ERROR,
    NO_METHOD,
    NOT_ALLOWED,
    PUBLISH_METHOD,
    UNEXPECTED_FRAME,
    AMQPError,
)
from xroute.amqp.frames import (
    FRAME_BODY,
    FRAME_END,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    HEARTBEAT_FRAME,
    PROTOCOL_HEADER,
    PUBLISH_INDEX,
    MalformedFrame,
    MalformedUTF8,
    decode_auth_table,
    decode_method,
    decode_publish,
    method_frame,
)
from xroute.core.errors import FieldTableError
from xroute.erlang.terms import io_format

if TYPE_CHECKING:
    from xroute.amqp.broker import Broker

log = logging.getLogger(__name__)

# What the broker offers in connection.tune (RabbitMQ's defaults).
CHANNEL_MAX = 2047
FRAME_MAX = 131072
HEARTBEAT = 60
FRAME_MIN = 4096  # frames before tuning may be this large (AMQP 0-9-1)
CLOSE_OK_TIMEOUT = 5.0
# Output queued for a client before its deliveries wait: one socket buffer's worth. The
# transport's own limit (asyncio's 64 KiB by default) pauses them too, when the socket is full.
OUTPUT_LIMIT = 256 * 1024
# RabbitMQ's names of the connection states, for its "unexpected method" replies.
STATE_NAMES = {"start": "starting", "tune": "tuning", "tuned": "opening", "open": "running",
               "closing": "closing", "gone": "closed", "protocol-header": "pre_init"}
_frame_header = struct.Struct(">BHI")

CAPABILITIES = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "consumer_priorities": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
    "direct_reply_to": False,
}


class Connection(asyncio.Protocol):
    """The broker's side of one AMQP 0-9-1 connection."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.vhost = broker.vhost
        self.broker_records = broker.record
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.state = "protocol-header"
        self.channels: dict[int, Channel] = {}
        self.closing_channels: set[int] = set()
        self.client_properties: dict[str, Any] = {}
        self.user: str | None = None
        self.channel_max = CHANNEL_MAX
        self.frame_max = FRAME_MIN
        self.heartbeat = 0
        self._heartbeat_timer: asyncio.TimerHandle | None = None
        self._close_timer: asyncio.TimerHandle | None = None
        self._received = False
        self._sent = False
        self._missed = 0
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_scheduled = False
        self._in_data = False
        self._handshake_timer: asyncio.TimerHandle | None = None
        self.peer: Any = None
        self.serial = next(_serials)  # the order connections came in
        self.spoke = False  # has the client sent a byte yet
        # Flow control: the socket is full (asyncio paused our writing), so deliveries wait;
        # a consumer was refused for want of room, so they resume when there is some.
        self.write_paused = False
        self._starved = False
        # Reading stops while publishers are blocked by the memory alarm (as RabbitMQ's
        # reader does once a blocked connection publishes) or the client reads nothing of
        # what it asks for.
        self.blocked = False
        self._blocked_sent = False
        self._reading_paused = False

    # ------------------------------------------------------------------ transport

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.broker.connections.add(self)
        self._handshake_timer = asyncio.get_running_loop().call_later(
            self.broker.handshake_timeout, self._handshake_timed_out
        )
        self.broker.admitted(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.cleanup()
        if self._close_timer is not None:
            self._close_timer.cancel()
        self.broker.connections.discard(self)
        self._out = []
        self._out_bytes = 0

    def pause_writing(self) -> None:
        """The socket is full (the client reads slower than we write): deliveries wait."""
        self.write_paused = True

    def resume_writing(self) -> None:
        """The socket drained: deliveries go on, and reading, if a backlog had stopped it."""
        self.write_paused = False
        self._update_reading()
        self._feed_consumers()

    @property
    def pre_open(self) -> bool:
        """True until the client has logged in and opened its virtual host."""
        return self.state in ("protocol-header", "start", "tune", "tuned")

    def _handshake_timed_out(self) -> None:
        self._handshake_timer = None
        if self.pre_open:
            log.info("xroute.amqp: closing %s: no handshake within %s s", self.peer,
                     self.broker.handshake_timeout)
            self._abort()

    def cleanup(self) -> None:
        """Close every channel (requeueing their deliveries) and drop exclusive queues."""
        if self.state == "gone":
            return
        self.state = "gone"
        self.buffer = bytearray()
        for timer in (self._heartbeat_timer, self._close_timer, self._handshake_timer):
            if timer is not None:
                timer.cancel()
        for channel in list(self.channels.values()):
            channel.release()
        self.channels.clear()
        for queue in list(self.vhost.queues.values()):
            if queue.owner is self:
                self.vhost.delete_queue(queue)

    def write(self, data: bytes) -> None:
        """Queue ``data``; everything queued goes out in one write (see `flush`)."""
        self._out.append(data)
        self._out_bytes += len(data)
        self._want_flush()

    def write_many(self, parts: list[bytes]) -> None:
        self._out += parts
        self._out_bytes += sum(map(len, parts))
        self._want_flush()

    def may_deliver(self) -> bool:
        """Whether a delivery may be queued now: the socket is not full and what is queued
        is under `OUTPUT_LIMIT`. A refusal is remembered, to resume once there is room."""
        if self.write_paused or self._out_bytes >= OUTPUT_LIMIT:
            self._starved = True
            return False
        return True

    def _feed_consumers(self) -> None:
        # Deliveries refused for want of room go out now (called when there is room).
        if not self._starved or self.write_paused or self.state == "gone":
            return
        self._starved = False
        queues = {id(consumer.queue): consumer.queue for channel in list(self.channels.values())
                  for consumer in channel.consumers.values()}
        for queue in queues.values():
            queue.dispatch()

    def _want_flush(self) -> None:
        # Within data_received the flush comes at its end; otherwise (a timer, another
        # connection's publish) on the next turn of the loop: one syscall per batch.
        if not self._flush_scheduled and not self._in_data:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def _close_transport(self) -> None:
        self.flush()  # what was queued (a close, a protocol header) goes out first
        if self.transport is not None:
            self.transport.close()

    def flush(self) -> None:
        """Write what is queued, in one call."""
        self._flush_scheduled = False
        out = self._out
        if not out:
            return
        self._out = []
        self._out_bytes = 0
        if self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(out)
            self._sent = True
            self._update_reading()
            if self._starved and not self.write_paused:
                asyncio.get_running_loop().call_soon(self._feed_consumers)

    def _update_reading(self) -> None:
        # A client that asks for more while reading nothing of the answers (its socket full
        # and the backlog past four socket buffers) is not read until it drains, so the
        # answers it does not read cannot grow without bound. Blocked publishers are not
        # read until the alarm clears.
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        backlog = self.write_paused and transport.get_write_buffer_size() > 4 * OUTPUT_LIMIT
        pause = self.blocked or backlog
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()
                if self.buffer:
                    asyncio.get_running_loop().call_soon(self._resume_frames)

    def _resume_frames(self) -> None:
        # Frames read before reading stopped are taken up again.
        if not self._reading_paused and self.buffer and self.state != "gone":
            self.data_received(b"")

    def capability(self, name: str) -> bool:
        capabilities = self.client_properties.get("capabilities")
        return isinstance(capabilities, dict) and capabilities.get(name) is True

    # ------------------------------------------------------------------ frames in

    def data_received(self, data: bytes) -> None:
        self._in_data = True
        try:
            self._data_received(data)
        finally:
            self._in_data = False
            self.flush()

    def _data_received(self, data: bytes) -> None:
        if self.state == "gone" or self.state == "silent":
            return  # read and discarded: nothing more is kept for a client we are closing
        self._received = self.spoke = True
        buffer = self.buffer
        buffer += data
        if self.state == "protocol-header":
            if len(buffer) < 8:
                return
            header = bytes(buffer[:8])
            del buffer[:8]
            if header != PROTOCOL_HEADER:
                self.write(PROTOCOL_HEADER)
                self._close_transport()
                self.state = "gone"
                self.buffer = bytearray()
                return
            self._start()
        offset = 0
        try:
            while len(buffer) - offset >= 7 and not self._reading_paused:
                kind, channel, size = _frame_header.unpack_from(buffer, offset)
                # RabbitMQ lets a payload reach frame_max itself (clients are often off by
                # the 8 bytes of framing); beyond, the stream cannot be trusted: 501.
                if size > self.frame_max:
                    raise AMQPError(
                        FRAME_ERROR,
                        f"type {kind}, all octets = <<>>: {{frame_too_large,{size},"
                        f"{self.frame_max - 8}}}",
                    ).fatal()
                end = offset + 7 + size
                if len(buffer) <= end:
                    break
                if buffer[end] != FRAME_END:
                    raise AMQPError(
                        FRAME_ERROR,
                        f"type {kind}, {_snippet(buffer[offset + 7 : end])}: "
                        f"{{invalid_frame_end_marker,{buffer[end]}}}",
                    ).fatal()
                payload = bytes(buffer[offset + 7 : end])
                offset = end + 1
                self._frame(kind, channel, payload)
                if self.state in ("gone", "silent"):
                    return
        except _Reset:
            self._abort()
            return
        except AMQPError as error:
            del buffer[:offset]
            self.fail(error)
            return
        except Exception as error:  # a bug must not leave the client hanging: 541
            log.exception("xroute.amqp: internal error")
            del buffer[:offset]
            self.close_connection(AMQPError(INTERNAL_ERROR, f"internal error: {error}"))
            return
        del buffer[:offset]

    def _frame(self, kind: int, number: int, payload: bytes) -> None:
        if self.state == "gone":
            return
        if self.state == "closing":
            # After connection.close, only close-ok (or close) counts.
            if kind == FRAME_METHOD and number == 0:
                method = decode_method(payload)
                if isinstance(method, (c.Connection.CloseOk, c.Connection.Close)):
                    if isinstance(method, c.Connection.Close):
                        self.write(method_frame(0, c.Connection.CloseOk()))
                    self._close_transport()
                    self.cleanup()
            return
        if kind not in _FRAME_TYPES or (kind == FRAME_HEARTBEAT and payload) or (
            kind == FRAME_HEADER and len(payload) < 12
        ):
            raise AMQPError(FRAME_ERROR, f"type {kind}, {_snippet(payload)}: unknown_frame")
        if number == 0:
            if kind == FRAME_HEARTBEAT:
                return
            if kind != FRAME_METHOD:
                raise AMQPError(UNEXPECTED_FRAME, f"type {kind}, {_snippet(payload)}")
            method = self._decode(payload, connection=True)
            try:
                self._connection_method(method)
            except AMQPError as error:
                if error.where is None:  # the close names the method that failed
                    error.class_id, error.method_id = divmod(method.index, 1 << 16)
                raise
            return
        if self.state != "open" or kind == FRAME_HEARTBEAT:
            # RabbitMQ: nothing but channel 0 before the connection runs, and heartbeats
            # only on channel 0.
            raise AMQPError(UNEXPECTED_FRAME, f"type {kind}, {_snippet(payload)}")
        if number in self.closing_channels:
            if kind == FRAME_METHOD:
                method = self._decode(payload)
                if isinstance(method, c.Channel.CloseOk):
                    self.closing_channels.discard(number)
                elif isinstance(method, c.Channel.Close):
                    self.write(method_frame(number, c.Channel.CloseOk()))
            return
        channel = self.channels.get(number)
        if kind == FRAME_METHOD:
            method = self._decode(payload)
            if channel is None:
                if not isinstance(method, c.Channel.Open):
                    raise AMQPError(CHANNEL_ERROR, f"expected 'channel.open' on channel {number}")
                if self.channel_max and len(self.channels) >= self.channel_max:
                    raise AMQPError(
                        NOT_ALLOWED,
                        f"number of channels opened ({len(self.channels)}) has reached the "
                        f"negotiated channel_max ({self.channel_max})",
                    )
                self.channels[number] = Channel(self, number)
                self.write(method_frame(number, c.Channel.OpenOk()))
                return
            if isinstance(method, c.Channel.Open):
                raise AMQPError(CHANNEL_ERROR, "second 'channel.open' seen")
            if isinstance(method, c.Channel.Close):
                channel.release()
                del self.channels[number]
                self.write(method_frame(number, c.Channel.CloseOk()))
                return
            if isinstance(method, c.Channel.CloseOk):
                return
            self._run(channel, method, lambda: channel.handle(method))
        elif channel is None:
            # RabbitMQ opens the channel's assembler on any frame, so content first is 505.
            raise AMQPError(
                UNEXPECTED_FRAME, "expected method frame, got non method frame instead"
            )
        elif kind == FRAME_HEADER:
            self._run(channel, None, lambda: channel.content_header(payload))
            self._publish_received()
        else:
            self._run(channel, None, lambda: channel.content_body(payload))
            self._publish_received()

    def _decode(self, payload: bytes, connection: bool = False) -> Any:
        try:
            if payload[:4] == PUBLISH_INDEX:
                return decode_publish(payload)
            return decode_method(payload)
        except (KeyError, struct.error):
            # RabbitMQ's reader fails on a method it does not know: the socket is reset.
            raise _Reset() from None
        except MalformedUTF8:
            index = divmod(int.from_bytes(payload[:4], "big"), 1 << 16)
            raise AMQPError(FRAME_ERROR, "Malformed UTF-8 in shortstr",
                            where=index if connection else NO_METHOD) from None
        except (MalformedFrame, FieldTableError, IndexError, UnicodeError):
            if connection:
                # A connection method that does not decode fails RabbitMQ's reader: 541.
                raise AMQPError(INTERNAL_ERROR, "") from None
            # rabbit_framing's decode_method_fields: a channel method's fields of the wrong
            # layout are a frame error, naming the method.
            raise AMQPError(
                FRAME_ERROR, f"cannot decode {io_format(bytes(payload[4:]), unicode=False)}",
                where=divmod(int.from_bytes(payload[:4], "big"), 1 << 16),
            ) from None

    def _run(self, channel: Channel, method: Any, action: Any) -> None:
        try:
            action()
        except AMQPError as error:
            # The method that failed (basic.publish for content) is named in the close,
            # unless the error names its own.
            if error.where is None:
                error.class_id, error.method_id = (
                    divmod(method.index, 1 << 16) if method is not None else PUBLISH_METHOD
                )
            class_id, method_id = error.class_id, error.method_id
            if error.hard:
                raise
            channel.release()
            self.channels.pop(channel.number, None)
            self.closing_channels.add(channel.number)
            self.write(
                method_frame(
                    channel.number,
                    c.Channel.Close(
                        reply_code=error.code,
                        reply_text=error.text[:255],
                        class_id=class_id,
                        method_id=method_id,
                    ),
                )
            )

    # ------------------------------------------------------------------ connection methods

    def _start(self) -> None:
        self.state = "start"
        properties = {
            "product": "xroute",
            "version": getattr(xroute, "__version__", "0"),
            "platform": f"Python {platform.python_version()}",
            "information": "xroute.amqp: an in-memory AMQP 0-9-1 broker, RabbitMQ's routing",
            "copyright": "xroute contributors",
            "capabilities": CAPABILITIES,
            "cluster_name": "xroute",
        }
        self.write(
            method_frame(
                0,
                c.Connection.Start(
                    version_major=0,
                    version_minor=9,
                    server_properties=properties,
                    mechanisms="PLAIN AMQPLAIN",
                    locales="en_US",
                ),
            )
        )

    def _connection_method(self, method: Any) -> None:
        state = self.state
        if isinstance(method, c.Connection.StartOk) and state == "start":
            self.client_properties = dict(method.client_properties or {})
            self._authenticate(method.mechanism, method.response)
            self.state = "tune"
            self.write(
                method_frame(
                    0,
                    c.Connection.Tune(
                        channel_max=CHANNEL_MAX, frame_max=FRAME_MAX, heartbeat=self.broker.heartbeat
                    ),
                )
            )
        elif isinstance(method, c.Connection.TuneOk) and state == "tune":
            self.channel_max = method.channel_max or CHANNEL_MAX
            if method.frame_max and method.frame_max < FRAME_MIN:
                raise AMQPError(
                    NOT_ALLOWED, f"frame_max={method.frame_max} < {FRAME_MIN} min size"
                )
            if method.frame_max > FRAME_MAX:
                raise AMQPError(
                    NOT_ALLOWED, f"frame_max={method.frame_max} > {FRAME_MAX} max size"
                )
            self.frame_max = method.frame_max or FRAME_MAX
            self.heartbeat = method.heartbeat
            self.state = "tuned"
            if self.heartbeat:
                self._schedule_heartbeat()
        elif isinstance(method, c.Connection.Open) and state == "tuned":
            if method.virtual_host != self.vhost.name:
                raise AMQPError(
                    NOT_ALLOWED, f"vhost {method.virtual_host} not found"
                )
            self.state = "open"
            if self._handshake_timer is not None:
                self._handshake_timer.cancel()
                self._handshake_timer = None
            self.write(method_frame(0, c.Connection.OpenOk()))
        elif isinstance(method, c.Connection.Close) and state == "open":
            # As RabbitMQ: answer close-ok and let the client close the socket (or give up
            # waiting for it after CLOSE_OK_TIMEOUT); what it sends meanwhile is discarded.
            self.write(method_frame(0, c.Connection.CloseOk()))
            self.cleanup()
            self._close_timer = asyncio.get_running_loop().call_later(
                CLOSE_OK_TIMEOUT, self._abort
            )
        elif isinstance(method, c.Connection.UpdateSecret) and state == "open":
            self.write(method_frame(0, c.Connection.UpdateSecretOk()))
        else:
            # rabbit_reader: any other method on channel 0 (a channel's method, or one of
            # the connection's out of turn) is a channel error, 504.
            raise AMQPError(
                CHANNEL_ERROR, f"unexpected method in connection state {STATE_NAMES[state]}"
            )

    def _authenticate(self, mechanism: str, response: Any) -> None:
        raw = response if isinstance(response, bytes) else str(response).encode("utf-8")
        user = password = None
        if mechanism == "PLAIN":
            parts = raw.split(b"\x00")
            if len(parts) == 3:
                user, password = parts[1].decode("utf-8", "replace"), parts[2].decode(
                    "utf-8", "replace"
                )
        elif mechanism == "AMQPLAIN":
            try:
                table = decode_auth_table(raw)
            except Exception:
                table = {}
            user, password = table.get("LOGIN"), table.get("PASSWORD")
            user = user.decode() if isinstance(user, bytes) else user
            password = password.decode() if isinstance(password, bytes) else password
        else:
            raise AMQPError(
                ACCESS_REFUSED, f"unsupported authentication mechanism '{mechanism}'"
            )
        if (
            user is None
            or self.broker.users.get(user) != password
            # RabbitMQ's internal backend refuses a blank password, whatever is stored...
            or not password
            # ... and loopback_users (guest) log in from the machine itself only.
            or (user in self.broker.loopback_users and not _is_loopback(self.peer))
        ):
            error = AMQPError(
                ACCESS_REFUSED,
                f"Login was refused using authentication mechanism {mechanism}. For details "
                "see the broker logfile.",
            )
            if not self.capability("authentication_failure_close"):
                self._close_transport()
                self.cleanup()
                raise _Closed()
            raise error
        self.user = user

    def fail(self, error: AMQPError) -> None:
        """End the connection for ``error`` as RabbitMQ's reader does in the state it is in.

        Running: connection.close with the error, then close-ok awaited. During the
        handshake only a refused login (with ``authentication_failure_close``), a refused
        negotiation or vhost, and errors once opening get a connection.close; anything else
        is met with silence and the socket closed after the broker's ``silent_close_delay``
        (RabbitMQ's 3 s), so a client cannot hammer the handshake. A frame error (``fatal``)
        stops all reading at once."""
        state = self.state
        if state in ("gone", "silent", "closing"):
            return
        told = (
            state in ("open", "tuned")
            or (state == "start" and error.code == ACCESS_REFUSED)
            or (state == "tune" and error.code == NOT_ALLOWED)
        )
        if not told:
            self._silent_close()
            return
        self.close_connection(error)
        if error.is_fatal:
            self._silent_close()
        elif state == "start":
            # A refused login: RabbitMQ sends the close and drops the socket at once.
            self._abort()

    def _silent_close(self) -> None:
        # Nothing more is read or answered; the socket closes after the delay.
        for channel in list(self.channels.values()):
            channel.release()
        self.channels.clear()
        self.state = "silent"
        self.buffer = bytearray()
        if self._close_timer is not None:
            self._close_timer.cancel()
        self._close_timer = asyncio.get_running_loop().call_later(
            self.broker.silent_close_delay, self._abort
        )

    def close_connection(self, error: AMQPError) -> None:
        """Send connection.close with ``error``'s code and wait (a while) for close-ok."""
        if self.state in ("gone", "closing", "silent"):
            return
        for channel in list(self.channels.values()):
            channel.release()
        self.channels.clear()
        self.state = "closing"
        self.write(
            method_frame(
                0,
                c.Connection.Close(
                    reply_code=error.code,
                    reply_text=error.text[:255],
                    class_id=error.class_id,
                    method_id=error.method_id,
                ),
            )
        )
        loop = asyncio.get_running_loop()
        self._close_timer = loop.call_later(CLOSE_OK_TIMEOUT, self._abort)

    def force_close(self) -> None:
        """The broker stops: tell the client (320 CONNECTION_FORCED)."""
        if not self.pre_open:
            self.close_connection(AMQPError(CONNECTION_FORCED, "broker shutdown"))
        self._close_transport()
        self.cleanup()

    def _abort(self) -> None:
        # Dropped at once, whatever is still queued for the client: a client that stopped
        # reading must not hold its socket and buffers (RabbitMQ's heartbeat timeout too).
        self.flush()
        if self.transport is not None:
            self.transport.abort()
        self.cleanup()

    # ------------------------------------------------------------------ memory alarm

    def _publish_received(self) -> None:
        # As RabbitMQ's reader: once a connection publishes while the memory alarm is on,
        # it is blocked: told so (if it asked to be), and not read until the alarm clears.
        if self.broker.vhost.memory.alarm and not self.blocked:
            self.blocked = True
            if self.capability("connection.blocked"):
                self.write(method_frame(0, c.Connection.Blocked(reason="low on memory")))
                self._blocked_sent = True
            self._update_reading()

    def unblocked(self) -> None:
        """The memory alarm cleared: read again, and say so if blocked was said."""
        if not self.blocked:
            return
        self.blocked = False
        if self._blocked_sent and self.state == "open":
            self.write(method_frame(0, c.Connection.Unblocked()))
        self._blocked_sent = False
        self._update_reading()

    # ------------------------------------------------------------------ heartbeats

    def _schedule_heartbeat(self) -> None:
        loop = asyncio.get_running_loop()
        # Send when idle for half the interval; give up after two intervals of silence.
        self._heartbeat_timer = loop.call_later(self.heartbeat / 2, self._heartbeat_tick)

    def _heartbeat_tick(self) -> None:
        if self.state == "gone":
            return
        if not self._sent:
            self.write(HEARTBEAT_FRAME)
        self._sent = False
        if self._received or self._reading_paused:
            # Silence we caused (reading stopped) is not the client's: RabbitMQ pauses its
            # heartbeat monitor while a connection is blocked.
            self._missed = 0
        else:
            self._missed += 1
            if self._missed >= 4:  # two heartbeat intervals, checked every half interval
                self._abort()
                return
        self._received = False
        self._schedule_heartbeat()


class _Reset(Exception):
    """The client sent what RabbitMQ's reader cannot parse at all: the socket is reset."""


class _Closed(AMQPError):
    """The socket is already closed (a failed login without authentication_failure_close):
    nothing more is sent."""

    def __init__(self) -> None:
        super().__init__(CONNECTION_FORCED, "closed")


_serials = itertools.count()
_FRAME_TYPES = frozenset((FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT))


def _snippet(payload: bytes) -> str:
    # rabbit_reader's payload_snippet: the whole payload up to 16 octets, else the first 16.
    if len(payload) <= 16:
        return f"all octets = {io_format(bytes(payload), unicode=False)}"
    return f"first 16 octets = {io_format(bytes(payload[:16]), unicode=False)}"


def _is_loopback(peer: Any) -> bool:
    # A peer address (host, port[, ...]) on the machine itself; a Unix socket has none.
    if not isinstance(peer, tuple) or not peer:
        return True
    try:
        address = ipaddress.ip_address(peer[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback
