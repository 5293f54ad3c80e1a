"""aiormq (aio-pika's client) and kombu over pyamqp://, on xroute's broker and
(conformance) on RabbitMQ; and the broker on the caller's own asyncio loop."""

from __future__ import annotations

import asyncio

import aiormq
import kombu
from pamqp import commands as spec

from xroute.amqp import Broker


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


async def _nack_dead_letters_and_cancel_notify(url: str, name: str) -> None:
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        await channel.exchange_declare(name + "dlx", exchange_type="fanout", auto_delete=True)
        dead = (await channel.queue_declare(name + "dead", exclusive=True)).queue
        await channel.queue_bind(dead, name + "dlx")
        source = (await channel.queue_declare(
            name + "src", exclusive=True, arguments={"x-dead-letter-exchange": name + "dlx"}
        )).queue
        for body in (b"a", b"b", b"c"):
            confirm = await channel.basic_publish(body, routing_key=source)
            assert isinstance(confirm, spec.Basic.Ack)
        got: list[aiormq.abc.DeliveredMessage] = []
        arrived = asyncio.Event()

        async def on_message(message):
            got.append(message)
            if len(got) == 3:
                arrived.set()

        await channel.basic_qos(prefetch_count=10)
        consume = await channel.basic_consume(source, on_message)
        await arrived.wait()
        await channel.basic_nack(got[1].delivery_tag, multiple=True, requeue=False)
        await channel.basic_nack(got[2].delivery_tag, requeue=True)
        redelivered = await _wait_for(lambda: len(got) == 4, got)
        assert redelivered[3].body == b"c" and redelivered[3].redelivered
        await channel.basic_ack(got[3].delivery_tag)
        letters = []
        for _ in range(2):
            letters.append(await _get(channel, dead))
        assert sorted(m.body for m in letters) == [b"a", b"b"]
        assert letters[0].header.properties.headers["x-death"][0]["reason"] == "rejected"
        # Deleting the queue cancels the consumer: the client hears of it.
        other = await connection.channel()
        await other.queue_delete(source)
        await _wait_for(lambda: consume.consumer_tag not in channel.consumers, None)
    finally:
        await connection.close()


async def _wait_for(predicate, value, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)
    return value


async def _get(channel, queue, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        message = await channel.basic_get(queue, no_ack=True)
        if isinstance(message.delivery, spec.Basic.GetOk):
            return message
        assert asyncio.get_running_loop().time() < deadline, f"nothing in {queue}"
        await asyncio.sleep(0.02)


def test_aiormq_nack_dead_letters_requeue_and_cancel_notify(url, name):
    run(_nack_dead_letters_and_cancel_notify(url, name))


async def _topic_round_trip(url: str, name: str) -> list[bytes]:
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        await channel.exchange_declare(name + "t", exchange_type="topic", auto_delete=True)
        queue = (await channel.queue_declare("", exclusive=True)).queue
        await channel.queue_bind(queue, name + "t", routing_key="a.*.c")
        await channel.queue_bind(queue, name + "t", routing_key="#.z")
        for key in ("a.b.c", "a.b", "x.y.z", "z", "a.c"):
            await channel.basic_publish(key.encode(), exchange=name + "t", routing_key=key)
        out = []
        while True:
            message = await channel.basic_get(queue, no_ack=True)
            if not isinstance(message.delivery, spec.Basic.GetOk):
                return out
            out.append(message.body)
    finally:
        await connection.close()


def test_aiormq_topic_routing(url, name):
    assert run(_topic_round_trip(url, name)) == [b"a.b.c", b"x.y.z", b"z"]


def test_broker_runs_on_the_callers_loop():
    async def scenario():
        async with Broker() as broker:
            connection = await aiormq.connect(broker.url)
            channel = await connection.channel()
            queue = (await channel.queue_declare("", exclusive=True)).queue
            await channel.basic_publish(b"same loop", routing_key=queue)
            message = await _get(channel, queue)
            await connection.close()
            return message.body

    assert run(scenario()) == b"same loop"


def test_kombu_pyamqp_producer_consumer(url, name):
    pyamqp = url.replace("amqp://", "pyamqp://", 1)
    exchange = kombu.Exchange(name + "k", "direct", auto_delete=True)
    queue = kombu.Queue(name + "kq", exchange, routing_key="job", auto_delete=True)
    received = []
    with kombu.Connection(pyamqp) as connection:
        with connection.Consumer(queue, callbacks=[lambda body, m: (received.append(body),
                                                                      m.ack())]):
            producer = connection.Producer()
            producer.publish({"n": 1}, exchange=exchange, routing_key="job",
                             declare=[queue], serializer="json")
            producer.publish({"n": 2}, exchange=exchange, routing_key="other",
                             serializer="json")
            for _ in range(10):  # the delivery may already have been read by publish
                try:
                    connection.drain_events(timeout=0.2)
                except TimeoutError:
                    if received:
                        break
    assert received == [{"n": 1}]
