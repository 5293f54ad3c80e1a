"""``xroute bench amqp``: end-to-end messages/s (publish, route, deliver, ack) through
`xroute serve` and through RabbitMQ, with the same clients: pika, aiormq and a pipelined raw
client; confirms on and off; 1 and 10,000 topic bindings; and the broker's start-up time.

Each run publishes one 8-word key (`KEY`) to a topic exchange whose binding ``bench.#`` leads
to the consumed queue; the other bindings are the seed articles' mix (`xroute.bench.workload`:
1 to 8 parts, each a word 70%, ``*`` 20%, ``#`` 10%) and lead to a queue nobody reads (the few
that match the key too fill it). That mix is what makes RabbitMQ 3.10's topic trie slow: with
10k bindings its walk explores every ``#`` and ``*`` branch for each of the key's words (483
msg/s was measured here before; ``p<i>.*.x`` bindings, which the first word prunes, cost it
nothing). A run is checked before it counts: every message is delivered once to the queue.
"""

from __future__ import annotations

import asyncio
import re
import socket
import statistics
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pamqp import commands as c

from xroute.amqp.frames import (
    FRAME_METHOD,
    PROTOCOL_HEADER,
    content_frames,
    method_frame,
)
from xroute.bench.owned import Owned

# Eight words, none in the seed vocabulary (w0..w999): deep enough for the seed mix's '#'
# bindings to be walked at every word, as the seed articles' keys of up to 8 parts were.
KEY = "bench.k1.k2.k3.k4.k5.k6.k7"
BINDINGS_SEED = 6000  # the seed mix is drawn from Random(BINDINGS_SEED + bindings)
CLIENTS = ("pika", "aiormq", "raw")


class CheckFailed(AssertionError):
    """A run delivered other than every message exactly once: a bug, not a result."""


# ---------------------------------------------------------------------- brokers


@contextmanager
def xroute_serve() -> Iterator[tuple[str, float]]:
    """`xroute serve` in a process of its own (its own core and GIL, as RabbitMQ has); its
    URL and the seconds until it listened (Python's start and imports included)."""
    src = str(Path(__file__).resolve().parents[2])
    began = time.perf_counter()
    owned = Owned("xroute-serve")
    process = owned.popen(
        [sys.executable, "-c", "from xroute.cli import main; main()", "serve", "--port", "0"],
        stderr=subprocess.PIPE, text=True, env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"},
    )
    try:
        line = process.stderr.readline()
        seconds = time.perf_counter() - began
        found = re.search(r"amqp://(\S+?)/", line)  # the address: no credentials are printed
        if found is None:
            raise CheckFailed(f"xroute serve did not start: {line!r}")
        yield f"amqp://guest:guest@{found.group(1)}/", seconds
    finally:
        owned.stop(grace=10)
        process.wait(10)


def startup_in_process(repeat: int = 20) -> float:
    """Median seconds for ``Broker().start()`` (the fixture's cost), imports already done."""
    from xroute.amqp import Broker

    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        broker = Broker().start()
        times.append(time.perf_counter() - began)
        broker.stop()
    return statistics.median(times)


def declare(url: str, bindings: int, prefix: str) -> tuple[str, str]:
    """The exchange and the consumed queue, with ``bindings`` topic bindings in all: the
    consumed queue's ``bench.#`` and ``bindings - 1`` of the seed mix to another queue."""
    import pika

    from xroute.bench.workload import seed_patterns

    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    exchange, queue, other = prefix + "x", prefix + "q", prefix + "other"
    channel.exchange_declare(exchange, "topic")
    channel.queue_declare(queue)  # not auto-delete: each run's consumer comes and goes
    channel.queue_declare(other)
    channel.queue_bind(queue, exchange, "bench.#")
    for pattern in seed_patterns(bindings - 1, seed=BINDINGS_SEED + bindings):
        channel.queue_bind(other, exchange, pattern)
    connection.close()
    return exchange, queue


def teardown(url: str, prefix: str) -> None:
    import pika

    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    for name in ("q", "other"):
        channel.queue_delete(prefix + name)
    channel.exchange_delete(prefix + "x")
    connection.close()


# ---------------------------------------------------------------------- clients


