"""xroute.kombu over kombu's Redis transport, on a real Redis: the one on 127.0.0.1:6379, else
a private redis-server started (installed from Debian if absent) and stopped afterwards."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from kombu import Connection, Exchange, Producer, Queue

import xroute.kombu
from tests.kombu_support import (  # noqa: F401 - redis_url and installed are fixtures
    Case,
    expected,
    headers_cases,
    installed,
    mismatch,
    redis_url,
    through_kombu,
    topic_cases,
)
from xroute.bench.kombu import delete_redis_keys
from xroute.bench.redis import RedisUnavailable

EXAMPLES = settings(
    max_examples=25,
    deadline=None,
    # install() and the Redis connection are meant to serve every example
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture
def prefix():
    """A key prefix of this test's own: others share this Redis."""
    return f"xroute-kombu-test-{uuid.uuid4().hex[:10]}:"


@pytest.fixture
def redis(redis_url, prefix):
    # A short BRPOP (polling_interval): closing a consuming channel waits for the one in flight.
    options = {"global_keyprefix": prefix, "polling_interval": 0.05}
    with Connection(redis_url, transport_options=options) as connection:
        yield connection
    delete_redis_keys(redis_url, prefix)


@EXAMPLES
@given(case=topic_cases())
def test_random_topic_topologies_match_topology_route(installed, redis, case):
    want, got = expected(case), through_kombu(redis, case)
    assert got == want, mismatch(case, want, got)


@EXAMPLES
@given(case=headers_cases())
def test_random_headers_topologies_match_topology_route(installed, redis, case):
    want, got = expected(case), through_kombu(redis, case)
    assert got == want, mismatch(case, want, got)


@pytest.mark.parametrize(
    "case",
    [
        Case("direct", [("a", None, 0), ("b", None, 1)],
             [("a", {}), ("z", {"CC": ["b"]}), ("a", {"BCC": ["b"]})]),
        Case("x-delimiter", [("a", None, 0), ("b", None, 1), ("", None, 2)],
             [(":a:b", {}), ("", {}), (":", {})]),
    ],
    ids=["direct-cc-bcc", "x-delimiter"],
)
def test_other_exchange_types(installed, redis, case):
    want, got = expected(case), through_kombu(redis, case)
    assert got == want, mismatch(case, want, got)
    assert any(got.values())


OTHER_PROCESS = textwrap.dedent(
    """
    import sys
    from kombu import Connection, Exchange, Queue, binding
    url, prefix, kind, action, with_xroute = sys.argv[1:6]
    if with_xroute == "1":
        import xroute.kombu
        xroute.kombu.install()
    with Connection(url, transport_options={"global_keyprefix": prefix,
                                             "polling_interval": 0.05}) as connection:
        channel = connection.channel()
        exchange = Exchange("x", type=kind, durable=False, channel=channel)
        exchange.declare()
        if kind == "topic":
            queue = Queue("remote", exchange, routing_key="a.#", durable=False, channel=channel)
        else:
            queue = Queue("remote", durable=False, channel=channel, bindings=[
                binding(exchange, routing_key="r", arguments={"x-match": "any", "h": 1.5})])
        queue.declare()
        if action == "unbind":
            # kombu's Redis transport removes a binding's row when its queue is deleted
            queue.delete()
    """
)


def other_process(url: str, prefix: str, kind: str, action: str, with_xroute: bool) -> None:
    """Bind (or bind and delete) queue 'remote' to exchange 'x' from another Python process."""
    subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, url, prefix, kind, action, str(int(with_xroute))],
        check=True, timeout=60,
    )


def test_a_binding_made_or_removed_by_another_process_shows_at_the_next_publish(
    installed, redis, redis_url, prefix
):
    channel = redis.channel()
    exchange = Exchange("x", type="topic", durable=False, channel=channel)
    exchange.declare()
    Queue("local", exchange, routing_key="#.b", durable=False, channel=channel).declare()
    route = lambda key: set(channel.route("x", key))  # noqa: E731
    assert route("a") == set()  # the other process has not bound yet: AMQP's a.# would match
    assert route("a.b") == {"local"}
    builds = channel.broker.builds
    assert route("a.b") == {"local"}
    assert channel.broker.builds == builds  # nothing changed: the topology is kept
    # A process without xroute binds: kombu writes the row, xroute reads it (a.# matches a).
    other_process(redis_url, prefix, "topic", "bind", with_xroute=False)
    assert route("a") == {"remote"}
    assert route("a.b") == {"local", "remote"}
    assert channel.broker.builds == builds + 1
    other_process(redis_url, prefix, "topic", "unbind", with_xroute=False)
    assert route("a.b") == {"local"}
    assert channel.broker.builds == builds + 2


def test_publishes_build_the_topology_once_and_keep_it(installed, redis):
    channel = redis.channel()
    exchange = Exchange("x", type="topic", durable=False, channel=channel)
    exchange.declare()
    Queue("all", exchange, routing_key="#", durable=False, channel=channel).declare()
    producer = Producer(channel, exchange=exchange)
    builds = channel.broker.builds
    for key in ["", "a", "a.b"]:
        producer.publish({"k": key}, routing_key=key)
    # Each publish reads the version counter and the exchange's kombu set; both unchanged,
    # the built topology is kept.
    assert channel.broker.builds == builds
    bodies = []
    while (message := channel.basic_get("all", no_ack=True)) is not None:
        bodies.append(message.payload["k"])
    assert sorted(bodies) == ["", "a", "a.b"]


