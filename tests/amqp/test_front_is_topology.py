"""What `Topology` decides for a profile, `xroute serve` does on the wire: routes on the
message's properties, recent-history replays and their refusal, dead-letter headers, and
refusals in RabbitMQ's own codes and words. Each scenario runs on xroute (profile 3.10) and,
under ``make conformance``, on the private RabbitMQ 3.10.8 node with the plugins."""

from __future__ import annotations

import os

import pika
import pytest

from xroute.amqp import Broker
from xroute.core.topology import Topology

PROFILE = "3.10"
# A timestamp property far past the year 9999, in seconds or in milliseconds alike.
FAR_FUTURE = 2**62


@pytest.fixture(params=["xroute", pytest.param("rabbitmq", marks=pytest.mark.conformance)])
def url(request):
    """A fresh xroute broker of the 3.10 profile, or the plugin node (``make conformance``)."""
    if request.param == "rabbitmq":
        found = os.environ.get("XROUTE_AMQP_PLUGINS_URL")
        if not found:
            pytest.fail("XROUTE_AMQP_PLUGINS_URL is not set: run with 'make conformance'")
        yield found
        return
    with Broker(rabbitmq=PROFILE) as broker:
        yield broker.url


@pytest.fixture
def channel(url, name):
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    yield channel
    if connection.is_open:
        cleanup = connection.channel()
    else:
        connection = pika.BlockingConnection(pika.URLParameters(url))
        cleanup = connection.channel()
    for suffix in ("h", "d", "f", "chx", "jms", "x", "dlx", "hx"):
        cleanup.exchange_delete(name + suffix)
    for suffix in ("q0", "q1", "q2", "q3", "dl", "work", "late"):
        cleanup.queue_delete(name + suffix)
    connection.close()


def bodies(channel, queue: str) -> list[bytes]:
    out = []
    while True:
        method, _, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            return out
        out.append(body)


def test_a_consistent_hash_on_message_id_routes_on_the_property(channel, name):
    reference = Topology(rabbitmq=PROFILE)
    arguments = {"hash-property": "message_id"}
    reference.declare_exchange("chx", "x-consistent-hash", arguments=arguments)
    channel.exchange_declare(name + "chx", "x-consistent-hash", arguments=arguments)
    for i, weight in enumerate(("1", "2", "3", "1")):
        reference.declare_queue(f"q{i}")
        reference.bind("chx", f"q{i}", weight)
        channel.queue_declare(name + f"q{i}")
        channel.queue_bind(name + f"q{i}", name + "chx", weight)
    channel.confirm_delivery()
    expected: dict[str, set[bytes]] = {f"q{i}": set() for i in range(4)}
    for n in range(40):
        message_id = f"m-{n}"
        (queue,) = reference.route("chx", "same", properties={"message_id": message_id})
        expected[queue].add(message_id.encode())
        channel.basic_publish(name + "chx", "same", message_id.encode(),
                              pika.BasicProperties(message_id=message_id))
    assert len([q for q in expected.values() if q]) > 1  # the id, not the key, picks
    for queue, wanted in expected.items():
        assert set(bodies(channel, name + queue)) == wanted


def test_a_queue_bound_later_gets_the_recent_history_oldest_first(channel, name):
    channel.exchange_declare(name + "h", "x-recent-history",
                             arguments={"x-recent-history-length": 3})
    channel.confirm_delivery()
    for n in range(5):
        channel.basic_publish(name + "h", "k", b"m%d" % n)
    channel.queue_declare(name + "late")
    channel.queue_bind(name + "late", name + "h")
    assert bodies(channel, name + "late") == [b"m2", b"m3", b"m4"]


def test_history_that_an_exchange_cannot_route_fails_the_binding_with_541(url, channel, name):
    # Newest first: a (delivered), then b, which reaches no queue: 541, nothing bound.
    channel.exchange_declare(name + "h", "x-recent-history")
    channel.exchange_declare(name + "d", "direct")
    channel.queue_declare(name + "q0")
    channel.queue_bind(name + "q0", name + "d", "a")
    channel.confirm_delivery()
    for key in ("a", "b", "a"):
        channel.basic_publish(name + "h", key, key.encode())
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
        channel.exchange_bind(name + "d", name + "h")
    assert (closed.value.reply_code, closed.value.reply_text) == (541, "INTERNAL_ERROR")
    again = pika.BlockingConnection(pika.URLParameters(url)).channel()
    assert bodies(again, name + "q0") == [b"a"]
    again.confirm_delivery()
    again.basic_publish(name + "h", "a", b"later")
    assert bodies(again, name + "q0") == []  # the binding was not made
    again.connection.close()


def test_a_void_bcc_header_is_refused_with_rabbitmq_s_words(channel, name):
    channel.confirm_delivery()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as closed:
        channel.basic_publish("amq.direct", "k", b"x", pika.BasicProperties(headers={"BCC": None}))
    assert closed.value.reply_code == 406
    assert closed.value.reply_text == (
        'PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"BCC",void}'
    )


