"""``xroute capture``: a live broker's firehose (and event exchange) into Parquet files.

One queue is bound to ``amq.rabbitmq.trace`` (``publish.#``, and ``deliver.#`` on request) and
to ``amq.rabbitmq.event`` (``binding.*``, ``queue.*``, ``exchange.*``, ``policy.*``), so the
broker fills it in the order things happened, and every record gets its place in that order
(``seq``). Records are written to ``part-<first seq>-<last seq>.parquet`` files, rolled by size
or time; a file is acknowledged to the broker only once it is complete in storage (written
under a ``_`` name and moved into place on a local disk; one PUT on an object store), so
stopping (Ctrl-C, SIGTERM) or a crash loses nothing that was acknowledged. Files roll by records,
by (about) bytes, or by time, whichever comes first. With ``queue=`` a
named, durable queue is used: a capture that dies leaves its unacknowledged records there for
the next one; by default the queue is the connection's own and goes with it.

The firehose must be on (``rabbitmqctl trace_on -p VHOST``; AMQP cannot switch it on) and the
event exchange needs the ``rabbitmq_event_exchange`` plugin.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from xroute.amqp.properties import decode_properties
from xroute.core.errors import TraceFormatError
from xroute.sources.storage import Location, locate
from xroute.traces.firehose import EVENT_EXCHANGE, TRACE_EXCHANGE, record_of_message
from xroute.traces.records import TraceRecord, to_table

EVENT_PATTERNS = ("binding.*", "queue.*", "exchange.*", "policy.*")
RECORD_OVERHEAD = 256  # bytes a record's fields add to its payload, about, for rolling by size
_PART = re.compile(r"part-(\d+)-(\d+)\.parquet$")


@dataclass
class CaptureStats:
    """What a capture wrote."""

    records: int = 0
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # messages that were not trace records


def next_seq(out: Location) -> int:
    """The seq after the last one already captured in ``out`` (0 for a new folder), so that a
    capture resumed into the same folder keeps one order."""
    last = -1
    for path in out.files(recursive=False):
        found = _PART.search(path)
        if found:
            last = max(last, int(found.group(2)))
    return last + 1


def connect(url: str, properties: dict[int, bytes] | None = None) -> Any:
    """A py-amqp connection to an ``amqp://user:password@host:port/vhost`` URL. With
    ``properties``, the property bytes of the last content header received on each channel
    are kept there (py-amqp decodes tables into Python values, which lose AMQP types)."""
    import amqp

    parsed = urlparse(url)
    if parsed.scheme not in ("amqp", ""):
        raise TraceFormatError(f"capture needs an amqp:// URL, got {url!r}")
    extra = {} if properties is None else {"frame_handler": _keeping_properties(properties)}
    connection = amqp.Connection(
        host=f"{parsed.hostname or '127.0.0.1'}:{parsed.port or 5672}",
        userid=unquote(parsed.username or "guest"),
        password=unquote(parsed.password or "guest"),
        virtual_host=unquote(parsed.path[1:]) if len(parsed.path) > 1 else "/",
        **extra,
    )
    connection.connect()
    return connection


def _keeping_properties(kept: dict[int, bytes]) -> Any:
    """A py-amqp frame handler that also keeps each content header's property bytes by
    channel: frames come in order, so a message's callback finds its own header's there."""
    from amqp.method_framing import frame_handler

    def make(connection: Any, callback: Any, **options: Any) -> Any:
        inner = frame_handler(connection, callback, **options)

        def on_frame(frame: tuple[int, int, Any]) -> Any:
            if frame[0] == 2:  # a content header: class, weight, body size, then properties
                kept[frame[1]] = bytes(frame[2][12:])
            return inner(frame)

        return on_frame

    return make


def typed_headers(data: bytes | None) -> dict[str, Any] | None:
    """The header table of a message's property bytes, each value in its AMQP type (None
    when there are none)."""
    if not data:
        return None
    return decode_properties(data).headers


def _body(body: Any) -> bytes | None:
    # py-amqp hands over text when the message names a content encoding.
    if body is None or isinstance(body, bytes):
        return body
    return body.encode("utf-8") if isinstance(body, str) else bytes(body)


class Capture:
    """A running capture (see the module docstring). `run` until `stop` is called, a number of
    records or seconds is reached, or the broker has been quiet for ``idle_seconds``."""

    def __init__(
        self,
        url: str,
        out: str,
        *,
        events: bool = True,
        deliveries: bool = False,
        queue: str | None = None,
        roll_records: int = 100_000,
        roll_seconds: float = 60.0,
        roll_bytes: int = 64 << 20,
    ) -> None:
        self.out = locate(out)
        self._properties: dict[int, bytes] = {}  # by channel: the last message's, as sent
        self.connection = connect(url, self._properties)
        self.channel = self.connection.channel()
        durable = queue is not None
        self.queue = self.channel.queue_declare(
            queue or "", durable=durable, exclusive=not durable, auto_delete=False
        ).queue
        self.channel.queue_bind(self.queue, TRACE_EXCHANGE, "publish.#")
        if deliveries:
            self.channel.queue_bind(self.queue, TRACE_EXCHANGE, "deliver.#")
        if events:
            for pattern in EVENT_PATTERNS:
                self.channel.queue_bind(self.queue, EVENT_EXCHANGE, pattern)
        self.channel.basic_qos(0, min(roll_records, 65_535), False)
        self.roll_records = roll_records
        self.roll_seconds = roll_seconds
        self.roll_bytes = roll_bytes
        self._bytes = 0  # about what the pending records weigh: payloads and a bit each
        self.seq = next_seq(self.out)
        self.stats = CaptureStats()
        self._pending: list[TraceRecord] = []
        self._last_tag: int | None = None
        self._unacked = 0  # deliveries since the last ack: the prefetch window counts them all
        self.delivered = 0
        self._opened = time.monotonic()
        self._stopping = False
        self.channel.basic_consume(self.queue, callback=self._on_message, no_ack=False)

    def _on_message(self, message: Any) -> None:
        info = message.delivery_info
        now = datetime.now(timezone.utc)
        try:
            # The firehose's headers hold the traced message's own: read them from the bytes,
            # with their types, rather than as py-amqp decoded them.
            headers = typed_headers(self._properties.get(self.channel.channel_id))
            if headers is None:
                headers = message.properties.get("application_headers")
            record = record_of_message(
                info["exchange"], info["routing_key"], headers, _body(message.body), now
            )
        except TraceFormatError as error:
            self.stats.skipped.append(str(error))
        else:
            if not self._about_itself(record):
                self._pending.append(record)
                self._bytes += len(record.payload or b"") + RECORD_OVERHEAD
        self._last_tag = info["delivery_tag"]
        self._unacked += 1
        self.delivered += 1

    def _about_itself(self, record: TraceRecord) -> bool:
        """An event about the capture's own queue (its bindings to the trace and event
        exchanges): not part of the topology being traced."""
        fields = record.properties.get("headers") or {}
        return record.record_type == "event" and self.queue in (
            fields.get("name"), fields.get("destination_name")
        )

    def stop(self) -> None:
        """Ask `run` to finish: the records received so far are written and acknowledged."""
        self._stopping = True

    def flush(self) -> None:
        """Write the pending records as one file and acknowledge them."""
        if self._pending:
            table = to_table(self._pending, self.seq)
            name = f"part-{self.seq:012d}-{self.seq + len(self._pending) - 1:012d}.parquet"
            self._write(table, name)
            self.seq += len(self._pending)
            self.stats.records += len(self._pending)
            self.stats.files.append(name)
            self._pending = []
            self._bytes = 0
        if self._last_tag is not None:
            self.channel.basic_ack(self._last_tag, multiple=True)
            self._last_tag = None
            self._unacked = 0
        self._opened = time.monotonic()

    def _write(self, table: pa.Table, name: str) -> None:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        data = sink.getvalue().to_pybytes()
        target = self.out.child(name)
        if self.out.local:  # a rename is atomic on a local disk; a PUT is on an object store
            staged = self.out.child("_" + name)
            staged.write_bytes(data)
            self.out.filesystem.move(staged.path, target.path)
        else:
            target.write_bytes(data)

    def run(
        self,
        max_records: int | None = None,
        seconds: float | None = None,
        idle_seconds: float | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> CaptureStats:
        """Capture until stopped (see the class docstring); returns what was written."""
        started = last_message = time.monotonic()
        try:
            while not self._stopping:
                before = self.delivered
                try:
                    self.connection.drain_events(timeout=0.2)
                except socket.timeout:
                    pass
                now = time.monotonic()
                total = len(self._pending) + self.stats.records
                if self.delivered != before:
                    last_message = now
                    if on_progress is not None:
                        on_progress(total)
                if (
                    self._unacked >= self.roll_records
                    or self._bytes >= self.roll_bytes
                    or now - self._opened >= self.roll_seconds
                ):
                    self.flush()
                if max_records is not None and total >= max_records:
                    break
                if seconds is not None and now - started >= seconds:
                    break
                if idle_seconds is not None and now - last_message >= idle_seconds:
                    break
        finally:
            self.flush()
        return self.stats

    def close(self) -> None:
        """Close the connection (unacknowledged records go back to a named queue)."""
        try:
            self.connection.close()
        except Exception:  # noqa: BLE001 - the broker may already be gone
            pass
