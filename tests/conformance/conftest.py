"""A connection to a real RabbitMQ for the differential tests (``make conformance``).

py-amqp (kombu's client) publishes: unlike pika it carries floats, which the headers
exchange tests need (``1.0`` is not ``1``).
"""

from __future__ import annotations

import os
import uuid

import pytest

from xroute.bench.rabbitmq import connect


@pytest.fixture(scope="session")
def broker_url() -> str:
    url = os.environ.get("XROUTE_AMQP_URL")
    if not url:
        pytest.fail(
            "XROUTE_AMQP_URL is not set: run these tests with 'make conformance', which finds "
            "or starts a broker"
        )
    return url


@pytest.fixture
def channel(broker_url):
    connection = connect(broker_url)
    channel = connection.channel()
    yield channel
    connection.close()


@pytest.fixture
def prefix() -> str:
    """A prefix that keeps each test's exchanges and queues apart from anything else."""
    return f"xroute-conf-{uuid.uuid4().hex[:8]}-"