def test_a_timestamp_past_the_year_9999_is_accepted(channel, name):
    channel.queue_declare(name + "q0")
    channel.confirm_delivery()
    channel.basic_publish("", name + "q0", b"late",
                          pika.BasicProperties(timestamp=FAR_FUTURE, headers={"h": 1}))
    method, properties, body = channel.basic_get(name + "q0", auto_ack=True)
    assert (body, properties.timestamp) == (b"late", FAR_FUTURE)


@pytest.mark.parametrize(
    ("first", "then", "text"),
    [
        ({"exchange_type": "x-recent-history"}, {"exchange_type": "topic"},
         "inequivalent arg 'type' for exchange '{x}' in vhost '/': received 'topic' but "
         "current is ''x-recent-history''"),
        ({"exchange_type": "direct", "durable": True}, {"exchange_type": "direct"},
         "inequivalent arg 'durable' for exchange '{x}' in vhost '/': received 'false' but "
         "current is 'true'"),
        ({"exchange_type": "direct", "arguments": {"alternate-exchange": "a1"}},
         {"exchange_type": "direct", "arguments": {"alternate-exchange": "a2"}},
         "inequivalent arg 'alternate-exchange' for exchange '{x}' in vhost '/': received "
         "'a2' but current is 'a1'"),
        ({"exchange_type": "direct", "arguments": {"alternate-exchange": "a1"}},
         {"exchange_type": "direct"},
         "inequivalent arg 'alternate-exchange' for exchange '{x}' in vhost '/': received "
         "none but current is the value 'a1' of type 'longstr'"),
    ],
)
def test_an_inequivalent_redeclare_is_refused_in_rabbitmq_s_words(channel, name, first, then,
                                                                     text):
    channel.exchange_declare(name + "x", **first)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as closed:
        channel.exchange_declare(name + "x", **then)
    assert closed.value.reply_code == 406
    assert closed.value.reply_text == "PRECONDITION_FAILED - " + text.format(x=name + "x")


def test_dead_letters_carry_only_the_first_death_headers_on_310(channel, name):
    channel.exchange_declare(name + "dlx", "fanout")
    channel.queue_declare(name + "dl")
    channel.queue_bind(name + "dl", name + "dlx")
    channel.queue_declare(name + "work", arguments={"x-dead-letter-exchange": name + "dlx"})
    channel.confirm_delivery()
    channel.basic_publish("", name + "work", b"x", pika.BasicProperties(headers={"h": 1}))
    method, _, _ = channel.basic_get(name + "work")
    channel.basic_reject(method.delivery_tag, requeue=False)
    for _ in range(50):
        method, properties, _ = channel.basic_get(name + "dl", auto_ack=True)
        if method is not None:
            break
        channel.connection.sleep(0.05)
    headers = properties.headers
    assert headers["x-first-death-queue"] == name + "work"
    assert headers["x-first-death-reason"] == "rejected"
    assert not any(h.startswith("x-last-death") for h in headers)
    assert headers["x-death"][0]["count"] == 1 and headers["h"] == 1


def test_a_selector_that_fails_to_evaluate_closes_the_connection_with_541(channel, name):
    channel.exchange_declare(name + "jms", "x-jms-topic")
    channel.queue_declare(name + "q0")
    selector = "{'>', {'+', {'ident', <<\"n\">>}, 1}, 0}."  # n + 1 > 0, n text: badarith
    channel.queue_bind(name + "q0", name + "jms", "k",
                       arguments={"rjms_erlang_selector": selector})
    channel.confirm_delivery()
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
        channel.basic_publish(name + "jms", "k", b"x", pika.BasicProperties(headers={"n": "a"}))
    assert (closed.value.reply_code, closed.value.reply_text) == (541, "INTERNAL_ERROR")


def test_a_selector_over_a_binary_header_closes_the_connection_with_541(channel, name):
    # pika sends bytes as a binary, which sjx_evaluator cannot read (issue 34).
    channel.exchange_declare(name + "jms", "x-jms-topic")
    channel.queue_declare(name + "q0")
    selector = "{'=', {'ident', <<\"n\">>}, <<\"a\">>}."  # n = 'a'
    channel.queue_bind(name + "q0", name + "jms", "k", arguments={"rjms_erlang_selector": selector})
    channel.confirm_delivery()
    channel.basic_publish(name + "jms", "k", b"x", pika.BasicProperties(headers={"n": "a"}))
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
        channel.basic_publish(name + "jms", "k", b"x", pika.BasicProperties(headers={"n": b"a"}))
    assert (closed.value.reply_code, closed.value.reply_text) == (541, "INTERNAL_ERROR")


def test_a_selector_that_does_not_parse_fails_the_binding_with_541(channel, name):
    channel.exchange_declare(name + "jms", "x-jms-topic")
    channel.queue_declare(name + "q0")
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
        channel.queue_bind(name + "q0", name + "jms", "k",
                           arguments={"rjms_erlang_selector": "{'=', ."})
    assert (closed.value.reply_code, closed.value.reply_text) == (541, "INTERNAL_ERROR")


def test_a_hash_header_that_is_no_longstr_fails_the_declaration_with_541(channel, name):
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
        channel.exchange_declare(name + "chx", "x-consistent-hash",
                                 arguments={"hash-header": 5})
    assert (closed.value.reply_code, closed.value.reply_text) == (541, "INTERNAL_ERROR")
