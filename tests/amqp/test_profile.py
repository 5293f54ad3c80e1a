"""``Broker(rabbitmq=...)`` and ``xroute serve --rabbitmq``: the profile reaches the topology,
and the replies that differ between RabbitMQ 3.x and 4.x follow it."""

from __future__ import annotations

import pika
import pytest
from click.testing import CliRunner

from xroute.amqp import Broker
from xroute.cli import cli
from xroute.core.errors import UnknownProfile
from xroute.core.profiles import VERSIONS, profile_for_version
from xroute.core.topology import Topology


def _connect(broker: Broker) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(broker.url))


def test_an_unknown_profile_is_refused_naming_the_known_ones():
    with pytest.raises(UnknownProfile, match="4.1.*known: main, 4.3, 4.0, 3.13, 3.12, 3.10"):
        Broker(rabbitmq="4.1")
    result = CliRunner().invoke(cli, ["serve", "--port", "0", "--rabbitmq", "4.1"])
    assert result.exit_code != 0 and "3.10" in result.output and "4.3" in result.output


def test_the_profile_reaches_the_topology():
    assert Broker(rabbitmq="3.10").vhost.topology.profile.name == "3.10"
    assert Broker().vhost.topology.profile.name is None
    with pytest.raises(Exception, match="Topology\\(rabbitmq='3.10'\\)"):
        Broker(topology=Topology(), rabbitmq="3.10")


def test_topic_hash_limit_follows_the_profile():
    # 4.3.5+ refuses a binding key with more than two '#' words (406); 3.10 accepts it.
    with Broker(rabbitmq="4.3") as broker:
        channel = _connect(broker).channel()
        channel.queue_declare("q")
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            channel.queue_bind("q", "amq.topic", "#.#.#")
        assert refused.value.reply_code == 406
    with Broker(rabbitmq="3.10") as broker:
        channel = _connect(broker).channel()
        channel.queue_declare("q")
        channel.queue_bind("q", "amq.topic", "#.#.#")
        assert "#.#.#" in {b.routing_key for b in broker.view.bindings("amq.topic")}


@pytest.mark.parametrize(
    ("rabbitmq", "code", "closes"),
    [("3.10", 503, pika.exceptions.ConnectionClosedByBroker),
     (None, 406, pika.exceptions.ChannelClosedByBroker)],
)
def test_unknown_exchange_type_reply_follows_the_profile(rabbitmq, code, closes):
    # 3.x: 503 COMMAND_INVALID on the connection; 4.x: 406 PRECONDITION_FAILED on the channel.
    with Broker(rabbitmq=rabbitmq) as broker:
        channel = _connect(broker).channel()
        with pytest.raises(closes) as refused:
            channel.exchange_declare("e", "x-no-such-type")
        assert refused.value.reply_code == code


@pytest.mark.parametrize(("rabbitmq", "accepted"), [("3.10", True), ("4.0", False)])
def test_max_message_size_follows_the_profile(rabbitmq, accepted):
    # RabbitMQ 4.0 lowered max_message_size from 128 MiB to 16 MiB.
    body = b"x" * (17 * 1024 * 1024)
    with Broker(rabbitmq=rabbitmq) as broker:
        channel = _connect(broker).channel()
        channel.queue_declare("big")
        channel.confirm_delivery()  # a publish returns once the broker has it, or raises
        if accepted:
            channel.basic_publish("", "big", body)
            assert broker.view.messages("big") == [body]
        else:
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
                channel.basic_publish("", "big", body)
            assert refused.value.reply_code == 406


def test_profile_for_a_broker_version():
    assert profile_for_version("3.10.8") == "3.10"
    assert profile_for_version("3.11.2") == "3.10"
    assert profile_for_version("3.13.7") == "3.13"
    assert profile_for_version("4.1.0") == "4.0"
    assert profile_for_version("4.3.5") == "4.3"
    with pytest.raises(UnknownProfile, match="known: " + ", ".join(VERSIONS)):
        profile_for_version("3.8.9")
