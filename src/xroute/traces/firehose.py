"""Messages of RabbitMQ's firehose (``amq.rabbitmq.trace``) and event exchange
(``amq.rabbitmq.event``) as trace records.

The firehose publishes one message per publish (routing key ``publish.<exchange>``) and per
delivery (``deliver.<queue>``); its headers hold ``exchange_name``, ``routing_keys`` (the
routing key, then CC, then BCC), ``properties`` (with the message's headers, BCC already
stripped), ``node``, ``vhost``, ``connection``, ``channel``, ``user``, and, for publishes,
``routed_queues``, and the body is the message's. The event exchange publishes topology changes
with routing keys such as ``binding.created``; their fields are headers, binding arguments
printed as Erlang terms (``{<<"x-match">>,longstr,<<"any">>}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from xroute.core.errors import TraceFormatError
from xroute.traces.erlang import parse_term, typed_table
from xroute.traces.records import DELIVER, EVENT, PUBLISH, TraceRecord, utc

TRACE_EXCHANGE = "amq.rabbitmq.trace"
EVENT_EXCHANGE = "amq.rabbitmq.event"


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def firehose_record(
    routing_key: str,
    headers: Mapping[str, Any],
    body: bytes | None,
    traced_at: datetime | None = None,
) -> TraceRecord:
    """The record of one firehose message, from its routing key, headers and body."""
    kind, _, name = routing_key.partition(".")
    if kind not in (PUBLISH, DELIVER) or "exchange_name" not in headers:
        raise TraceFormatError(
            f"not a firehose message: routing key {routing_key!r} (expected publish.<exchange> "
            f"or deliver.<queue>) with headers {sorted(headers)}"
        )
    routed = headers.get("routed_queues")
    return TraceRecord(
        record_type=kind,
        exchange=_text(headers["exchange_name"]),
        routing_keys=[_text(k) for k in headers.get("routing_keys") or []],
        properties=dict(headers.get("properties") or {}),
        routed_queues=[_text(q) for q in routed] if kind == PUBLISH and routed is not None else None,
        queue=name if kind == DELIVER else None,
        redelivered=bool(headers["redelivered"]) if "redelivered" in headers else None,
        traced_at=traced_at,
        vhost=_optional_text(headers.get("vhost")),
        node=_optional_text(headers.get("node")),
        connection=_optional_text(headers.get("connection")),
        channel=headers.get("channel"),
        user=_optional_text(headers.get("user")),
        payload=body,
    )


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def event_arguments(arguments: Any) -> dict[str, Any]:
    """Binding or queue arguments of an event: a list of Erlang ``{Name, Type, Value}`` terms
    printed as text (as the event exchange sends them), or a table already decoded."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    fields = [parse_term(_text(item)) if not isinstance(item, tuple) else item for item in arguments or []]
    return typed_table(fields)


def event_record(
    routing_key: str,
    headers: Mapping[str, Any],
    traced_at: datetime | None = None,
) -> TraceRecord:
    """The record of one event-exchange message (``binding.created``, ``queue.deleted``...)."""
    fields = {k: v for k, v in headers.items()}
    if "arguments" in fields:
        fields["arguments"] = event_arguments(fields["arguments"])
    when = utc(fields["timestamp_in_ms"]) if "timestamp_in_ms" in fields else traced_at
    return TraceRecord(
        record_type=EVENT,
        event_name=routing_key,
        properties={"headers": fields},
        traced_at=when,
        vhost=_optional_text(fields.get("vhost")),
        user=_optional_text(fields.get("user_who_performed_action")),
    )


def record_of_message(
    exchange: str,
    routing_key: str,
    headers: Mapping[str, Any] | None,
    body: bytes | None,
    traced_at: datetime | None = None,
) -> TraceRecord:
    """The record of a message consumed from the firehose or the event exchange."""
    if exchange == EVENT_EXCHANGE:
        return event_record(routing_key, headers or {}, traced_at)
    return firehose_record(routing_key, headers or {}, body, traced_at)
