"""Replay a script of AMQP operations with typed values on a broker, over a plain socket, and
record every reply and where every message landed: the differential test of `xroute serve`
against RabbitMQ (tests/conformance/test_wire_replay.py) and its recorded answers
(tests/amqp/test_wire_recorded.py).

A script is JSON: a list of operations (``exchange.declare``, ``queue.declare``, ``queue.bind``,
``exchange.bind``, their unbinds, ``exchange.delete``, ``queue.delete``, ``publish``), their
field values tagged with RabbitMQ's type letters (``["s", 5]`` a short, ``["x", "616263"]``
binary as hex, ``["A", [...]]`` an array, ``["F", {...}]`` a table, ``["D", [2, 150]]`` a
decimal, ``["V", null]`` void...). Frames are written here, each value in its own type, with
an encoder of the test's own (not the code under test): pika and py-amqp cannot send a short
or a float32.

The answers: each operation's reply (``"ok"``, or ``[code, text, "channel" | "connection"]``)
and, for each message (its body is its id), the queues its copies landed in, sorted (a queue
is read before it is deleted and at the end).
"""

from __future__ import annotations

import re
import socket
from collections import deque
import struct
from typing import Any

from pamqp import commands as c

from xroute.amqp.frames import decode_method, encode_method_payload
from xroute.bench.amqp import FrameReader

FRAME_METHOD, FRAME_HEADER, FRAME_BODY = 1, 2, 3
_PACK = {"b": ">b", "B": ">B", "s": ">h", "u": ">H", "I": ">i", "i": ">I", "l": ">q",
         "f": ">f", "d": ">d", "T": ">Q"}


# ---------------------------------------------------- values, as RabbitMQ's parser reads them


def encode_value(tagged: list) -> bytes:
    """One tagged field value (its type letter, then its bytes)."""
    letter, value = tagged
    head = letter.encode()
    if letter in _PACK:
        return head + struct.pack(_PACK[letter], value)
    if letter == "t":
        return head + bytes((1 if value else 0,))
    if letter == "V":
        return head
    if letter == "D":
        scale, unscaled = value
        return head + struct.pack(">Bi", scale, unscaled)
    if letter in ("S", "x"):
        data = value.encode("utf-8") if letter == "S" else bytes.fromhex(value)
        return head + struct.pack(">I", len(data)) + data
    if letter == "A":
        data = b"".join(encode_value(item) for item in value)
        return head + struct.pack(">I", len(data)) + data
    if letter == "F":
        data = encode_table(value)
        return head + data
    raise ValueError(f"no AMQP field type {letter!r}")


def encode_table(table: dict[str, list]) -> bytes:
    """A field table of tagged values, its 32-bit length first."""
    data = b""
    for name, tagged in table.items():
        raw = name.encode("utf-8")
        data += bytes((len(raw),)) + raw + encode_value(tagged)
    return struct.pack(">I", len(data)) + data


def _shortstr(text: str) -> bytes:
    raw = text.encode("utf-8")
    return bytes((len(raw),)) + raw


def encode_properties(properties: dict[str, Any], headers: dict[str, list] | None) -> bytes:
    """Basic properties: ``message_id``, ``correlation_id``, ``timestamp`` (seconds) and a
    header table of tagged values (None: no headers property)."""
    flags, parts = 0, []
    if headers is not None:
        flags |= 1 << 13
        parts.append(encode_table(headers))
    if "correlation_id" in properties:
        flags |= 1 << 10
        parts.append(_shortstr(properties["correlation_id"]))
    if "message_id" in properties:
        flags |= 1 << 7
        parts.append(_shortstr(properties["message_id"]))
    if "timestamp" in properties:
        flags |= 1 << 6
        parts.append(struct.pack(">Q", properties["timestamp"]))
    return struct.pack(">H", flags) + b"".join(parts)


# ------------------------------------------------------------------ the client


class Closed(Exception):
    """The broker closed our channel or connection: the reply it gave."""

    def __init__(self, reply: list) -> None:
        super().__init__(reply)
        self.reply = reply


