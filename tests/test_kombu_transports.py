"""One topology, three kombu transports: with xroute installed, the memory transport, the Redis
transport and a real RabbitMQ (through kombu's pyamqp transport, where the broker routes)
deliver exactly what `Topology.route` says, so all three agree."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from kombu import Connection

import xroute.kombu
from tests.kombu_support import expected, headers_cases, mismatch, through_kombu, topic_cases
from xroute.bench.rabbitmq import BrokerUnavailable, rabbitmq_broker
from xroute.bench.redis import RedisUnavailable, redis_server

EXAMPLES = settings(
    max_examples=12,
    deadline=None,
    # the three connections are opened once and serve every example
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def connections():
    """memory, Redis (found or started) and RabbitMQ via pyamqp (found or started)."""
    xroute.kombu.install()
    try:
        with redis_server() as redis_url, rabbitmq_broker() as amqp_url:
            prefix = "xroute-kombu-transports:"
            redis = Connection(redis_url, transport_options={"global_keyprefix": prefix,
                                                             "polling_interval": 0.05})
            # pyamqp explicitly (not librabbitmq), with publisher confirms: a publish returns
            # once the broker has routed the message.
            amqp = Connection(amqp_url.replace("amqp://", "pyamqp://", 1),
                              transport_options={"confirm_publish": True})
            with Connection("memory://") as memory, redis, amqp:
                yield {"memory": memory, "redis": redis, "rabbitmq": amqp}
    except (RedisUnavailable, BrokerUnavailable) as error:
        print(f"a broker is missing: {error}")
        pytest.skip(f"no Redis or RabbitMQ could be found or started: {error}")
    finally:
        xroute.kombu.uninstall()


def agree(connections, case) -> None:
    want = expected(case)
    for name, connection in connections.items():
        got = through_kombu(connection, case)
        assert got == want, f"{name}:\n{mismatch(case, want, got)}"


@EXAMPLES
@given(case=topic_cases())
def test_topic_memory_redis_and_rabbitmq_agree(connections, case):
    agree(connections, case)


@EXAMPLES
@given(case=headers_cases())
def test_headers_memory_redis_and_rabbitmq_agree(connections, case):
    agree(connections, case)


def test_classic_topic_table_on_all_three(connections):
    from tests.test_kombu_memory import CLASSIC, by_message, classic_case

    case = classic_case()
    for name, connection in connections.items():
        got = by_message(case, through_kombu(connection, case))
        assert got == [set(queues) for _, queues in CLASSIC["routes"]], name
