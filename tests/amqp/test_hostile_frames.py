"""Malformed and unusual frames, answered as RabbitMQ 3.10.8 answers them (issue 35): each
scenario runs on xroute and, under ``make conformance``, on the real broker, with the same
reply code, text and method asserted on both. The codes are rabbit_reader's and
rabbit_command_assembler's (docs/amqp.md)."""

from __future__ import annotations

import struct

from pamqp import commands as c

from tests.amqp.hostile import RawClient, publish_frames
from xroute.amqp.frames import decode_method, method_frame
from xroute.core.field_table import decode_table

PUBLISH = (60, 40)


def opened(url: str) -> RawClient:
    client = RawClient(url)
    client.handshake()
    client.send(method_frame(1, c.Channel.Open()) + method_frame(1, c.Confirm.Select()))
    assert client.method(c.Confirm.SelectOk) is not None
    return client


def closed_with(client: RawClient) -> tuple[int, str, tuple[int, int]]:
    close = client.method(c.Connection.Close)
    assert close is not None, "no connection.close"
    return close.reply_code, close.reply_text, (close.class_id, close.method_id)


def test_a_body_longer_than_its_header_says_is_505_at_the_next_frame(url):
    client = opened(url)
    client.send(publish_frames(1, "", "nowhere", b"abcdef", size=3)
                + method_frame(1, c.Basic.Qos(prefetch_count=1)))
    assert closed_with(client) == (
        505, "UNEXPECTED_FRAME - expected content body, got non content body frame instead",
        PUBLISH,
    )


def test_a_content_header_of_another_class_is_505(url):
    client = opened(url)
    client.send(publish_frames(1, "", "nowhere", b"abc", class_id=50))
    assert closed_with(client) == (
        505, "UNEXPECTED_FRAME - expected content header for class 60, got one for class 50 "
        "instead", PUBLISH,
    )


def test_a_heartbeat_on_a_channel_is_505(url):
    client = opened(url)
    client.send(struct.pack(">BHI", 8, 1, 0) + b"\xce")
    assert closed_with(client) == (505, "UNEXPECTED_FRAME - type 8, all octets = <<>>", (0, 0))


def test_a_channel_method_on_channel_0_is_504_naming_it(url):
    client = opened(url)
    client.send(method_frame(0, c.Queue.Declare(queue="x")))
    assert closed_with(client) == (
        504, "CHANNEL_ERROR - unexpected method in connection state running", (50, 10)
    )


def test_content_without_a_method_is_505(url):
    client = opened(url)
    client.send(struct.pack(">BHI", 3, 1, 3) + b"abc\xce")
    assert closed_with(client) == (
        505, "UNEXPECTED_FRAME - expected method frame, got non method frame instead", (0, 0)
    )


def test_an_unknown_frame_type_is_501(url):
    client = opened(url)
    client.send(struct.pack(">BHI", 9, 1, 3) + b"abc\xce")
    assert closed_with(client) == (
        501, 'FRAME_ERROR - type 9, all octets = <<"abc">>: unknown_frame', (0, 0)
    )


def test_method_fields_that_do_not_decode_are_501_naming_the_method(url):
    client = opened(url)
    client.send(struct.pack(">BHI", 1, 1, 6) + b"\x00\x32\x00\x0a\x00\x00\xce")
    assert closed_with(client) == (501, "FRAME_ERROR - cannot decode <<0,0>>", (50, 10))


