"""The protocol through pika, on xroute's broker and (conformance) on RabbitMQ: the same
scenario must give the same answers on both."""

from __future__ import annotations

import re
import time

import pika
import pytest
from pika.exceptions import (
    ChannelClosedByBroker,
    ConnectionClosedByBroker,
    ProbableAuthenticationError,
    UnroutableError,
)


def connect(url: str, **options) -> pika.BlockingConnection:
    parameters = pika.URLParameters(url)
    for key, value in options.items():
        setattr(parameters, key, value)
    return pika.BlockingConnection(parameters)


@pytest.fixture
def conn(url):
    connection = connect(url)
    yield connection
    if connection.is_open:
        try:
            connection.close()
        except pika.exceptions.AMQPError:
            pass


@pytest.fixture
def ch(conn):
    return conn.channel()


def closed_code(excinfo) -> int:
    return excinfo.value.args[0]


# ---------------------------------------------------------------------- handshake


def test_bad_credentials_are_refused_with_403(url):
    bad = url.replace("guest:guest@", "guest:wrong@")
    with pytest.raises(ProbableAuthenticationError) as excinfo:
        connect(bad)
    assert "ACCESS_REFUSED" in str(excinfo.value)


def test_tune_takes_the_clients_lower_frame_max_and_channel_max(url, name):
    connection = connect(url, frame_max=8192, channel_max=10)
    try:
        assert connection._impl.params.frame_max == 8192
        channel = connection.channel()
        body = bytes(range(256)) * 100  # spans several 8 KiB frames both ways
        queue = channel.queue_declare("", exclusive=True).method.queue
        channel.basic_publish("", queue, body)
        _, _, got = _get(channel, queue)
        assert got == body
    finally:
        connection.close()


def test_heartbeats_keep_an_idle_connection_open(url):
    connection = connect(url, heartbeat=1)
    try:
        connection.sleep(2.5)  # pika answers the broker's heartbeats while sleeping
        assert connection.is_open
        connection.channel().close()
    finally:
        connection.close()


def test_unknown_vhost_closes_the_connection_with_530(url):
    with pytest.raises(Exception) as excinfo:
        connect(re.sub(r"(amqp://[^/]+)/.*", r"\1/no-such-vhost", url))
    assert "530" in str(excinfo.value) or "NOT_ALLOWED" in str(excinfo.value)


# ---------------------------------------------------------------------- exchanges


def test_exchange_passive_declare_of_a_missing_exchange_is_404(ch, name):
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.exchange_declare(name + "missing", passive=True)
    assert closed_code(excinfo) == 404


def test_exchange_redeclare_with_another_type_is_406(conn, name):
    ch = conn.channel()
    ch.exchange_declare(name + "x", "direct", auto_delete=True)
    ch.exchange_declare(name + "x", "direct", auto_delete=True)  # equivalent: fine
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.exchange_declare(name + "x", "fanout", auto_delete=True)
    assert closed_code(excinfo) == 406
    conn.channel().exchange_delete(name + "x")


def test_reserved_exchange_name_is_403(ch, name):
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.exchange_declare("amq." + name, "direct")
    assert closed_code(excinfo) == 403


def test_exchange_delete_if_unused_refuses_a_bound_exchange(conn, name):
    ch = conn.channel()
    ch.exchange_declare(name + "x", "fanout")
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(queue, name + "x")
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.exchange_delete(name + "x", if_unused=True)
    assert closed_code(excinfo) == 406
    ch = conn.channel()
    ch.exchange_delete(name + "x")
    ch.exchange_delete(name + "x")  # deleting a missing exchange succeeds
    with pytest.raises(ChannelClosedByBroker):
        ch.exchange_declare(name + "x", passive=True)


