"""A soak of `xroute serve` under everything at once (issue 35), in well under a minute: silent
sockets, a consumer that stops reading, a publisher flooding past the memory limit, healthy
consumers, and a healthy client connecting and round-tripping all along. At the end every
message is accounted for, acked exactly once, and the broker holds nothing it should not."""

from __future__ import annotations

import socket
import threading
import time

import pika
from pamqp import commands as c

from tests.amqp.hostile import RawClient, publish_frames
from tests.amqp.test_hostile_clients import (
    hung_consumer,
    no_heartbeats,
    open_descriptors,
    wait_until,
)
from xroute.amqp import Broker
from xroute.amqp.frames import method_frame

COUNT, SIZE = 3_000, 4_096


def flood(url: str, done: threading.Event) -> None:
    """Publish COUNT messages as fast as the broker reads them, pausing while blocked."""
    client = RawClient(url)
    client.handshake(capabilities={"connection.blocked": True})
    client.send(method_frame(1, c.Channel.Open()))
    assert client.method(c.Channel.OpenOk) is not None
    for start in range(0, COUNT, 20):
        client.send(b"".join(
            publish_frames(1, "", "work", b"%08d" % i + b"x" * (SIZE - 8))
            for i in range(start, min(start + 20, COUNT))
        ))
        if client.method(c.Connection.Blocked, seconds=0.001) is not None:
            assert client.method(c.Connection.Unblocked, seconds=30) is not None
    done.set()
    client.method(c.Connection.Close, seconds=60)  # stay connected until the end
    client.close()


def test_everything_at_once():
    with Broker(heartbeat=1, handshake_timeout=1.0, memory_limit=4_000_000) as broker:
        before = open_descriptors()
        setup = pika.BlockingConnection(no_heartbeats(broker.url))
        setup.channel().queue_declare("work")
        silent = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(30)]
        hung = hung_consumer(broker.url, "work")
        acked: list[bytes] = []
        stop = threading.Event()

        def consume() -> None:
            connection = pika.BlockingConnection(no_heartbeats(broker.url))
            channel = connection.channel()
            channel.basic_qos(prefetch_count=20)
            for method, _, body in channel.consume("work", inactivity_timeout=0.2):
                if method is not None:
                    channel.basic_ack(method.delivery_tag)
                    acked.append(body[:8])
                elif stop.is_set():
                    break
            channel.cancel()
            connection.close()

        consumers = [threading.Thread(target=consume) for _ in range(2)]
        published = threading.Event()
        publisher = threading.Thread(target=flood, args=(broker.url, published))
        for thread in [publisher, *consumers]:
            thread.start()
        round_trips: list[float] = []
        deadline = time.monotonic() + 50
        while len(set(acked)) < COUNT and time.monotonic() < deadline:
            started = time.monotonic()
            probe = pika.BlockingConnection(no_heartbeats(broker.url))
            channel = probe.channel()
            queue = channel.queue_declare("", exclusive=True).method.queue
            channel.basic_publish("", queue, b"ping")
            assert channel.basic_get(queue, auto_ack=True)[2] == b"ping"
            probe.close()
            round_trips.append(time.monotonic() - started)
            time.sleep(0.1)
        stop.set()
        for thread in consumers:
            thread.join(30)
        setup.close()
        # Every message acked exactly once, by a healthy consumer.
        assert published.is_set()
        assert sorted(acked) == [b"%08d" % i for i in range(COUNT)], (len(acked),
                                                                      len(set(acked)))
        assert broker.call(lambda: broker.vhost.queues["work"].unacked) == 0
        assert broker.call(lambda: broker.vhost.memory.held) == 0
        for sock in silent:
            sock.settimeout(5)
            assert sock.recv(1) == b""
            sock.close()
        assert hung.wait_closed(10) is not None  # dropped by the heartbeat timeout
        hung.close()
        # The silent sockets and the hung consumer are gone: only the publisher is left.
        assert wait_until(lambda: broker.call(lambda: len(broker.connections)) == 1, 10)
        print(f"\nsoak: {len(round_trips)} round trips by a healthy client, longest "
              f"{max(round_trips) * 1000:.0f} ms; {COUNT} messages acked once each")
        assert round_trips
    publisher.join(30)
    assert open_descriptors() <= before + 2
