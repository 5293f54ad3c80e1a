"""Connection-level answers seen on the wire, from a plain socket: the protocol header,
frames on unopened channels, oversized frames; on xroute and (conformance) RabbitMQ."""

from __future__ import annotations

import re
import socket
import struct

from pamqp import commands as c

from xroute.amqp.frames import PROTOCOL_HEADER, decode_method, method_frame
from xroute.bench.amqp import FrameReader, raw_handshake


def open_socket(url: str) -> socket.socket:
    host, port = re.search(r"@([^:/]+):(\d+)", url).groups()
    sock = socket.create_connection((host, int(port)), timeout=5)
    return sock


def connection_close(reader: FrameReader) -> c.Connection.Close:
    while True:
        for kind, channel, payload in reader.available(block=True):
            method = decode_method(payload) if kind == 1 else None
            if isinstance(method, c.Connection.Close):
                return method


def test_a_wrong_protocol_header_gets_ours_back(url):
    sock = open_socket(url)
    sock.sendall(b"AMQP\x00\x00\x08\x00")
    data = b""
    while len(data) < 8:
        chunk = sock.recv(8 - len(data))
        if not chunk:
            break
        data += chunk
    assert data == PROTOCOL_HEADER
    sock.close()


def test_a_method_on_an_unopened_channel_is_504(url):
    sock = open_socket(url)
    reader = FrameReader(sock)
    raw_handshake(sock, reader)
    sock.sendall(method_frame(3, c.Queue.Declare(queue="", exclusive=True)))
    assert connection_close(reader).reply_code == 504
    sock.close()


def test_a_frame_above_frame_max_is_501(url):
    sock = open_socket(url)
    reader = FrameReader(sock)
    raw_handshake(sock, reader)
    sock.sendall(method_frame(1, c.Channel.Open()))
    body = b"x" * 200_000  # one body frame larger than the negotiated 131072
    publish = method_frame(1, c.Basic.Publish(exchange="", routing_key="nowhere"))
    header = struct.pack(">BHIHHQ", 2, 1, 14, 60, 0, len(body)) + b"\x00\x00\xce"
    frame = struct.pack(">BHI", 3, 1, len(body)) + body + b"\xce"
    sock.sendall(publish + header + frame)
    assert connection_close(reader).reply_code == 501
    sock.close()