def test_exchange_to_exchange_binding_and_unbinding(ch, name):
    ch.exchange_declare(name + "a", "topic")
    ch.exchange_declare(name + "b", "fanout", auto_delete=True)
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(queue, name + "b")
    ch.exchange_bind(name + "b", name + "a", "k.*")
    ch.basic_publish(name + "a", "k.1", b"through")
    ch.basic_publish(name + "a", "other", b"not")
    assert _drain(ch, queue) == [b"through"]
    ch.exchange_unbind(name + "b", name + "a", "k.*")
    ch.basic_publish(name + "a", "k.1", b"gone")
    assert _drain(ch, queue) == []
    ch.exchange_delete(name + "a")


def test_auto_delete_exchange_goes_with_its_last_binding(conn, name):
    ch = conn.channel()
    ch.exchange_declare(name + "ad", "direct", auto_delete=True)
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(queue, name + "ad", "k")
    ch.exchange_declare(name + "ad", passive=True)
    ch.queue_unbind(queue, name + "ad", "k")
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.exchange_declare(name + "ad", passive=True)
    assert closed_code(excinfo) == 404


def test_unbinding_what_is_gone_succeeds(ch, name):
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_unbind(queue, name + "no-exchange", "k")
    ch.exchange_declare(name + "src", "direct", auto_delete=True)
    ch.exchange_unbind(name + "no-destination", name + "src", "k")
    ch.exchange_unbind(name + "src", name + "no-source", "k")
    ch.queue_unbind(name + "no-queue", name + "src", "k")
    assert ch.is_open


def test_binding_a_missing_queue_is_404(ch, name):
    ch.exchange_declare(name + "x", "direct", auto_delete=True)
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.queue_bind(name + "nope", name + "x", "k")
    assert closed_code(excinfo) == 404


def test_binding_to_the_default_exchange_is_403(ch):
    queue = ch.queue_declare("", exclusive=True).method.queue
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.queue_bind(queue, "", "k")
    assert closed_code(excinfo) == 403


def test_unknown_exchange_type_is_refused(conn, name):
    # RabbitMQ 4.x: 406 on the channel; 3.x: 503 on the connection.
    ch = conn.channel()
    with pytest.raises((ChannelClosedByBroker, ConnectionClosedByBroker)) as excinfo:
        ch.exchange_declare(name + "x", "no-such-type")
    assert closed_code(excinfo) in (406, 503)


# ---------------------------------------------------------------------- queues


def test_server_named_queue(ch):
    queue = ch.queue_declare("", exclusive=True).method.queue
    assert queue.startswith("amq.gen-") and len(queue) > len("amq.gen-")


def test_queue_declare_reports_messages_and_consumers(ch, name):
    queue = ch.queue_declare(name + "q", auto_delete=False).method.queue
    ch.confirm_delivery()  # RabbitMQ enqueues asynchronously: count once confirmed
    try:
        ch.basic_publish("", queue, b"1")
        ch.basic_publish("", queue, b"2")
        ok = ch.queue_declare(queue, passive=True).method
        assert (ok.message_count, ok.consumer_count) == (2, 0)
    finally:
        ch.queue_delete(queue)


def test_exclusive_queue_is_locked_to_its_connection(url, conn, name):
    ch = conn.channel()
    queue = ch.queue_declare(name + "excl", exclusive=True).method.queue
    other = connect(url)
    try:
        with pytest.raises(ChannelClosedByBroker) as excinfo:
            other.channel().queue_declare(queue, passive=True)
        assert closed_code(excinfo) == 405
    finally:
        other.close()
    conn.close()  # the exclusive queue goes with its connection
    again = connect(url)
    try:
        with pytest.raises(ChannelClosedByBroker) as excinfo:
            again.channel().queue_declare(queue, passive=True)
        assert closed_code(excinfo) == 404
    finally:
        again.close()


def test_queue_redeclare_with_other_arguments_is_406(ch, name):
    queue = name + "args"
    ch.queue_declare(queue, auto_delete=True, arguments={"x-max-length": 5})
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.queue_declare(queue, auto_delete=True, arguments={"x-max-length": 6})
    assert closed_code(excinfo) == 406


