"""The log files of RabbitMQ's tracing plugin (``rabbitmq_tracing``), in its two formats.

- ``json``: one JSON object a line, with ``type`` ``published`` or ``received``, ``exchange``,
  ``routing_keys``, ``routed_queues`` (``"none"`` for deliveries), ``queue`` (``"none"`` for
  publishes), ``properties`` (headers as the management API prints tables: AMQP types that JSON
  cannot tell apart are lost), ``payload`` (base64), ``timestamp``, ``node``, ``vhost``, ...
- ``text``: blocks that begin with a line of 80 ``=``, a ``<time>: Message published`` or
  ``received`` line, ``Name: value`` lines whose values are Erlang terms where they are lists
  (``Routing keys``, ``Routed queues``, ``Properties``: AMQP types kept), and the payload as is.
  A payload that itself holds a line of 80 ``=`` cannot be told from the next block.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from xroute.core.errors import TraceFormatError
from xroute.traces.erlang import parse_term, typed_table
from xroute.traces.records import DELIVER, PUBLISH, TraceRecord, payload_from_base64, utc

_TYPES = {"published": PUBLISH, "received": DELIVER}
_SEPARATOR = "\n" + "=" * 80 + "\n"
_HEAD = re.compile(r"(?P<time>.+?): Message (?P<type>published|received)\n")
_FIELD = re.compile(r"^(?P<name>[A-Z][A-Za-z ]+):[ ]*(?P<value>.*)$")


def _none(value: Any) -> Any:
    return None if value == "none" else value


def read_json_lines(lines: Iterable[str], where: str = "tracing log") -> Iterator[TraceRecord]:
    """The records of a tracing-plugin log in ``json`` format, one per non-empty line."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            kind = _TYPES[item["type"]]
        except (ValueError, KeyError, TypeError) as error:
            raise TraceFormatError(
                f"{where}, line {number}: not a tracing-plugin JSON record ({error})"
            ) from None
        routed = _none(item.get("routed_queues"))
        properties = dict(item.get("properties") or {})
        if isinstance(properties.get("headers"), dict):
            properties["headers"] = _unwrapped(properties["headers"])
        yield TraceRecord(
            record_type=kind,
            exchange=item.get("exchange"),
            routing_keys=list(item.get("routing_keys") or []),
            properties=properties,
            routed_queues=list(routed) if kind == PUBLISH and routed is not None else None,
            queue=_none(item.get("queue")) if kind == DELIVER else None,
            traced_at=utc(item.get("timestamp")),
            vhost=item.get("vhost"),
            node=item.get("node"),
            connection=item.get("connection"),
            channel=item.get("channel"),
            user=item.get("user"),
            payload=payload_from_base64(item.get("payload")),
            typed=False,  # the management API's JSON of a table keeps no AMQP types
        )


_NOT_UTF8 = "Not UTF-8, base64 is: "


def _unwrapped(value: Any) -> Any:
    """A header value as the management API printed it, with bytes that are not UTF-8 (which it
    prints as ``"Not UTF-8, base64 is: ..."``) given back as bytes."""
    if isinstance(value, str) and value.startswith(_NOT_UTF8):
        return base64.b64decode(value[len(_NOT_UTF8):])
    if isinstance(value, dict):
        return {k: _unwrapped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrapped(v) for v in value]
    return value


def read_text(text: str, where: str = "tracing log") -> Iterator[TraceRecord]:
    """The records of a tracing-plugin log in ``text`` format, given as the file's bytes
    decoded as Latin-1 (the plugin writes names, keys and payloads as their bytes)."""
    blocks = text.split(_SEPARATOR)
    if blocks and blocks[0].strip():
        raise TraceFormatError(f"{where}: does not begin with a tracing-plugin text record")
    for number, block in enumerate(blocks[1:], 1):
        try:
            yield _text_block(block)
        except (TraceFormatError, KeyError, ValueError) as error:
            raise TraceFormatError(f"{where}, record {number}: {error}") from None


def _text_block(block: str) -> TraceRecord:
    head = _HEAD.match(block)
    if not head:
        raise TraceFormatError(f"no '<time>: Message published|received' line in {block[:80]!r}")
    body, sep, payload = block[head.end():].partition("\nPayload: \n")
    if not sep:
        raise TraceFormatError("no 'Payload:' line")
    fields: dict[str, str] = {}
    name = None
    for line in body.split("\n"):
        found = _FIELD.match(line)
        if found and (name is None or not line.startswith(" ")):
            name = found.group("name")
            fields[name] = found.group("value")
        elif name is not None and line.strip():
            fields[name] += "\n" + line  # a pretty-printed term goes on over several lines
    kind = _TYPES[head.group("type")]
    # The block ends with the payload and the newline that the next separator begins with.
    if payload.endswith("\n"):
        payload = payload[:-1]
    routed = fields.get("Routed queues")
    text = {name: _utf8(value) for name, value in fields.items()}
    return TraceRecord(
        record_type=kind,
        exchange=text["Exchange"],
        routing_keys=[_utf8(k) for k in parse_term(fields["Routing keys"])],
        properties=typed_table(parse_term(fields["Properties"])),
        routed_queues=[_utf8(q) for q in parse_term(routed)] if routed else None,
        queue=text.get("Queue"),
        traced_at=utc(head.group("time")),
        vhost=text.get("Virtual host"),
        node=text.get("Node"),
        connection=text.get("Connection"),
        channel=int(fields["Channel"]) if "Channel" in fields else None,
        user=text.get("User"),
        payload=payload.encode("latin-1"),
    )


def _utf8(value: str | bytes) -> str:
    """A name or key as the plugin wrote it (UTF-8 bytes, read as Latin-1), as text."""
    data = value if isinstance(value, bytes) else value.encode("latin-1")
    return data.decode("utf-8", "surrogateescape")