def test_a_headers_binding_made_by_another_process_keeps_its_typed_arguments(
    installed, redis, redis_url, prefix
):
    channel = redis.channel()
    Exchange("x", type="headers", durable=False, channel=channel).declare()
    other_process(redis_url, prefix, "headers", "bind", with_xroute=True)
    route = lambda headers: set(channel.route("x", "", headers))  # noqa: E731
    assert route({"h": 1.5}) == {"remote"}
    assert route({"h": "1.5"}) == set()  # a string never equals a number
    assert route({"g": 1.5}) == set()


def test_kombu_without_install_disagrees_over_redis(redis):
    """Recorded, not failed: kombu's own topic routing over Redis misses AMQP matches."""
    assert not xroute.kombu.installed()
    cases = [("a.#", "a"), ("#.a", "a"), ("a.*.b", "a..b")]
    case = Case("topic", [(p, None, i) for i, (p, _) in enumerate(cases)],
                [(k, {}) for _, k in cases], queues=len(cases))
    want = expected(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = through_kombu(redis, case, exact=False)
    print("kombu over Redis without xroute:", mismatch(case, want, got))
    for number in range(len(cases)):
        assert number in want[number]
        assert number not in got[number]


def test_a_private_redis_starts_and_stops():
    """The fallback a machine without Redis gets: a redis-server of its own on loopback."""
    from urllib.parse import urlparse

    from xroute.bench.redis import private_redis, redis_answers

    try:
        with private_redis() as url:
            port = urlparse(url).port
            assert port != 6379
            assert redis_answers("127.0.0.1", port)
            with Connection(url) as connection:  # kombu's Redis transport works on it
                channel = connection.channel()
                Queue("q", channel=channel).declare()
                channel.basic_publish(channel.prepare_message("m"), "", "q")
                assert channel.basic_get("q", no_ack=True).body == b"m"
    except RedisUnavailable as error:
        print(f"no redis-server: {error}")
        pytest.skip(f"redis-server cannot be found or installed: {error}")
    assert not redis_answers("127.0.0.1", port)


def test_another_process_with_xroute_shares_exchange_types_and_deletes(
    installed, redis, redis_url, prefix
):
    """An exchange declared, a queue bound and then deleted by another process: this one
    publishes by name (never declaring) and routes as a topic exchange, then not at all."""
    other_process(redis_url, prefix, "topic", "bind", with_xroute=True)
    channel = redis.channel()
    Producer(channel).publish({"n": 1}, exchange="x", routing_key="a")  # a.# matches a
    assert Queue("remote", channel=channel).get(no_ack=True).payload == {"n": 1}
    other_process(redis_url, prefix, "topic", "unbind", with_xroute=True)  # deletes 'remote'
    Producer(channel).publish({"n": 2}, exchange="x", routing_key="a")
    assert not channel.broker.has_queue("remote")
    assert Queue("remote", channel=channel).get(no_ack=True) is None


def test_transport_class_gives_memory_and_redis_xroutes_channels():
    from kombu.transport import filesystem, memory
    from kombu.transport import redis as kombu_redis

    assert xroute.kombu.transport_class("memory") is xroute.kombu.MemoryTransport
    redis_transport = xroute.kombu.transport_class("redis")
    assert issubclass(redis_transport, kombu_redis.Transport)
    assert issubclass(redis_transport.Channel, xroute.kombu.XRouteChannel)
    assert xroute.kombu.transport_class(redis_transport) is redis_transport
    other = xroute.kombu.transport_class("filesystem")  # exchange types only
    assert issubclass(other, filesystem.Transport)
    assert not issubclass(other.Channel, xroute.kombu.XRouteChannel)
    assert isinstance(other.Channel.exchange_types["headers"], type)
    assert not issubclass(memory.Transport.Channel, xroute.kombu.XRouteChannel)


@pytest.mark.parametrize("restorer_has_xroute", [True, False])
def test_a_crashed_consumers_message_returns_to_its_own_queue(
    installed, redis_url, prefix, restorer_has_xroute
):
    """A consumer that dies without closing (an acks_late Celery worker killed): after the
    visibility timeout, whoever restores (with xroute or without) puts its message back in
    the queue it came from, once; the other queue's copy is untouched."""
    options = {"global_keyprefix": prefix, "polling_interval": 0.05, "visibility_timeout": 1}
    with Connection(redis_url, transport_options=options) as crashed:
        channel = crashed.channel()
        exchange = Exchange("x", type="direct", durable=False, channel=channel)
        exchange.declare()
        for name in ("by-key", "by-cc"):
            Queue(name, exchange, routing_key=name, durable=False, channel=channel).declare()
        Producer(channel).publish({"n": 1}, exchange="x", routing_key="by-key",
                                  headers={"CC": ["by-cc"]})
        taken = Queue("by-cc", channel=channel).get(no_ack=False)
        assert taken.payload == {"n": 1}
        channel.qos._delivered.clear()  # the process dies: nothing is requeued on close
        channel.qos._delivered.restored = True
    time.sleep(1.2)
    if not restorer_has_xroute:
        xroute.kombu.uninstall()
    with Connection(redis_url, transport_options=options) as restorer:
        channel = restorer.channel()
        assert isinstance(channel, xroute.kombu.XRouteChannel) == restorer_has_xroute
        channel.qos.restore_visible(num=10, interval=1)
        got = {name: [] for name in ("by-key", "by-cc")}
        for name, messages in got.items():
            while (message := Queue(name, channel=channel).get(no_ack=True)) is not None:
                messages.append((message.payload, bool(message.delivery_info.get("redelivered"))))
    assert got == {"by-key": [({"n": 1}, False)], "by-cc": [({"n": 1}, True)]}
