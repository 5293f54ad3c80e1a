"""TTL, expiry, dead-lettering, length limits, priorities, confirms and refusals through
py-amqp (kombu's client), on xroute's broker and (conformance) on RabbitMQ."""

from __future__ import annotations

import time
from urllib.parse import urlparse

import amqp
import pytest


def connect(url: str, **options) -> amqp.Connection:
    parts = urlparse(url)
    connection = amqp.Connection(
        f"{parts.hostname}:{parts.port}", userid=parts.username, password=parts.password,
        **options,
    )
    connection.connect()
    return connection


@pytest.fixture
def conn(url):
    connection = connect(url)
    yield connection
    try:
        connection.close()
    except Exception:  # noqa: BLE001 - already closed by the broker in error tests
        pass


@pytest.fixture
def ch(conn):
    return conn.channel()


def publish(ch, exchange, key, body, **properties):
    ch.basic_publish(amqp.Message(body, **properties), exchange, key)


def get(ch, queue, no_ack=True):
    return ch.basic_get(queue, no_ack=no_ack)


def wait_get(ch, queue, timeout=3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = get(ch, queue)
        if message is not None:
            return message
        time.sleep(0.02)
    raise AssertionError(f"nothing arrived in {queue}")


def bodies(ch, queue):
    out = []
    while (message := get(ch, queue)) is not None:
        out.append(message.body)
    return out


def dead_letter_setup(ch, name, **arguments):
    """A queue whose dead letters go through a fanout exchange to a second queue."""
    ch.exchange_declare(name + "dlx", "fanout", auto_delete=True)
    dead = ch.queue_declare(name + "dead", exclusive=True).queue
    ch.queue_bind(dead, name + "dlx")
    source = ch.queue_declare(
        name + "src", exclusive=True,
        arguments={"x-dead-letter-exchange": name + "dlx", **arguments},
    ).queue
    return source, dead


# ---------------------------------------------------------------------- refusals


def test_immediate_is_540_not_implemented_and_closes_the_connection(conn):
    ch = conn.channel()
    ch.basic_publish(amqp.Message(b"x"), "", "k", immediate=True)
    with pytest.raises(amqp.exceptions.AMQPNotImplementedError) as excinfo:
        ch.queue_declare("", exclusive=True)
    assert excinfo.value.reply_code == 540
    assert "immediate=true" in excinfo.value.reply_text


def test_reusing_a_consumer_tag_is_530_on_the_connection(conn):
    ch = conn.channel()
    queue = ch.queue_declare("", exclusive=True).queue
    ch.basic_consume(queue, consumer_tag="same", callback=lambda m: None)
    with pytest.raises(amqp.exceptions.NotAllowed) as excinfo:
        ch.basic_consume(queue, consumer_tag="same", callback=lambda m: None)
    assert excinfo.value.reply_code == 530


def test_return_comes_before_the_confirm(url, name):
    connection = connect(url, confirm_publish=True)
    try:
        ch = connection.channel()
        events = []
        ch.events["basic_return"].add(lambda *args: events.append("return"))
        ch.exchange_declare(name + "x", "direct", auto_delete=True)
        ch.basic_publish(amqp.Message(b"lost"), name + "x", "nobody", mandatory=True)
        events.append("ack")  # basic_publish returns once the confirm arrived
        assert events == ["return", "ack"]
    finally:
        connection.close()


def test_amqplain_login(url):
    connection = connect(url, login_method="AMQPLAIN")
    try:
        assert connection.channel().queue_declare("", exclusive=True).queue
    finally:
        connection.close()


# ---------------------------------------------------------------------- TTL and expiry


def test_per_queue_ttl_dead_letters_with_x_death(ch, name):
    source, dead = dead_letter_setup(ch, name, **{"x-message-ttl": 50})
    publish(ch, "", source, b"old", application_headers={"keep": 1})
    message = wait_get(ch, dead)
    assert message.body == b"old"
    headers = message.headers
    death = headers["x-death"][0]
    assert (death["reason"], death["queue"], death["count"]) == ("expired", source, 1)
    assert death["exchange"] == "" and list(death["routing-keys"]) == [source]
    assert headers["x-first-death-reason"] == "expired"
    assert headers["x-first-death-queue"] == source
    assert headers["keep"] == 1


def test_per_message_ttl_moves_expiration_into_x_death(ch, name):
    source, dead = dead_letter_setup(ch, name)
    publish(ch, "", source, b"short", expiration="30")
    message = wait_get(ch, dead)
    death = message.headers["x-death"][0]
    assert death["original-expiration"] == "30"
    assert "expiration" not in message.properties


def test_ttl_zero_expires_unless_a_consumer_takes_it(ch, name):
    queue = ch.queue_declare(name + "t0", exclusive=True, arguments={"x-message-ttl": 0}).queue
    publish(ch, "", queue, b"gone")
    time.sleep(0.05)
    assert get(ch, queue) is None


def test_invalid_expiration_is_406(conn):
    ch = conn.channel()
    queue = ch.queue_declare("", exclusive=True).queue
    publish(ch, "", queue, b"x", expiration="soon")
    with pytest.raises(amqp.exceptions.PreconditionFailed):
        ch.queue_declare("", exclusive=True)


def test_x_expires_deletes_an_unused_queue(ch, name):
    queue = ch.queue_declare(name + "exp", arguments={"x-expires": 100}).queue
    time.sleep(0.4)
    with pytest.raises(amqp.exceptions.NotFound):
        ch.queue_declare(queue, passive=True)


# ---------------------------------------------------------------------- dead-lettering


def test_reject_dead_letters_with_a_routing_key_and_count(ch, name):
    ch.exchange_declare(name + "dlx", "direct", auto_delete=True)
    dead = ch.queue_declare(name + "dead", exclusive=True).queue
    ch.queue_bind(dead, name + "dlx", "dl")
    source = ch.queue_declare(
        name + "src", exclusive=True,
        arguments={"x-dead-letter-exchange": name + "dlx", "x-dead-letter-routing-key": "dl"},
    ).queue
    publish(ch, "", source, b"no", application_headers={"CC": ["elsewhere"]})
    message = get(ch, source, no_ack=False)
    ch.basic_reject(message.delivery_tag, requeue=False)
    letter = wait_get(ch, dead)
    assert letter.delivery_info["routing_key"] == "dl"
    assert letter.delivery_info["exchange"] == name + "dlx"
    death = letter.headers["x-death"][0]
    assert death["reason"] == "rejected"
    assert list(death["routing-keys"]) == [source, "elsewhere"]
    assert "CC" not in letter.headers  # removed with a dead-letter routing key


def test_dead_letter_cycle_is_dropped_but_rejections_loop(ch, name):
    ch.exchange_declare(name + "loop", "fanout", auto_delete=True)
    queue = ch.queue_declare(
        name + "self", exclusive=True,
        arguments={"x-dead-letter-exchange": name + "loop", "x-message-ttl": 30},
    ).queue
    ch.queue_bind(queue, name + "loop")
    publish(ch, "", queue, b"cycle")
    time.sleep(0.6)
    assert get(ch, queue) is None  # expired into itself: a cycle, dropped


# ---------------------------------------------------------------------- length limits


def test_max_length_drop_head_dead_letters_the_oldest(ch, name):
    source, dead = dead_letter_setup(ch, name, **{"x-max-length": 2})
    for body in (b"1", b"2", b"3"):
        publish(ch, "", source, body)
    assert bodies(ch, source) == [b"2", b"3"]
    letter = wait_get(ch, dead)
    assert letter.body == b"1" and letter.headers["x-death"][0]["reason"] == "maxlen"


def test_max_length_bytes(ch, name):
    queue = ch.queue_declare(
        name + "bytes", exclusive=True, arguments={"x-max-length-bytes": 10}
    ).queue
    for body in (b"aaaa", b"bbbb", b"cccc"):
        publish(ch, "", queue, body)
    assert bodies(ch, queue) == [b"bbbb", b"cccc"]


def test_reject_publish_nacks_in_confirm_mode(url, name):
    connection = connect(url, confirm_publish=True)
    try:
        ch = connection.channel()
        queue = ch.queue_declare(
            name + "rp", exclusive=True,
            arguments={"x-max-length": 1, "x-overflow": "reject-publish"},
        ).queue
        publish(ch, "", queue, b"fits")
        with pytest.raises(amqp.exceptions.MessageNacked):
            publish(ch, "", queue, b"refused")
        assert bodies(ch, queue) == [b"fits"]
    finally:
        connection.close()


# ---------------------------------------------------------------------- priorities


def test_max_priority_delivers_highest_first(ch, name):
    queue = ch.queue_declare(
        name + "prio", exclusive=True, arguments={"x-max-priority": 5}
    ).queue
    for body, priority in ((b"low", 1), (b"none", None), (b"high", 5), (b"above", 9)):
        properties = {} if priority is None else {"priority": priority}
        publish(ch, "", queue, body, **properties)
    # 9 counts as the maximum, 5; equal priorities keep their order.
    assert bodies(ch, queue) == [b"high", b"above", b"low", b"none"]


def test_rejections_loop_and_count_in_x_death(ch, name):
    # A rejected message may come back to its own queue: no cycle, and the count goes up.
    ch.exchange_declare(name + "back", "fanout", auto_delete=True)
    queue = ch.queue_declare(
        name + "loop", exclusive=True, arguments={"x-dead-letter-exchange": name + "back"}
    ).queue
    ch.queue_bind(queue, name + "back")
    publish(ch, "", queue, b"again")
    for expected in (1, 2):
        message = wait_get_unacked(ch, queue)
        if expected > 1:
            death = message.headers["x-death"]
            assert len(death) == 1 and death[0]["count"] == expected - 1
        ch.basic_reject(message.delivery_tag, requeue=False)
    message = wait_get_unacked(ch, queue)
    assert message.headers["x-death"][0]["count"] == 2
    assert message.headers["x-death"][0]["reason"] == "rejected"
    ch.basic_ack(message.delivery_tag)


def test_reject_publish_dlx_dead_letters_the_refused(ch, name):
    source, dead = dead_letter_setup(
        ch, name, **{"x-max-length": 1, "x-overflow": "reject-publish-dlx"}
    )
    publish(ch, "", source, b"kept")
    publish(ch, "", source, b"refused")
    letter = wait_get(ch, dead)
    assert letter.body == b"refused" and letter.headers["x-death"][0]["reason"] == "maxlen"
    assert bodies(ch, source) == [b"kept"]


def wait_get_unacked(ch, queue, timeout=3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = get(ch, queue, no_ack=False)
        if message is not None:
            return message
        time.sleep(0.02)
    raise AssertionError(f"nothing arrived in {queue}")
