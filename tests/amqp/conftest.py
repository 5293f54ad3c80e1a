"""Brokers for the AMQP tests: xroute's (always), and the machine's RabbitMQ under the
``conformance`` marker, so one scenario proves the same answer on both."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from xroute.amqp.pytest_plugin import amqp_broker, amqp_url  # noqa: F401 - fixtures

RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672/"


@pytest.fixture(
    params=["xroute", pytest.param("rabbitmq", marks=pytest.mark.conformance)],
)
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """An AMQP URL: a fresh xroute broker, or RabbitMQ (XROUTE_AMQP_URL, else 5672)."""
    if request.param == "rabbitmq":
        yield os.environ.get("XROUTE_AMQP_URL") or RABBITMQ_URL
        return
    yield request.getfixturevalue("amqp_broker").url


@pytest.fixture
def name() -> str:
    """A unique prefix, so scenarios on a shared RabbitMQ never meet."""
    return f"xr-amqp-{uuid.uuid4().hex[:8]}-"
