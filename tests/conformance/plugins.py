"""The private RabbitMQ node with the exchange-type plugins, for the plugin conformance tests."""

from __future__ import annotations

import os
import uuid

import pytest

from tests.conformance.broker import Mirror
from xroute.bench.rabbitmq import connect

# The version of the node `make conformance` starts (Debian's rabbitmq-server).
BROKER_PROFILE = os.environ.get("XROUTE_PLUGINS_PROFILE", "3.10")


@pytest.fixture(scope="session")
def plugins_url() -> str:
    """The URL of a node with the plugins: `make conformance` starts one (--plugins)."""
    url = os.environ.get("XROUTE_AMQP_PLUGINS_URL")
    if not url:
        pytest.fail(
            "XROUTE_AMQP_PLUGINS_URL is not set: run with 'make conformance', which starts a "
            "private node with the plugins (python -m xroute.bench.rabbitmq --plugins)"
        )
    return url


@pytest.fixture
def plugin_mirror(plugins_url):
    """A `Mirror` on the plugins node, with the node's version profile."""
    connection = connect(plugins_url)
    channel = connection.channel()
    mirror = Mirror(channel, f"xroute-plug-{uuid.uuid4().hex[:8]}-", rabbitmq=BROKER_PROFILE)
    yield mirror
    try:
        mirror.cleanup()
    finally:
        connection.close()
