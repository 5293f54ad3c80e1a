"""The fallback of ``make conformance`` on a machine with no broker: a private RabbitMQ node is
started on loopback, answers, and is gone afterwards."""

from __future__ import annotations

from urllib.parse import urlparse

import amqp
import pytest

from xroute.bench.rabbitmq import amqp_answers, connect, private_broker

pytestmark = pytest.mark.conformance


def test_private_broker_starts_routes_and_stops():
    with private_broker() as url:
        where = urlparse(url)
        assert where.hostname == "127.0.0.1"
        assert amqp_answers("127.0.0.1", where.port)
        connection = connect(url)
        channel = connection.channel()
        channel.queue_declare("xroute-private-check", exclusive=True, auto_delete=False)
        channel.basic_publish(amqp.Message(b"hello"), "", "xroute-private-check")
        assert channel.basic_get("xroute-private-check", no_ack=True).body == b"hello"
        connection.close()
    assert not amqp_answers("127.0.0.1", where.port)
