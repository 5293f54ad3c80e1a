"""kombu programs on memory and Redis with xroute.kombu, against RabbitMQ's own results for
the same programs (recorded from a real broker, and checked against it by ``make
conformance``): the issue's scenarios and seeded random programs with churn. Also what kombu
without xroute still reads of xroute's Redis state, and a Celery app with topic routing."""

from __future__ import annotations

import uuid
import warnings

import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue

import xroute.kombu
from tests import celery_support
from tests.kombu_programs import differences, program, recorded, recorded_names, run
from tests.kombu_support import installed, redis_url  # noqa: F401 - fixtures
from xroute.bench.kombu import delete_redis_keys


@pytest.fixture
def prefix(redis_url):
    """Redis keys of this test's own (others share this Redis), removed after."""
    prefix = f"xr19-test-{uuid.uuid4().hex[:8]}:"
    yield prefix
    delete_redis_keys(redis_url, prefix)


def connect(transport: str, redis_url: str | None = None, prefix: str = ""):
    if transport == "memory":
        return lambda: Connection("memory://")
    options = {"global_keyprefix": prefix, "polling_interval": 0.05}
    return lambda: Connection(redis_url, transport_options=options)


@pytest.mark.parametrize("name", recorded_names())
def test_memory_delivers_what_rabbitmq_delivers(installed, name):
    steps = program(name)
    got = run(steps, connect("memory"))
    assert not differences(steps, recorded()[name], got), differences(steps, recorded()[name], got)


@pytest.mark.parametrize("name", recorded_names())
def test_redis_delivers_what_rabbitmq_delivers(installed, redis_url, prefix, name):
    steps = program(name)
    got = run(steps, connect("redis", redis_url, prefix))
    assert not differences(steps, recorded()[name], got), differences(steps, recorded()[name], got)


def test_the_recording_holds_deliveries_and_refusals():
    """RabbitMQ's recorded answers are not trivial: messages, redeliveries and refusals."""
    results = recorded()
    assert set(results) == set(recorded_names())
    messages = [m for r in results.values() for q in r["queues"].values() if q for m in q]
    assert len(messages) > 100
    assert any(m.endswith("true]") for m in messages)  # redelivered
    assert any(o.startswith("refused") for r in results.values() for o in r["outcomes"])


def test_requeued_messages_are_marked_redelivered(installed, redis_url, prefix):
    for make in (connect("memory"), connect("redis", redis_url, prefix)):
        with make() as connection:
            channel = connection.channel()
            queue = Queue(f"{prefix}rq", durable=False, channel=channel)
            queue.declare()
            Producer(channel).publish({"n": 1}, routing_key=queue.name)
            first = queue.get()
            assert first.delivery_info["redelivered"] is False
            first.reject(requeue=True)
            again = queue.get(no_ack=True)
            assert (again.payload, again.delivery_info["redelivered"]) == ({"n": 1}, True)
            queue.delete()


def test_kombu_without_xroute_reads_xroutes_redis_state(redis_url, prefix):
    """kombu's own binding sets stay kombu's: a process without xroute routes (its own way)
    through bindings xroute made, and consumes from xroute's queues."""
    options = {"global_keyprefix": prefix, "polling_interval": 0.05}
    xroute.kombu.install()
    try:
        with Connection(redis_url, transport_options=options) as connection:
            channel = connection.channel()
            exchange = Exchange("x", type="topic", durable=False, channel=channel)
            exchange.declare()
            Queue("q", exchange, routing_key="a.*", durable=False, channel=channel).declare()
    finally:
        xroute.kombu.uninstall()
    with Connection(redis_url, transport_options=options) as plain:
        channel = plain.channel()
        assert not isinstance(channel, xroute.kombu.XRouteChannel)
        Exchange("x", type="topic", durable=False, channel=channel).declare()
        Producer(channel).publish({"n": 1}, exchange="x", routing_key="a.b")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert Queue("q", channel=channel).get(no_ack=True).payload == {"n": 1}


def test_celery_topic_routing_on_redis(installed, redis_url):
    """A Celery app's tasks reach the queues RabbitMQ's routing gives (make conformance
    compares with the real broker too)."""
    prefix = celery_support.new_prefix()
    try:
        app = celery_support.make_app(redis_url, prefix, {"global_keyprefix": prefix})
        assert celery_support.send_and_collect(app, prefix) == celery_support.expected()
    finally:
        delete_redis_keys(redis_url, prefix)


def test_an_auto_delete_queue_goes_with_its_last_consumer(installed, redis_url, prefix):
    for make in (connect("memory"), connect("redis", redis_url, prefix)):
        with make() as connection, make() as other:
            channel = connection.channel()
            exchange = Exchange(f"{prefix}events", type="fanout", durable=False, channel=channel)
            queue = Queue(f"{prefix}monitor", exchange, durable=False, auto_delete=True,
                          channel=channel)
            queue.declare()
            consumer = Consumer(other.channel(), queues=[queue], accept=["json"])
            consumer.consume()
            Producer(channel).publish({"n": 1}, exchange=exchange)
            assert channel.broker.has_queue(queue.name)
            consumer.cancel()
            assert not channel.broker.has_queue(queue.name)  # its bindings and messages too
            Producer(channel).publish({"n": 2}, exchange=exchange)
            assert queue.get(no_ack=True) is None
            exchange.delete()
