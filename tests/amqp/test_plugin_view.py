"""The pytest plugin and the test-side view of the broker."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pika
import pytest

pytest_plugins = ["pytester"]


def test_fixture_through_the_entry_point_module(pytester, monkeypatch):
    pytester.makepyfile(
        """
        import pika

        def test_round_trip(amqp_broker, amqp_url):
            assert amqp_url == amqp_broker.url
            connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
            channel = connection.channel()
            channel.queue_declare("jobs")
            channel.basic_publish("", "jobs", b"hello")
            connection.close()
            assert amqp_broker.view.messages("jobs") == [b"hello"]
        """
    )
    # The plugin as the entry point loads it (autoload off, so an installed copy of the
    # entry point does not register it twice).
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_subprocess("-p", "xroute.amqp.pytest_plugin", "-q")
    result.assert_outcomes(passed=1)


def test_the_entry_point_names_the_plugin():
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    plugins = pyproject["project"]["entry-points"]["pytest11"]
    assert plugins == {"xroute_amqp": "xroute.amqp.pytest_plugin"}


@pytest.fixture
def channel(amqp_broker):
    connection = pika.BlockingConnection(pika.URLParameters(amqp_broker.url))
    yield connection.channel()
    connection.close()


def test_view_shows_queues_bindings_and_unacked(amqp_broker, channel):
    channel.exchange_declare("orders", "topic")
    channel.queue_declare("eu", arguments={"x-max-length": 10})
    channel.queue_bind("eu", "orders", "eu.#")
    channel.basic_publish("orders", "eu.fr", b"one", pika.BasicProperties(headers={"k": 1}))
    channel.basic_publish("orders", "eu.de", b"two")
    view = amqp_broker.view
    queue = view.queue("eu")
    assert [m.body for m in queue.messages] == [b"one", b"two"]
    assert queue.messages[0].headers == {"k": 1} and queue.messages[0].routing_key == "eu.fr"
    assert queue.arguments == {"x-max-length": 10}
    assert [(b.source, b.destination.name, b.routing_key) for b in view.bindings("orders")] == [
        ("orders", "eu", "eu.#")
    ]
    assert view.exchanges()["orders"] == "topic"
    method, _, _ = channel.basic_get("eu")
    assert [m.body for m in view.unacked()["eu"]] == [b"one"]
    assert view.queue("eu").unacked == 1
    channel.basic_ack(method.delivery_tag)
    assert view.wait_acked(b"one", queue="eu").kind == "ack"
    assert view.unacked() == {}


def test_view_records_returned_and_dead_lettered(amqp_broker, channel):
    channel.exchange_declare("dlx", "fanout")
    channel.queue_declare("work", arguments={"x-dead-letter-exchange": "dlx"})
    channel.basic_publish("", "nowhere", b"stray", mandatory=True)
    channel.basic_publish("", "work", b"bad")
    method, _, _ = channel.basic_get("work")
    channel.basic_nack(method.delivery_tag, requeue=False)
    view = amqp_broker.view
    assert view.wait_nacked(b"bad").reason == "requeue=False"
    dead = view.dead_lettered()
    assert [(r.body, r.queue, r.reason) for r in dead] == [(b"bad", "work", "rejected")]
    assert [(r.body, r.routing_key) for r in view.returned()] == [(b"stray", "nowhere")]


def test_wait_settled_times_out_with_a_clear_error(amqp_broker):
    with pytest.raises(TimeoutError, match="no matching record"):
        amqp_broker.view.wait_settled(b"never", timeout=0.1)