def run_pika(url: str, exchange: str, queue: str, count: int, confirms: bool) -> float:
    """pika's BlockingConnection: publish ``count`` (each confirm awaited when on), then
    consume and ack them all; seconds."""
    import pika

    connection = pika.BlockingConnection(pika.URLParameters(url))
    publisher, consumer = connection.channel(), connection.channel()
    if confirms:
        publisher.confirm_delivery()
    consumer.basic_qos(prefetch_count=500)
    received = 0
    body = b"x" * 64

    def on_message(channel, method, properties, payload):
        nonlocal received
        received += 1
        if received % 100 == 0 or received == count:
            channel.basic_ack(method.delivery_tag, multiple=True)

    began = time.perf_counter()
    consumer.basic_consume(queue, on_message)
    for _ in range(count):  # the hot loop of `xroute bench amqp` (pika)
        publisher.basic_publish(exchange, KEY, body)
    while received < count:
        connection.process_data_events(0.1)
    seconds = time.perf_counter() - began
    connection.close()
    _check(received, count)
    return seconds


def run_aiormq(url: str, exchange: str, queue: str, count: int, confirms: bool) -> float:
    """aiormq: publishes in flights of 100 awaited together; a consumer acking every 100."""
    import aiormq

    async def scenario() -> float:
        connection = await aiormq.connect(url)
        publisher = await connection.channel(publisher_confirms=confirms)
        consumer = await connection.channel()
        await consumer.basic_qos(prefetch_count=500)
        done = asyncio.get_running_loop().create_future()
        received = 0

        async def on_message(message):
            nonlocal received
            received += 1
            if received % 100 == 0 or received == count:
                await consumer.basic_ack(message.delivery.delivery_tag, multiple=True)
            if received == count and not done.done():
                done.set_result(None)

        body = b"x" * 64
        began = time.perf_counter()
        await consumer.basic_consume(queue, on_message)
        for start in range(0, count, 100):  # the hot loop of `xroute bench amqp` (aiormq)
            await asyncio.gather(*(
                publisher.basic_publish(body, exchange=exchange, routing_key=KEY)
                for _ in range(min(100, count - start))
            ))
        await asyncio.wait_for(done, 120)
        seconds = time.perf_counter() - began
        await connection.close()
        _check(received, count)
        return seconds

    return asyncio.run(scenario())


def run_raw(url: str, exchange: str, queue: str, count: int, confirms: bool) -> float:
    """A pipelined client on a plain socket: every publish written before reading anything,
    acks every 1,000 deliveries; seconds until all were delivered (and confirmed)."""
    host, port = re.search(r"@([^:/]+):(\d+)", url).groups()
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader = FrameReader(sock)
    raw_handshake(sock, reader)
    sock.sendall(method_frame(1, c.Channel.Open()) + method_frame(2, c.Channel.Open()))
    reader.until(lambda f: f[0] == FRAME_METHOD and f[2][:4] == b"\x00\x14\x00\x0b", 2)
    if confirms:
        sock.sendall(method_frame(1, c.Confirm.Select()))
        reader.until(lambda f: f[2][:4] == b"\x00\x55\x00\x0b")
    sock.sendall(method_frame(2, c.Basic.Qos(prefetch_count=5000))
                 + method_frame(2, c.Basic.Consume(queue=queue, consumer_tag="raw")))
    reader.until(lambda f: f[2][:4] == b"\x00\x3c\x00\x15")  # consume-ok
    one = b"".join([method_frame(1, c.Basic.Publish(exchange=exchange, routing_key=KEY))]
                   + content_frames(1, b"\x00\x00", b"x" * 64, 131072))
    delivered = confirmed = 0
    began = time.perf_counter()
    batch = 1000
    sent = 0
    while delivered < count or (confirms and confirmed < count):
        if sent < count:  # the hot loop of `xroute bench amqp` (raw)
            n = min(batch, count - sent)
            sock.sendall(one * n)
            sent += n
        for kind, channel, payload in reader.available(block=sent >= count):
            if kind == FRAME_METHOD and payload[:4] == b"\x00\x3c\x00\x3c":
                delivered += 1
                if delivered % 1000 == 0 or delivered == count:
                    sock.sendall(method_frame(2, c.Basic.Ack(delivery_tag=delivered,
                                                             multiple=True)))
            elif kind == FRAME_METHOD and payload[:4] == b"\x00\x3c\x00\x50":
                tag, multiple = struct.unpack_from(">QB", payload, 4)
                confirmed = tag if multiple else confirmed + 1
    seconds = time.perf_counter() - began
    sock.close()
    _check(delivered, count)
    return seconds


