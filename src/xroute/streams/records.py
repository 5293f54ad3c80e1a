"""Stream entries as rows: xroute's message columns, or firehose trace records.

`MESSAGE_SCHEMA` is one row a message: ``exchange`` and ``routing_key`` (the 0-9-1 publish's,
from the ``x-exchange`` and ``x-routing-key`` annotations; a message written with the stream
protocol has none, and reads as RabbitMQ reads it back: the default exchange, the stream's name
as its key), ``headers`` as JSON text (what any xroute headers column is) and ``amqp_headers``,
the same table encoded as an AMQP field table with each value in its own type (route it with
``route(df, ..., headers="amqp_headers")``: a short stays a short), ``message_id``,
``correlation_id``, ``timestamp`` (seconds) and every basic property as JSON in
``properties``, the ``payload``, then where the message is: ``stream``, ``offset`` and
``chunk_timestamp`` (when the broker wrote its chunk).

A stream fed by the firehose (``amq.rabbitmq.trace`` bound to a stream queue) reads as trace
records (`xroute.traces.records.SCHEMA` and the same three columns), so ``xroute verify`` and
``xroute stream`` take it as they take a capture. RabbitMQ 3.10 drops array and table headers
when it writes a 0-9-1 message into a stream (``rabbit_msg_record``), and the firehose's
``routing_keys``, ``properties`` and ``routed_queues`` are such headers: on 3.10 the record
keeps the exchange only, and `firehose_batch` refuses it with `StreamError` saying so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from xroute.core.errors import StreamError, TraceFormatError
from xroute.core.field_table import encode_table
from xroute.streams.amqp10 import Message10, decode_message
from xroute.traces.records import SCHEMA as TRACE_SCHEMA
from xroute.traces.records import json_value

# Where each row came from, after the record's own columns.
POSITION_FIELDS = [
    pa.field("stream", pa.string(), False),
    pa.field("offset", pa.int64(), False),
    pa.field("chunk_timestamp", pa.timestamp("ms", tz="UTC")),
]
MESSAGE_SCHEMA = pa.schema(
    [
        pa.field("exchange", pa.string()),
        pa.field("routing_key", pa.string()),
        pa.field("headers", pa.string()),  # JSON text
        pa.field("amqp_headers", pa.binary()),  # the same table, typed (xroute.core.field_table)
        pa.field("message_id", pa.string()),
        pa.field("correlation_id", pa.string()),
        pa.field("timestamp", pa.int64()),  # the AMQP timestamp property, seconds
        pa.field("properties", pa.string()),  # every basic property as JSON text
        pa.field("payload", pa.binary()),
        *POSITION_FIELDS,
    ]
)
FIREHOSE_SCHEMA = pa.schema([*TRACE_SCHEMA, *POSITION_FIELDS])
FORMATS = {"messages": MESSAGE_SCHEMA, "firehose": FIREHOSE_SCHEMA}

# RabbitMQ's carriers of the 0-9-1 properties AMQP 1.0 has no field for.
_ANNOTATED = {"x-basic-priority": "priority", "x-basic-delivery-mode": "delivery_mode",
              "x-basic-expiration": "expiration"}
_APPLICATION = {"x-basic-type": "type", "x-basic-app-id": "app_id"}
_PROPERTIES = {"message_id": "message_id", "correlation_id": "correlation_id",
               "reply_to": "reply_to", "content_type": "content_type",
               "content_encoding": "content_encoding", "user_id": "user_id",
               "creation_time": "timestamp"}

Entry = tuple[int, int, bytes]  # offset, chunk timestamp (ms), the stored bytes


def as_091(message: Message10, stream: str) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """The exchange, routing key, headers and basic properties RabbitMQ gives the message back
    as over AMQP 0-9-1 (``rabbit_stream_queue:binary_to_msg``)."""
    annotations = message.annotations
    exchange = annotations.get("x-exchange", "")
    routing_key = annotations.get("x-routing-key", stream)
    headers: dict[str, Any] = {}
    properties: dict[str, Any] = {}
    for name, value in message.application_properties.items():
        if name in _APPLICATION:
            properties[_APPLICATION[name]] = value
        else:
            headers[name] = value
    for name, value in annotations.items():
        if name in _ANNOTATED:
            properties[_ANNOTATED[name]] = value
    for name, value in message.properties.items():
        if name in _PROPERTIES:
            properties[_PROPERTIES[name]] = value
    if headers:
        properties["headers"] = headers
    return str(exchange), str(routing_key), headers, properties


def message_batch(stream: str, entries: Iterable[Entry]) -> pa.RecordBatch:
    """Stream entries as one record batch of `MESSAGE_SCHEMA`."""
    columns: dict[str, list[Any]] = {name: [] for name in MESSAGE_SCHEMA.names}
    for offset, chunk_ms, data in entries:
        message = decode_message(data)
        exchange, routing_key, headers, properties = as_091(message, stream)
        columns["exchange"].append(exchange)
        columns["routing_key"].append(routing_key)
        columns["headers"].append(json.dumps(json_value(headers)) if headers else None)
        columns["amqp_headers"].append(encode_table(headers) if headers else None)
        columns["message_id"].append(_text(properties.get("message_id")))
        columns["correlation_id"].append(_text(properties.get("correlation_id")))
        stamp = properties.get("timestamp")
        columns["timestamp"].append(None if stamp is None else int(stamp))
        columns["properties"].append(json.dumps(json_value(properties), sort_keys=True))
        columns["payload"].append(message.body)
        columns["stream"].append(stream)
        columns["offset"].append(offset)
        columns["chunk_timestamp"].append(chunk_ms)
    return pa.RecordBatch.from_pydict(columns, schema=MESSAGE_SCHEMA)


def firehose_batch(stream: str, entries: Iterable[Entry]) -> pa.RecordBatch:
    """Stream entries written by the firehose as one record batch of `FIREHOSE_SCHEMA`."""
    from xroute.traces.firehose import record_of_message

    rows = []
    for offset, chunk_ms, data in entries:
        message = decode_message(data)
        exchange, routing_key, headers, _ = as_091(message, stream)
        traced_at = datetime.fromtimestamp(chunk_ms / 1000, tz=timezone.utc)
        if exchange != "amq.rabbitmq.event" and "routing_keys" not in headers:
            raise StreamError(
                f"stream {stream!r} offset {offset} is not a whole firehose record: it has no "
                f"routing_keys header (its headers: {sorted(headers)}). RabbitMQ 3.10 drops "
                "array and table headers when it writes a message into a stream, and the "
                "firehose's routing_keys, properties and routed_queues are such headers; "
                "RabbitMQ 3.13 and later keep them",
                stream,
            )
        try:
            record = record_of_message(exchange, routing_key, headers, message.body, traced_at)
        except TraceFormatError as error:
            raise StreamError(f"stream {stream!r} offset {offset}: {error}", stream) from None
        row = record.row(offset)
        row.update(stream=stream, offset=offset, chunk_timestamp=chunk_ms)
        rows.append(row)
    return pa.RecordBatch.from_pylist(rows, schema=FIREHOSE_SCHEMA)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
