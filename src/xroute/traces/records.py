"""One trace record, whatever RabbitMQ format it came from, and the Arrow table of many.

A *publish* record is a message as the broker's exchanges saw it: the exchange, every routing
key (the routing key, then CC, then BCC), the headers (BCC already stripped by the broker), the
properties, and ``routed_queues``, the queues the broker's exchanges chose. A *deliver* record is
a queue handing a message to a consumer; an *event* record is a topology change from the event
exchange. Only publish records are routed; the others are counted apart.

The table's ``headers`` column is JSON text that routes exactly as the broker routed: the extra
routing keys are given back as ``CC`` (CC and BCC route alike; which was which is not recorded),
and the pipeline reads it as it reads any JSON headers column. JSON has no AMQP types (a short
and a long, a longstr and a binary look alike), so where the source kept them (the tracing
plugin's text log, a firehose capture) the same table is also in ``amqp_headers``, encoded as
an AMQP field table, each value in its own type; `xroute verify` routes that one. It is null
for the tracing plugin's JSON log, whose headers lost their types.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa

from xroute.core.field_table import encode_table

PUBLISH = "publish"
DELIVER = "deliver"
EVENT = "event"

SCHEMA = pa.schema(
    [
        pa.field("seq", pa.int64()),  # order of arrival in the capture or the log file
        pa.field("record_type", pa.string()),  # publish, deliver or event
        pa.field("traced_at", pa.timestamp("ms", tz="UTC")),
        pa.field("exchange", pa.string()),
        pa.field("routing_key", pa.string()),  # the first routing key; an event's name
        pa.field("routing_keys", pa.list_(pa.string())),
        pa.field("headers", pa.string()),  # JSON text (see the module's docstring)
        pa.field("amqp_headers", pa.binary()),  # the same, typed (null: types unknown)
        pa.field("message_id", pa.string()),
        pa.field("correlation_id", pa.string()),
        pa.field("timestamp", pa.int64()),  # the AMQP timestamp property, seconds
        pa.field("properties", pa.string()),  # every basic property as JSON text
        pa.field("routed_queues", pa.list_(pa.string())),  # publish records only
        pa.field("queue", pa.string()),  # deliver records only
        pa.field("redelivered", pa.bool_()),
        pa.field("vhost", pa.string()),
        pa.field("node", pa.string()),
        pa.field("connection", pa.string()),
        pa.field("channel", pa.int64()),
        pa.field("user", pa.string()),
        pa.field("payload", pa.binary()),
    ]
)


def json_value(value: Any) -> Any:
    """A header value as JSON can hold it: bytes as text (UTF-8, else Latin-1), a timestamp as
    its integer seconds, a decimal as a float (JSON has neither; docs/traces.md)."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return bytes(value).decode("latin-1")
    if isinstance(value, datetime):
        return int(value.timestamp())
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return value


def routing_headers(headers: dict[str, Any] | None, routing_keys: list[str]) -> dict[str, Any]:
    """The headers that make `Topology.route` use exactly ``routing_keys``: the message's
    headers without CC and BCC, with the keys after the first as ``CC``."""
    out = {k: v for k, v in (headers or {}).items() if k not in ("CC", "BCC")}
    if len(routing_keys) > 1:
        out["CC"] = list(routing_keys[1:])
    return out


@dataclass
class TraceRecord:
    """One record of a RabbitMQ trace (see the module docstring)."""

    record_type: str
    exchange: str | None = None
    routing_keys: list[str] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    routed_queues: list[str] | None = None
    queue: str | None = None
    redelivered: bool | None = None
    traced_at: datetime | None = None
    vhost: str | None = None
    node: str | None = None
    connection: str | None = None
    channel: int | None = None
    user: str | None = None
    payload: bytes | None = None
    event_name: str | None = None  # event records: binding.created, queue.deleted, ...
    typed: bool = True  # whether the headers keep their AMQP types (not from a JSON log)

    def row(self, seq: int) -> dict[str, Any]:
        """This record as one row of `SCHEMA`."""
        props = self.properties
        typed_headers = None
        if self.record_type == EVENT:
            routing_key = self.event_name
            headers = json.dumps(json_value(props.get("headers") or {}), sort_keys=True)
        else:
            routing_key = self.routing_keys[0] if self.routing_keys else None
            table = routing_headers(props.get("headers"), self.routing_keys)
            headers = json.dumps(json_value(table))
            if self.typed:
                typed_headers = encode_table(table)
        timestamp = props.get("timestamp")
        if isinstance(timestamp, datetime):
            timestamp = int(timestamp.timestamp())
        return {
            "seq": seq,
            "record_type": self.record_type,
            "traced_at": self.traced_at,
            "exchange": self.exchange,
            "routing_key": routing_key,
            "routing_keys": list(self.routing_keys) if self.record_type != EVENT else None,
            "headers": headers,
            "amqp_headers": typed_headers,
            "message_id": _text(props.get("message_id")),
            "correlation_id": _text(props.get("correlation_id")),
            "timestamp": timestamp,
            "properties": json.dumps(json_value(props), sort_keys=True),
            "routed_queues": self.routed_queues,
            "queue": self.queue,
            "redelivered": self.redelivered,
            "vhost": self.vhost,
            "node": self.node,
            "connection": self.connection,
            "channel": self.channel,
            "user": self.user,
            "payload": self.payload,
        }


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return json_value(value) if isinstance(value, (bytes, bytearray)) else str(value)


def to_table(records: list[TraceRecord], first_seq: int = 0) -> pa.Table:
    """The records as an Arrow table of `SCHEMA`, numbered from ``first_seq``."""
    rows = [record.row(first_seq + i) for i, record in enumerate(records)]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def utc(text_or_ms: str | int | float | None) -> datetime | None:
    """A trace's time: RabbitMQ's ISO 8601 text (``2026-11-24T04:16:53.263+00:00``), its older
    ``2026-11-24 04:16:53:263`` form, or milliseconds since the epoch."""
    if text_or_ms is None:
        return None
    if isinstance(text_or_ms, (int, float)):
        return datetime.fromtimestamp(text_or_ms / 1000, tz=timezone.utc)
    text = text_or_ms.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        # 3.x before the ISO form: milliseconds after a third colon.
        head, _, millis = text.rpartition(":")
        moment = datetime.strptime(head, "%Y-%m-%d %H:%M:%S").replace(
            microsecond=int(millis) * 1000
        )
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def payload_from_base64(text: str | None) -> bytes | None:
    """The tracing plugin's JSON payload (base64)."""
    return None if text is None else base64.b64decode(text)