class WireClient:
    """A blocking client on a plain socket: one channel in confirm mode at a time; a closed
    channel or connection is replaced by a new one on the next call."""

    def __init__(self, url: str) -> None:
        self.host, port = re.search(r"@([^:/]+):(\d+)", url).groups()
        self.port = int(port)
        self.sock: socket.socket | None = None
        self.channel = 0

    def _connect(self) -> None:
        from xroute.bench.amqp import raw_handshake

        self.sock = socket.create_connection((self.host, self.port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = FrameReader(self.sock)
        self.pending: deque = deque()
        raw_handshake(self.sock, self.reader)
        self.channel = 0
        self._open_channel()

    def _open_channel(self) -> None:
        self.channel += 1
        self._send(c.Channel.Open())
        self._wait(c.Channel.OpenOk)
        self._send(c.Confirm.Select())
        self._wait(c.Confirm.SelectOk)

    def _ensure(self) -> None:
        if self.sock is None:
            self._connect()

    def _send(self, method: Any, table: bytes | None = None, channel: int | None = None) -> None:
        payload = encode_method_payload(method)
        if table is not None:  # the arguments table is the method's last field
            payload = payload[:-4] + table
        number = self.channel if channel is None else channel
        self.sock.sendall(struct.pack(">BHI", FRAME_METHOD, number, len(payload)) + payload
                          + b"\xce")

    def _frames(self):
        # Frames one at a time; those read past the one asked for wait in `pending`.
        while True:
            if not self.pending:
                self.pending.extend(self.reader.available(block=True))
                continue
            yield self.pending.popleft()

    def _wait(self, *wanted: type) -> Any:
        """The next method of a ``wanted`` class on our channel; `Closed` if the broker closes
        the channel or the connection first (its close is answered)."""
        for kind, number, payload in self._frames():
            if kind != FRAME_METHOD:
                continue
            method = decode_method(payload)
            if isinstance(method, c.Connection.Close):
                self._send(c.Connection.CloseOk(), channel=0)
                self.sock.close()
                self.sock = None
                raise Closed([method.reply_code, method.reply_text, "connection"])
            if number != self.channel:
                continue
            if isinstance(method, c.Channel.Close):
                self._send(c.Channel.CloseOk())
                self._open_channel()
                raise Closed([method.reply_code, method.reply_text, "channel"])
            if isinstance(method, wanted):
                return method
        raise AssertionError("unreachable")

    def call(self, method: Any, table: bytes | None, reply: type) -> list | str:
        """Send ``method`` (with its arguments ``table``) and wait for ``reply``."""
        self._ensure()
        self._send(method, table)
        try:
            self._wait(reply)
        except Closed as closed:
            return closed.reply
        return "ok"

    def publish(self, exchange: str, key: str, properties: bytes, body: bytes) -> list | str:
        """Publish and wait for the confirm: "ok", "nack", or the broker's close."""
        self._ensure()
        self._send(c.Basic.Publish(exchange=exchange, routing_key=key))
        header = struct.pack(">HHQ", 60, 0, len(body)) + properties
        self.sock.sendall(struct.pack(">BHI", FRAME_HEADER, self.channel, len(header)) + header
                          + b"\xce" + struct.pack(">BHI", FRAME_BODY, self.channel, len(body))
                          + body + b"\xce")
        try:
            confirm = self._wait(c.Basic.Ack, c.Basic.Nack)
        except Closed as closed:
            return closed.reply
        return "ok" if isinstance(confirm, c.Basic.Ack) else "nack"

    def drain(self, queue: str) -> list[bytes]:
        """The bodies of every message in ``queue`` (taken with basic.get, no ack)."""
        self._ensure()
        bodies = []
        while True:
            self._send(c.Basic.Get(queue=queue, no_ack=True))
            try:
                got = self._wait(c.Basic.GetOk, c.Basic.GetEmpty)
            except Closed:
                return bodies  # no such queue
            if isinstance(got, c.Basic.GetEmpty):
                return bodies
            size, body = None, b""
            for kind, number, payload in self._frames():
                if number != self.channel:
                    continue
                if kind == FRAME_HEADER:
                    size = struct.unpack_from(">Q", payload, 4)[0]
                elif kind == FRAME_BODY:
                    body += payload
                if size is not None and len(body) >= size:
                    break
            bodies.append(body)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


# ------------------------------------------------------------------ scripts


_REPLIES = {
    "exchange.declare": c.Exchange.DeclareOk,
    "exchange.delete": c.Exchange.DeleteOk,
    "exchange.bind": c.Exchange.BindOk,
    "exchange.unbind": c.Exchange.UnbindOk,
    "queue.declare": c.Queue.DeclareOk,
    "queue.delete": c.Queue.DeleteOk,
    "queue.bind": c.Queue.BindOk,
    "queue.unbind": c.Queue.UnbindOk,
}


def _method(op: dict[str, Any], prefix: str) -> Any:
    kind = op["op"]
    name = prefix + op.get("name", "")
    if kind == "exchange.declare":
        return c.Exchange.Declare(exchange=name, exchange_type=op["type"],
                                  durable=op.get("durable", False), arguments={})
    if kind == "exchange.delete":
        return c.Exchange.Delete(exchange=name)
    if kind == "queue.declare":
        return c.Queue.Declare(queue=name, durable=op.get("durable", False), arguments={})
    if kind == "queue.delete":
        return c.Queue.Delete(queue=name)
    source, destination = prefix + op["source"], prefix + op["destination"]
    key = op.get("key", "")
    if kind == "queue.bind":
        return c.Queue.Bind(queue=destination, exchange=source, routing_key=key, arguments={})
    if kind == "queue.unbind":
        return c.Queue.Unbind(queue=destination, exchange=source, routing_key=key, arguments={})
    if kind == "exchange.bind":
        return c.Exchange.Bind(destination=destination, source=source, routing_key=key,
                               arguments={})
    if kind == "exchange.unbind":
        return c.Exchange.Unbind(destination=destination, source=source, routing_key=key,
                                 arguments={})
    raise ValueError(f"unknown operation {kind!r}")


def names_of(script: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The exchanges and the queues a script declares (short names, in order)."""
    exchanges = [op["name"] for op in script if op["op"] == "exchange.declare"]
    queues = [op["name"] for op in script if op["op"] == "queue.declare"]
    return list(dict.fromkeys(exchanges)), list(dict.fromkeys(queues))


def run_script(url: str, script: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    """Every operation's reply, and where each message's copies landed (see the module)."""
    client = WireClient(url)
    exchanges, queues = names_of(script)
    try:
        for name in exchanges:  # what an earlier run left on a real broker
            client.call(c.Exchange.Delete(exchange=prefix + name), None, c.Exchange.DeleteOk)
        for name in queues:
            client.call(c.Queue.Delete(queue=prefix + name), None, c.Queue.DeleteOk)
        replies: list[Any] = []
        landed: dict[str, list[str]] = {}

        def collect(queue: str) -> None:
            for body in client.drain(prefix + queue):
                landed.setdefault(body.decode(), []).append(queue)

        for op in script:
            if op["op"] == "publish":
                exchange = prefix + op["exchange"] if op["exchange"] else ""
                properties = encode_properties(op.get("properties", {}), op.get("headers"))
                replies.append(client.publish(exchange, op.get("key", ""), properties,
                                              op["id"].encode()))
                continue
            if op["op"] == "queue.delete":
                collect(op["name"])
            table = encode_table(op["arguments"]) if "arguments" in op else None
            replies.append(client.call(_method(op, prefix), table, _REPLIES[op["op"]]))
        for name in queues:
            collect(name)
        for name in exchanges:
            client.call(c.Exchange.Delete(exchange=prefix + name), None, c.Exchange.DeleteOk)
        for name in queues:
            client.call(c.Queue.Delete(queue=prefix + name), None, c.Queue.DeleteOk)
    finally:
        client.close()
    return {"replies": replies, "landed": {k: sorted(v) for k, v in sorted(landed.items())}}


def differences(script: list[dict[str, Any]], expected: dict[str, Any],
                got: dict[str, Any]) -> list[str]:
    """Each operation whose reply differs and each message whose queues differ, readably."""
    out = []
    for op, want, have in zip(script, expected["replies"], got["replies"]):
        if want != have:
            out.append(f"{_show(op)}\n    expected {want}\n    got      {have}")
    by_id = {op["id"]: op for op in script if op["op"] == "publish"}
    for message in sorted(set(expected["landed"]) | set(got["landed"])):
        want, have = expected["landed"].get(message, []), got["landed"].get(message, [])
        if want != have:
            out.append(f"{_show(by_id[message])}\n    expected in {want}\n    got in      {have}")
    return out


def _show(op: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in op.items())