def test_names_that_are_not_utf8_are_501_but_routing_keys_are_any_bytes(url, name):
    # RabbitMQ checks the short strings of methods without content, not of basic.publish.
    client = opened(url)
    exchange = name + "t"
    client.send(method_frame(1, c.Exchange.Declare(exchange=exchange, exchange_type="topic",
                                                   auto_delete=True))
                + method_frame(1, c.Queue.Declare(queue=name + "q", exclusive=True)))
    assert client.method(c.Queue.DeclareOk) is not None
    client.send(method_frame(1, c.Queue.Bind(queue=name + "q", exchange=exchange,
                                             routing_key="a.*")))
    assert client.method(c.Queue.BindOk) is not None
    key = b"a.\xff\xfe".decode("utf-8", "surrogateescape")
    client.send(publish_frames(1, exchange, key, b"body"))
    assert client.method(c.Basic.Ack) is not None
    client.send(method_frame(1, c.Basic.Get(queue=name + "q", no_ack=True)))
    got = client.method(c.Basic.GetOk)
    assert got is not None and got.routing_key == key  # the same bytes, back
    bad = c.Exchange.Declare(exchange="ok", exchange_type="direct")
    bad.exchange = b"x\xff".decode("utf-8", "surrogateescape")
    client.send(method_frame(1, bad))
    assert closed_with(client) == (501, "FRAME_ERROR - Malformed UTF-8 in shortstr", (0, 0))


def test_headers_nested_10000_deep_are_accepted_and_delivered_whole(url, name):
    deep: list = []
    inner = deep
    for _ in range(10_000):
        inner.append([])
        inner = inner[0]
    client = opened(url)
    client.send(method_frame(1, c.Queue.Declare(queue=name + "q", exclusive=True)))
    assert client.method(c.Queue.DeclareOk) is not None
    client.send(publish_frames(1, "", name + "q", b"deep", headers={"deep": deep}))
    assert client.method(c.Basic.Ack) is not None
    client.send(method_frame(1, c.Basic.Get(queue=name + "q", no_ack=True)))
    assert client.method(c.Basic.GetOk) is not None
    header = client.frame(2)
    headers, _ = decode_table(header, 14)  # after class, weight, size and the flag word
    depth, value = 0, headers["deep"]
    while value:
        depth, value = depth + 1, value[0]
    assert depth == 10_000


def test_connection_close_before_login_gets_silence_and_the_socket_closed(url):
    # RabbitMQ answers nothing and drops the socket after 3 s, reading and discarding what
    # comes meanwhile; it keeps nothing of it.
    client = RawClient(url)
    client.send(b"AMQP\x00\x00\x09\x01")
    assert client.method(c.Connection.Start) is not None
    client.send(method_frame(0, c.Connection.Close(reply_code=200, reply_text="bye",
                                                   class_id=0, method_id=0)))
    try:
        for _ in range(20):
            client.send(b"\x01" * 65_536)
    except OSError:
        pass  # the broker dropped the socket while we sent
    frames = client.wait_closed(10)
    assert frames is not None, "the socket was kept open"
    assert not [decode_method(p) for kind, _, p in frames if kind == 1]


def test_an_unknown_method_drops_the_socket(url):
    client = opened(url)
    client.send(struct.pack(">BHI", 1, 1, 4) + b"\x00\x32\x00\x63\xce")
    assert client.wait_closed(10) == []


def test_integer_queue_arguments_take_any_width_and_nothing_else(url, name):
    # aiormq sends a small x-max-length as a byte; RabbitMQ takes every integer width
    # (rabbit_amqqueue's check_int_arg) and names the type of anything else.
    from xroute.core.values import byte, unsignedint

    client = opened(url)
    for value in (byte(5), unsignedint(5), 5):
        client.send(method_frame(1, c.Queue.Declare(queue=name + "q", auto_delete=True,
                                                    arguments={"x-max-length": value})))
        assert client.method(c.Queue.DeclareOk) is not None
    client.send(method_frame(1, c.Queue.Declare(queue=name + "r",
                                                arguments={"x-max-length": "5"})))
    close = client.method(c.Channel.Close)
    assert (close.reply_code, close.reply_text) == (
        406, f"PRECONDITION_FAILED - invalid arg 'x-max-length' for queue '{name}r' in vhost "
        "'/': \"expected integer, got longstr\""
    )