def test_invalid_queue_argument_is_406(ch, name):
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.queue_declare(name + "bad", arguments={"x-message-ttl": -1})
    assert closed_code(excinfo) == 406


def test_auto_delete_queue_goes_with_its_last_consumer(conn, name):
    ch = conn.channel()
    queue = ch.queue_declare(name + "ad", auto_delete=True).method.queue
    tag = ch.basic_consume(queue, lambda *a: None)
    ch.basic_cancel(tag)
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        conn.channel().queue_declare(queue, passive=True)
    assert closed_code(excinfo) == 404


def test_purge_and_delete_if_empty_and_if_unused(conn, name):
    ch = conn.channel()
    queue = ch.queue_declare(name + "pd").method.queue
    try:
        ch.basic_publish("", queue, b"a")
        with pytest.raises(ChannelClosedByBroker) as excinfo:
            ch.queue_delete(queue, if_empty=True)
        assert closed_code(excinfo) == 406
        ch = conn.channel()
        assert ch.queue_purge(queue).method.message_count == 1
        ch.basic_consume(queue, lambda *a: None)
        with pytest.raises(ChannelClosedByBroker) as excinfo:
            ch.queue_delete(queue, if_unused=True)
        assert closed_code(excinfo) == 406
    finally:
        conn.channel().queue_delete(queue)


def test_queue_unbind_stops_delivery(ch, name):
    ch.exchange_declare(name + "x", "direct", auto_delete=True)
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(queue, name + "x", "k")
    ch.queue_bind(queue, name + "x", "j")
    ch.queue_unbind(queue, name + "x", "k")
    ch.basic_publish(name + "x", "k", b"k")
    ch.basic_publish(name + "x", "j", b"j")
    assert _drain(ch, queue) == [b"j"]


# ---------------------------------------------------------------------- publish and get


def test_properties_come_back_as_sent(ch):
    queue = ch.queue_declare("", exclusive=True).method.queue
    properties = pika.BasicProperties(
        content_type="application/json",
        content_encoding="utf-8",
        headers={"a": 1, "nested": {"list": [1, "two", True]}, "n": None},
        delivery_mode=2,
        priority=3,
        correlation_id="c-1",
        reply_to="r",
        message_id="m-1",
        timestamp=1_700_000_000,
        type="t",
        user_id="guest",
        app_id="app",
    )
    ch.basic_publish("", queue, b"body", properties)
    _, got, body = _get(ch, queue)
    assert body == b"body"
    for field in ("content_type", "content_encoding", "headers", "delivery_mode", "priority",
                  "correlation_id", "reply_to", "message_id", "timestamp", "type", "user_id",
                  "app_id"):
        assert getattr(got, field) == getattr(properties, field), field


def test_publishing_to_a_missing_exchange_closes_the_channel_with_404(conn, name):
    ch = conn.channel()
    ch.basic_publish(name + "missing", "k", b"x")
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.queue_declare("", exclusive=True)
    assert closed_code(excinfo) == 404
    assert conn.is_open and conn.channel().is_open  # only the channel closed


def test_user_id_must_be_the_authenticated_user(conn):
    ch = conn.channel()
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", queue, b"x", pika.BasicProperties(user_id="mallory"))
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.queue_declare("", exclusive=True)
    assert closed_code(excinfo) == 406


def test_get_reports_the_remaining_count_and_empty(ch):
    queue = ch.queue_declare("", exclusive=True).method.queue
    for body in (b"1", b"2", b"3"):
        ch.basic_publish("", queue, body)
    method, _, body = ch.basic_get(queue, auto_ack=True)
    assert (body, method.message_count) == (b"1", 2)
    ch.queue_purge(queue)
    assert ch.basic_get(queue) == (None, None, None)


