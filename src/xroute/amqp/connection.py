"""One client connection: the handshake (PLAIN, AMQPLAIN), tuning, heartbeats, frames in and
out, and which errors close a channel or the whole connection."""

from __future__ import annotations

import asyncio
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
    COMMAND_INVALID,
    CONNECTION_FORCED,
    FRAME_ERROR,
    NOT_ALLOWED,
    SYNTAX_ERROR,
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
    decode_method,
    decode_publish,
    decode_auth_table,
    method_frame,
)

if TYPE_CHECKING:
    from xroute.amqp.broker import Broker

log = logging.getLogger(__name__)

# What the broker offers in connection.tune (RabbitMQ's defaults).
CHANNEL_MAX = 2047
FRAME_MAX = 131072
HEARTBEAT = 60
FRAME_MIN = 4096  # frames before tuning may be this large (AMQP 0-9-1)
CLOSE_OK_TIMEOUT = 5.0
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
        self._flush_scheduled = False
        self._in_data = False

    # ------------------------------------------------------------------ transport

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.cleanup()
        if self._close_timer is not None:
            self._close_timer.cancel()
        self.broker.connections.discard(self)

    def cleanup(self) -> None:
        """Close every channel (requeueing their deliveries) and drop exclusive queues."""
        if self.state == "gone":
            return
        self.state = "gone"
        for timer in (self._heartbeat_timer, self._close_timer):
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
        self._want_flush()

    def write_many(self, parts: list[bytes]) -> None:
        self._out += parts
        self._want_flush()

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
        if self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(out)
            self._sent = True

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
        self._received = True
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
                return
            self._start()
        offset = 0
        size_limit = self.frame_max
        try:
            while len(buffer) - offset >= 7:
                kind, channel, size = _frame_header.unpack_from(buffer, offset)
                if size + 8 > size_limit and size_limit:
                    raise AMQPError(
                        FRAME_ERROR, f"frame size {size + 8} larger than negotiated {size_limit}"
                    )
                end = offset + 7 + size
                if len(buffer) <= end:
                    break
                if buffer[end] != FRAME_END:
                    raise AMQPError(FRAME_ERROR, "frame end octet missing")
                payload = bytes(buffer[offset + 7 : end])
                offset = end + 1
                self._frame(kind, channel, payload)
                if self.state == "gone":
                    return
        except AMQPError as error:
            del buffer[:offset]
            self.close_connection(error)
            return
        except Exception as error:  # a bug must not leave the client hanging: 541
            log.exception("xroute.amqp: internal error")
            del buffer[:offset]
            self.close_connection(AMQPError(541, f"internal error: {error}"))
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
        if kind == FRAME_HEARTBEAT:
            return
        if number == 0:
            if kind != FRAME_METHOD:
                raise AMQPError(UNEXPECTED_FRAME, f"unexpected frame type {kind} on channel 0")
            self._connection_method(self._decode(payload))
            return
        if self.state != "open":
            raise AMQPError(CHANNEL_ERROR, f"expected 'connection.open' before channel {number}")
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
            raise AMQPError(CHANNEL_ERROR, f"unexpected content frame on closed channel {number}")
        elif kind == FRAME_HEADER:
            self._run(channel, None, lambda: channel.content_header(payload))
        elif kind == FRAME_BODY:
            self._run(channel, None, lambda: channel.content_body(payload))
        else:
            raise AMQPError(FRAME_ERROR, f"unknown frame type {kind}")

    def _decode(self, payload: bytes) -> Any:
        try:
            if payload[:4] == PUBLISH_INDEX:
                return decode_publish(payload)
            return decode_method(payload)
        except KeyError:
            raise AMQPError(COMMAND_INVALID, "unknown method") from None
        except Exception as error:
            raise AMQPError(SYNTAX_ERROR, f"malformed method frame: {error}") from None

    def _run(self, channel: Channel, method: Any, action: Any) -> None:
        try:
            action()
        except AMQPError as error:
            # The method that failed (basic.publish for content) is named in the close.
            class_id, method_id = divmod(method.index, 1 << 16) if method is not None else (60, 40)
            if error.hard:
                error.class_id, error.method_id = class_id, method_id
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
            self.write(method_frame(0, c.Connection.OpenOk()))
        elif isinstance(method, c.Connection.Close):
            # As RabbitMQ: answer close-ok and let the client close the socket (or give up
            # waiting for it after CLOSE_OK_TIMEOUT).
            self.write(method_frame(0, c.Connection.CloseOk()))
            self.cleanup()
            self._close_timer = asyncio.get_running_loop().call_later(
                CLOSE_OK_TIMEOUT, self._close_transport
            )
        elif isinstance(method, c.Connection.UpdateSecret) and state == "open":
            self.write(method_frame(0, c.Connection.UpdateSecretOk()))
        elif isinstance(method, c.Connection.CloseOk):
            self._close_transport()
            self.cleanup()
        elif isinstance(method, (c.Connection.Blocked, c.Connection.Unblocked)):
            return
        else:
            raise AMQPError(
                COMMAND_INVALID, f"unexpected {method.name} in connection state {state!r}"
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
        if user is None or self.broker.users.get(user) != password:
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

    def close_connection(self, error: AMQPError) -> None:
        """Send connection.close with ``error``'s code and wait (a while) for close-ok."""
        if self.state in ("gone", "closing"):
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
        self.close_connection(AMQPError(CONNECTION_FORCED, "broker shutdown"))
        self._close_transport()
        self.cleanup()

    def _abort(self) -> None:
        self._close_transport()
        self.cleanup()

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
        if self._received:
            self._missed = 0
        else:
            self._missed += 1
            if self._missed >= 4:  # two heartbeat intervals, checked every half interval
                self._abort()
                return
        self._received = False
        self._schedule_heartbeat()


class _Closed(AMQPError):
    """The socket is already closed (a failed login without authentication_failure_close):
    nothing more is sent."""

    def __init__(self) -> None:
        super().__init__(CONNECTION_FORCED, "closed")
