"""xroute.streams without a broker: URIs, offsets, the AMQP 1.0 decoder (against rstream's
own encoder), the rows a stored message becomes, and how ranges are split for Spark."""

from __future__ import annotations

import pytest

from xroute.core.errors import StreamURIError
from xroute.core.field_table import decode_table
from xroute.core.values import long, short, timestamp, unsignedbyte
from xroute.streams.amqp10 import AMQP10Error, decode_message
from xroute.streams.offsets import OffsetSpec, parse_offset
from xroute.streams.records import message_batch
from xroute.streams.uri import parse_stream_uri

rstream = pytest.importorskip("rstream", reason="the 'stream' extra (rstream) is not installed")


def test_uri_parts_and_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("RABBITMQ_PASSWORD", "s3cret")
    endpoint = parse_stream_uri("rabbitmq-stream://reader@broker:5553/prod?stream=a,b&stream=c")
    assert (endpoint.host, endpoint.port, endpoint.user, endpoint.vhost) == (
        "broker", 5553, "reader", "prod")
    assert endpoint.streams == ("a", "b", "c") and endpoint.password == "s3cret"
    assert "s3cret" not in repr(endpoint) and "s3cret" not in endpoint.uri
    assert parse_stream_uri("rabbitmq-stream://u@h/%2F").vhost == "/"
    assert parse_stream_uri("rabbitmq-stream://u@h").port == 5552


@pytest.mark.parametrize("uri, words", [
    ("rabbitmq-stream://u:pw@h/%2F", "holds a password"),
    ("amqp://u@h/%2F", "not a rabbitmq-stream"),
    ("rabbitmq-stream://u@h/a/b", "one virtual host"),
    ("rabbitmq-stream://u@h/%2F?strem=x", "unknown URI parameter"),
])
def test_bad_uris_say_what_is_wrong(uri, words, monkeypatch):
    monkeypatch.setenv("RABBITMQ_PASSWORD", "x")
    with pytest.raises(StreamURIError, match=words):
        parse_stream_uri(uri)


def test_no_password_anywhere_is_refused(monkeypatch):
    monkeypatch.delenv("RABBITMQ_PASSWORD", raising=False)
    with pytest.raises(StreamURIError, match="RABBITMQ_PASSWORD"):
        parse_stream_uri("rabbitmq-stream://u@h/%2F")
    assert parse_stream_uri("rabbitmq-stream://u@h/%2F", password="").password == ""


def test_offsets():
    assert parse_offset(None, "first") == OffsetSpec("first")
    assert parse_offset("latest", "first") == OffsetSpec("next")
    assert parse_offset("last", "first") == OffsetSpec("last")
    assert parse_offset("42", "first") == OffsetSpec("offset", 42)
    assert parse_offset("@1700000000000", "first") == OffsetSpec("timestamp", 1700000000000)
    assert parse_offset("2023-11-14T22:13:20Z", "first") == OffsetSpec("timestamp", 1700000000000)
    for bad in ("-1", "soon", "2023-11-14T22:13:20"):
        with pytest.raises(StreamURIError, match="startingOffset"):
            parse_offset(bad, "first")


def _encoded(**sections):
    from rstream import AMQPMessage

    return bytes(AMQPMessage(**sections))


def test_the_decoder_keeps_types_as_rabbitmq_reads_them_back():
    from rstream._pyamqp.message import Properties
    from rstream._pyamqp.types import AMQPTypes

    data = _encoded(
        body=b"payload",
        application_properties={
            "s": {"TYPE": AMQPTypes.short, "VALUE": -3},
            "b": {"TYPE": AMQPTypes.ubyte, "VALUE": 7},
            "l": {"TYPE": AMQPTypes.long, "VALUE": 5},
            "t": {"TYPE": AMQPTypes.timestamp, "VALUE": 1700000000999},
            "text": "x", "flag": True, "nested": {"k": [1, 2]},
        },
        properties=Properties(message_id="m1", correlation_id="c1", creation_time=1700000000123),
        message_annotations={"x-exchange": "ex", "x-routing-key": "a.b"},
    )
    message = decode_message(data)
    props = message.application_properties
    assert type(props["s"]) is short and props["s"] == -3
    assert type(props["b"]) is unsignedbyte and type(props["l"]) is long
    assert type(props["t"]) is timestamp and props["t"] == 1700000000  # whole seconds
    assert props["nested"] == {"k": [1, 2]} and props["flag"] is True
    assert message.body == b"payload"
    batch = message_batch("orders", [(7, 1700000000000, data)])
    row = batch.to_pylist()[0]
    assert (row["exchange"], row["routing_key"], row["message_id"], row["correlation_id"]) == (
        "ex", "a.b", "m1", "c1")
    assert row["timestamp"] == 1700000000 and row["offset"] == 7 and row["stream"] == "orders"
    table = decode_table(row["amqp_headers"])[0]
    assert type(table["s"]) is short and type(table["l"]) is long


def test_a_message_of_the_stream_protocol_reads_as_rabbitmq_reads_it_back():
    row = message_batch("orders", [(0, 0, _encoded(body=b"x"))]).to_pylist()[0]
    assert (row["exchange"], row["routing_key"], row["headers"]) == ("", "orders", None)


def test_bytes_that_are_not_a_message_are_refused():
    with pytest.raises(AMQP10Error):
        decode_message(b"\x00Su\xa0\x09abc")  # a data section cut short
    with pytest.raises(AMQP10Error):
        decode_message(b"\x42")


def test_ranges_are_split_for_parallel_reads():
    from xroute.spark.rabbitmq_stream import split

    parts = split("s", 10, 110, 30, 1)
    assert [(p.start, p.end) for p in parts] == [(10, 35), (35, 60), (60, 85), (85, 110)]
    assert [(p.start, p.end) for p in split("s", 0, 5, 100, 2)] == [(0, 3), (3, 5)]
    assert split("s", 5, 5, 100, 2) == []