def test_cc_and_bcc_route_and_bcc_is_stripped(ch, name):
    ch.exchange_declare(name + "x", "direct", auto_delete=True)
    queues = {}
    for key in ("main", "cc", "bcc"):
        queues[key] = ch.queue_declare("", exclusive=True).method.queue
        ch.queue_bind(queues[key], name + "x", key)
    headers = {"CC": ["cc"], "BCC": ["bcc"], "keep": "me"}
    ch.basic_publish(name + "x", "main", b"m", pika.BasicProperties(headers=headers))
    for key, queue in queues.items():
        _, properties, body = _get(ch, queue)
        assert body == b"m", key
        assert properties.headers == {"CC": ["cc"], "keep": "me"}, key


def test_alternate_exchange_takes_the_unroutable(ch, name):
    ch.exchange_declare(name + "ae", "fanout", auto_delete=True)
    ch.exchange_declare(name + "x", "direct", auto_delete=True,
                        arguments={"alternate-exchange": name + "ae"})
    caught = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(caught, name + "ae")
    ch.basic_publish(name + "x", "nobody", b"stray")
    assert _drain(ch, caught) == [b"stray"]


def test_headers_exchange_routes_on_headers(ch, name):
    ch.exchange_declare(name + "h", "headers", auto_delete=True)
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(queue, name + "h", arguments={"x-match": "all", "a": 1, "b": "x"})
    ch.basic_publish(name + "h", "", b"yes", pika.BasicProperties(headers={"a": 1, "b": "x"}))
    ch.basic_publish(name + "h", "", b"no", pika.BasicProperties(headers={"a": 1}))
    assert _drain(ch, queue) == [b"yes"]


def test_internal_exchange_refuses_publishes_with_403(conn, name):
    ch = conn.channel()
    ch.exchange_declare(name + "i", "fanout", internal=True, auto_delete=True)
    ch.basic_publish(name + "i", "", b"x")
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.queue_declare("", exclusive=True)
    assert closed_code(excinfo) == 403


# ---------------------------------------------------------------------- confirms and returns


def test_mandatory_unroutable_is_returned_before_its_confirm(conn, name):
    ch = conn.channel()
    ch.confirm_delivery()
    ch.exchange_declare(name + "x", "direct", auto_delete=True)
    with pytest.raises(UnroutableError) as excinfo:
        ch.basic_publish(name + "x", "nobody", b"lost", mandatory=True)
    returned = excinfo.value.messages[0]
    assert returned.method.reply_code == 312 and returned.body == b"lost"
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", queue, b"kept", mandatory=True)  # confirmed: no exception


# ---------------------------------------------------------------------- consuming and acks


def test_consume_ack_nack_reject_and_requeue(ch):
    queue = ch.queue_declare("", exclusive=True).method.queue
    for body in (b"1", b"2", b"3", b"4"):
        ch.basic_publish("", queue, body)
    got = []
    for method, _, body in ch.consume(queue, inactivity_timeout=2):
        got.append((method.delivery_tag, method.redelivered, body))
        if len(got) == 4:
            break
    assert [g[2] for g in got] == [b"1", b"2", b"3", b"4"]
    tags = [g[0] for g in got]
    ch.basic_ack(tags[1], multiple=True)  # acks 1 and 2
    ch.basic_nack(tags[2], requeue=True)
    ch.basic_reject(tags[3], requeue=False)  # dropped: no dead-letter exchange
    method, _, body = next(ch.consume(queue, inactivity_timeout=2))
    assert (body, method.redelivered) == (b"3", True)
    ch.basic_ack(method.delivery_tag)
    ch.cancel()
    assert ch.queue_declare(queue, passive=True).method.message_count == 0


def test_acking_an_unknown_tag_is_406(conn):
    ch = conn.channel()
    ch.basic_ack(99)
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.queue_declare("", exclusive=True)
    assert closed_code(excinfo) == 406