class FrameReader:
    """Frames from a plain socket: (type, channel, payload) tuples, as they come."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def available(self, block: bool) -> list[tuple[int, int, bytes]]:
        self.sock.setblocking(block)
        try:
            data = self.sock.recv(1 << 20)
        except BlockingIOError:
            data = b""
        finally:
            self.sock.setblocking(True)
        if block and not data:
            raise CheckFailed("the broker closed the connection")
        self.buffer += data
        frames, offset, buffer = [], 0, self.buffer
        while len(buffer) - offset >= 8:
            kind, channel, size = struct.unpack_from(">BHI", buffer, offset)
            if len(buffer) - offset < size + 8:
                break
            frames.append((kind, channel, bytes(buffer[offset + 7 : offset + 7 + size])))
            offset += size + 8
        del buffer[:offset]
        return frames

    def until(self, wanted: Callable, times: int = 1) -> None:
        seen = 0
        while seen < times:
            for frame in self.available(block=True):
                if frame[0] == FRAME_METHOD and frame[2][:4] == b"\x00\x0a\x00\x32":
                    raise CheckFailed(f"the broker closed the connection: {frame[2]!r}")
                seen += bool(wanted(frame))


def raw_handshake(sock: socket.socket, reader: FrameReader) -> None:
    """Log in as guest with PLAIN and open the default virtual host, without heartbeats."""
    sock.sendall(PROTOCOL_HEADER)
    reader.until(lambda f: f[2][:4] == b"\x00\x0a\x00\x0a")  # start
    sock.sendall(method_frame(0, c.Connection.StartOk(
        client_properties={"product": "xroute-bench"}, mechanism="PLAIN",
        response="\x00guest\x00guest", locale="en_US")))
    reader.until(lambda f: f[2][:4] == b"\x00\x0a\x00\x1e")  # tune
    sock.sendall(method_frame(0, c.Connection.TuneOk(channel_max=16, frame_max=131072,
                                                     heartbeat=0))
                 + method_frame(0, c.Connection.Open(virtual_host="/")))
    reader.until(lambda f: f[2][:4] == b"\x00\x0a\x00\x29")  # open-ok


RUNNERS = {"pika": run_pika, "aiormq": run_aiormq, "raw": run_raw}


def _check(received: int, count: int) -> None:
    if received != count:
        raise CheckFailed(f"{received} deliveries for {count} messages")


# ---------------------------------------------------------------------- the run


def run(
    rabbitmq_url: str | None,
    clients: list[str],
    bindings: list[int],
    messages: dict[str, int],
    report: Callable[[str], None],
) -> dict[str, Any]:
    """Every cell (broker x client x confirms x bindings); results as a JSON-able dict."""
    from xroute.bench.experiments.machine import load_average

    results: dict[str, Any] = {"runs": [], "startup": {}, "meta": {
        "load_average_start": load_average(), "key": KEY, "messages": messages,
        "bindings": "bench.# to the consumed queue; the rest the seed mix (70% words, 20% *, "
                    "10% #, 1-8 parts) to another",
        "note": "one shared 2-core machine; the client and the broker share it",
    }}
    results["startup"]["broker_start_in_process_s"] = round(startup_in_process(), 5)
    with xroute_serve() as (xroute_url, serve_seconds):
        results["startup"]["xroute_serve_process_s"] = round(serve_seconds, 3)
        targets = [("xroute", xroute_url)] + ([("rabbitmq", rabbitmq_url)] if rabbitmq_url else [])
        for broker, url in targets:
            for count_bindings in bindings:
                prefix = f"xr-bench-{uuid.uuid4().hex[:6]}-"
                exchange, queue = declare(url, count_bindings, prefix)
                try:
                    for client in clients:
                        for confirms in (False, True):
                            count = messages[client]
                            if broker == "rabbitmq" and count_bindings >= 10_000:
                                # RabbitMQ 3.10: ~500 msg/s here with the seed mix; ~10 s a cell
                                count = max(200, min(count // 20, 5000))
                            seconds = RUNNERS[client](url, exchange, queue, count, confirms)
                            rate = count / seconds
                            results["runs"].append({
                                "broker": broker, "client": client, "confirms": confirms,
                                "bindings": count_bindings, "messages": count,
                                "seconds": round(seconds, 3), "messages_per_s": round(rate, 1),
                            })
                            report(f"{broker:8} {client:6} bindings={count_bindings:<6} "
                                   f"confirms={'on ' if confirms else 'off'} {rate:10,.0f} msg/s")
                finally:
                    teardown(url, prefix)
    results["meta"]["load_average_end"] = load_average()
    return results
