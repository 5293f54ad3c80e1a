"""A raw AMQP client for the hostile-input tests: frames written by hand, so a test can send
what no library would (a body longer than its header says, a heartbeat on a channel), stop
reading, or never log in; and frames read with a deadline, never blocking a test forever."""

from __future__ import annotations

import re
import select
import socket
import struct
import time
from typing import Any

from pamqp import commands as c

from xroute.amqp.frames import PROTOCOL_HEADER, decode_method, method_frame
from xroute.core.field_table import encode_table

_frame_header = struct.Struct(">BHI")


def address(url: str) -> tuple[str, int]:
    """(host, port) of an ``amqp://`` URL."""
    host, port = re.search(r"@([^:/]+):(\d+)", url).groups()
    return host, int(port)


class RawClient:
    """One socket speaking AMQP frames, read with deadlines."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(address(url), timeout=timeout)
        self.buffer = bytearray()
        self.closed = False
        self.pending: list[tuple[int, int, bytes]] = []  # read, not yet looked at

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frames(self, seconds: float) -> list[tuple[int, int, bytes]]:
        """The frames that have arrived, waiting up to ``seconds`` for the first."""
        if self.pending:
            found, self.pending = self.pending, []
            return found
        deadline = time.monotonic() + seconds
        found = []
        while not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                break
            try:
                data = self.sock.recv(1 << 20)
            except (ConnectionResetError, TimeoutError):
                data = b""
            if not data:
                self.closed = True
                break
            self.buffer += data
            found += self._parse()
            if found:
                break
        return found

    def _parse(self) -> list[tuple[int, int, bytes]]:
        found, offset, buffer = [], 0, self.buffer
        while len(buffer) - offset >= 8:
            kind, channel, size = _frame_header.unpack_from(buffer, offset)
            if len(buffer) - offset < size + 8:
                break
            found.append((kind, channel, bytes(buffer[offset + 7 : offset + 7 + size])))
            offset += size + 8
        del buffer[:offset]
        return found

    def method(self, kind: type, seconds: float = 10.0) -> Any:
        """The first method of type ``kind`` within ``seconds``, else None."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and (self.pending or not self.closed):
            frames = self.frames(deadline - time.monotonic())
            for index, (frame_kind, _channel, payload) in enumerate(frames):
                if frame_kind == 1:
                    found = decode_method(payload)
                    if isinstance(found, kind):
                        self.pending = frames[index + 1 :] + self.pending
                        return found
        return None

    def frame(self, kind: int, seconds: float = 10.0) -> bytes | None:
        """The payload of the first frame of type ``kind`` within ``seconds``, else None."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and (self.pending or not self.closed):
            frames = self.frames(deadline - time.monotonic())
            for index, (frame_kind, _channel, payload) in enumerate(frames):
                if frame_kind == kind:
                    self.pending = frames[index + 1 :] + self.pending
                    return payload
        return None

    def wait_closed(self, seconds: float) -> list[tuple[int, int, bytes]] | None:
        """The frames that came before the broker closed the socket, if it does within
        ``seconds``; None if it did not."""
        deadline = time.monotonic() + seconds
        seen: list[tuple[int, int, bytes]] = []
        while not self.closed and time.monotonic() < deadline:
            seen += self.frames(deadline - time.monotonic())
        return seen if self.closed else None

    def handshake(self, heartbeat: int = 0, capabilities: dict | None = None,
                  user: str = "guest", password: str = "guest") -> None:
        """Log in with PLAIN and open ``/``."""
        self.send(PROTOCOL_HEADER)
        assert self.method(c.Connection.Start) is not None
        properties = {"product": "xroute-tests", "capabilities": capabilities or {}}
        self.send(method_frame(0, c.Connection.StartOk(
            client_properties=properties, mechanism="PLAIN",
            response=f"\x00{user}\x00{password}", locale="en_US")))
        tune = self.method(c.Connection.Tune)
        assert tune is not None, "no connection.tune: the login was refused"
        self.send(method_frame(0, c.Connection.TuneOk(channel_max=16, frame_max=131072,
                                                      heartbeat=heartbeat))
                  + method_frame(0, c.Connection.Open(virtual_host="/")))
        assert self.method(c.Connection.OpenOk) is not None

    def close(self) -> None:
        self.sock.close()


def publish_frames(channel: int, exchange: str, routing_key: str, body: bytes,
                   headers: dict | None = None, size: int | None = None,
                   class_id: int = 60) -> bytes:
    """basic.publish, its content header and one body frame, the names and key taken as the
    bytes they are (surrogate escapes included) and the headers with their types."""
    publish = c.Basic.Publish()
    publish.exchange, publish.routing_key = exchange, routing_key
    properties = b"\x00\x00"
    if headers is not None:
        properties = struct.pack(">H", 1 << 13) + encode_table(headers)
    size = len(body) if size is None else size
    frames = method_frame(channel, publish) + struct.pack(
        ">BHIHHQ", 2, channel, 12 + len(properties), class_id, 0, size
    ) + properties + b"\xce"
    if body:
        frames += _frame_header.pack(3, channel, len(body)) + body + b"\xce"
    return frames

