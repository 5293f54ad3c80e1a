"""The pytest plugin (entry point ``pytest11``): an ``amqp_broker`` fixture.

It imports the broker only when a test asks for it, so having xroute installed costs other
test runs nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def amqp_broker() -> Iterator[Any]:
    """A fresh in-memory AMQP 0-9-1 broker on a free loopback port, in a thread of its own.

    ``amqp_broker.url`` is the URL for pika, aio-pika, aiormq, py-amqp or kombu
    (``pyamqp://`` works with the same host and port); ``amqp_broker.view`` shows queues,
    messages, unacked deliveries, bindings, returned and dead-lettered messages, and waits
    for acks (``view.wait_acked(b"body")``)."""
    from xroute.amqp import Broker

    with Broker() as broker:
        yield broker


@pytest.fixture
def amqp_url(amqp_broker: Any) -> str:
    """The URL of a fresh ``amqp_broker``."""
    return amqp_broker.url