def test_prefetch_limits_unacked_deliveries(ch):
    queue = ch.queue_declare("", exclusive=True).method.queue
    for index in range(5):
        ch.basic_publish("", queue, str(index).encode())
    ch.basic_qos(prefetch_count=2)
    delivered = []
    ch.basic_consume(queue, lambda c, m, p, b: delivered.append(m.delivery_tag))
    _until(ch, lambda: len(delivered) >= 2)
    ch.connection.process_data_events(0.2)  # a third would come now if prefetch leaked
    assert len(delivered) == 2
    ch.basic_ack(delivered[-1], multiple=True)
    _until(ch, lambda: len(delivered) >= 4)
    ch.connection.process_data_events(0.2)
    assert len(delivered) == 4


def test_prefetch_size_is_not_implemented(conn):
    ch = conn.channel()
    with pytest.raises(ConnectionClosedByBroker) as excinfo:
        ch.basic_qos(prefetch_size=10)
    assert closed_code(excinfo) == 540


def test_recover_redelivers_unacked(ch):
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", queue, b"again")
    method, _, _ = _get(ch, queue, auto_ack=False)
    assert not method.redelivered
    ch.basic_recover(requeue=True)
    method, _, body = _get(ch, queue, auto_ack=False)
    assert (body, method.redelivered) == (b"again", True)


def test_closing_a_channel_requeues_its_unacked(conn):
    ch = conn.channel()
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", queue, b"back")
    _get(ch, queue, auto_ack=False)
    ch.close()
    ch = conn.channel()
    method, _, body = _get(ch, queue)
    assert (body, method.redelivered) == (b"back", True)


def test_deleting_a_queue_cancels_its_consumers(conn):
    ch = conn.channel()
    queue = ch.queue_declare("", exclusive=True).method.queue
    cancelled = []
    ch.basic_consume(queue, lambda *a: None)
    ch._impl.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    conn.channel().queue_delete(queue)
    _until(ch, lambda: cancelled)
    assert len(cancelled) == 1


def test_exclusive_consumer_refuses_others_with_403(conn):
    ch = conn.channel()
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_consume(queue, lambda *a: None, exclusive=True)
    other = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        other.basic_consume(queue, lambda *a: None)
    assert closed_code(excinfo) == 403


# ---------------------------------------------------------------------- tx


def test_tx_commit_and_rollback(conn):
    ch = conn.channel()
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.tx_select()
    ch.basic_publish("", queue, b"rolled back")
    ch.tx_rollback()
    ch.basic_publish("", queue, b"committed")
    assert ch.queue_declare(queue, passive=True).method.message_count == 0
    ch.tx_commit()
    assert _drain(ch, queue) == [b"committed"]


def test_tx_rollback_keeps_acks_pending(conn):
    ch = conn.channel()
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", queue, b"m")
    ch.tx_select()
    method, _, _ = _get(ch, queue, auto_ack=False)
    ch.basic_ack(method.delivery_tag)
    ch.tx_rollback()
    ch.basic_ack(method.delivery_tag)  # still unacked after the rollback: a valid tag
    ch.tx_commit()
    assert ch.queue_declare(queue, passive=True).method.message_count == 0


def test_tx_commit_without_select_is_406(conn):
    ch = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.tx_commit()
    assert closed_code(excinfo) == 406


def test_confirm_after_tx_is_406(conn):
    ch = conn.channel()
    ch.tx_select()
    with pytest.raises(ChannelClosedByBroker) as excinfo:
        ch.confirm_delivery()
    assert closed_code(excinfo) == 406


# ---------------------------------------------------------------------- helpers


def _get(ch, queue, auto_ack=True, tries=50):
    for _ in range(tries):
        method, properties, body = ch.basic_get(queue, auto_ack=auto_ack)
        if method is not None:
            return method, properties, body
        ch.connection.sleep(0.02)
    raise AssertionError(f"no message in {queue}")


def _until(ch, condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        ch.connection.process_data_events(0.05)


def _drain(ch, queue):
    ch.connection.process_data_events(0.05)
    out = []
    while True:
        method, _, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            return out
        out.append(body)
