"""Messages read from RabbitMQ streams (``rabbitmq-stream://`` URIs) as the commands' input:
``xroute stream`` routes live from the broker, ``pipeline``, ``diff -m`` and ``verify`` route a
bounded range.

Offsets are pinned before Spark reads anything, so that what is routed and what is counted are
the same messages: a bounded range is resolved once (its start and end in each stream) and
handed to the source as offsets; a live stream's start is resolved on its first run and kept in
its checkpoint folder (`START_FILE`), so that a driver killed before its first batch committed
starts again where it meant to, not at a ``next`` that has moved on.

Each row is named ``stream:offset`` when the message has no message id (the file and row
columns of file datasets are the stream and the offset), and the headers column routed is
``amqp_headers``, the AMQP field table with each value's own type, unless another is named.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from xroute.core.errors import (
    DatasetError,
    PipelineFailed,
    StreamError,
    StreamNotFound,
    StreamURIError,
)
from xroute.pipeline.names import FILE_COLUMN, HEADERS, ROW_COLUMN
from xroute.sources.storage import Location, locate
from xroute.spark import io
from xroute.streams.offsets import OffsetSpec, parse_offset
from xroute.streams.uri import StreamEndpoint, is_stream_uri, parse_stream_uri

FORMAT = "rabbitmq-stream"
START_FILE = "xroute-rabbitmq-stream.json"  # in the checkpoint: the first run's start offsets
TYPED_HEADERS = "amqp_headers"
DEFAULT_MAX_MESSAGES = 100_000  # a live stream's default micro-batch bound

__all__ = [
    "FORMAT", "BrokerRange", "batch_offsets", "broker_columns", "check_broker", "check_spans",
    "describe", "is_broker", "keep_start", "lag_of", "open_source", "pinned_options",
    "pinned_range", "pinned_start", "read_broker_range", "read_broker_stream", "refuse_format",
    "streams_now",
]


def is_broker(source: str | None) -> bool:
    """Whether the messages come from a broker's streams (a ``rabbitmq-stream://`` URI)."""
    return bool(source) and is_stream_uri(str(source))


def open_source(uri: str) -> StreamEndpoint:
    """The URI parsed, with its streams or a pattern (`StreamURIError` when it has neither)."""
    endpoint = parse_stream_uri(uri)
    if not endpoint.streams and endpoint.pattern is None:
        raise StreamURIError(
            f"no stream named: add ?stream=NAME (or ?pattern=REGEX) to {endpoint.uri}"
        )
    if endpoint.pattern is not None:
        from xroute.streams.names import compile_pattern

        compile_pattern(endpoint.pattern)
    return endpoint


def streams_now(endpoint: StreamEndpoint, reconnect_s: float | None = None) -> tuple[str, ...]:
    """The streams the URI names, or those its pattern matches now (the management API)."""
    if endpoint.pattern is None:
        return endpoint.streams
    from xroute.streams.names import resolve

    wait = endpoint.reconnect_s if reconnect_s is None else reconnect_s
    return resolve(endpoint, endpoint.pattern, endpoint.management, wait)[0]


def _matches_none(endpoint: StreamEndpoint) -> StreamNotFound:
    return StreamNotFound(
        f"pattern {endpoint.pattern!r} matches no stream in virtual host {endpoint.vhost!r} "
        f"of {endpoint.uri}"
    )


def broker_columns(columns: io.Columns) -> io.Columns:
    """The routing columns for stream rows: the typed ``amqp_headers`` unless the headers
    column was named on purpose."""
    if columns.headers == HEADERS:
        return io.Columns(columns.key, columns.exchange, TYPED_HEADERS)
    return columns


@dataclass(frozen=True)
class BrokerRange:
    """Offsets ``[start, end)`` in each stream, and each stream's tail when they were taken."""

    endpoint: StreamEndpoint
    start: dict[str, int]
    end: dict[str, int]
    tails: dict[str, int]

    @property
    def messages(self) -> int:
        """How many messages the range holds."""
        return sum(self.end[s] - self.start[s] for s in self.start)


def pinned_range(uri: str) -> BrokerRange:
    """The URI's range (``start``, default ``first``; ``end``, default the tail now) resolved in
    each stream: `StreamNotFound` for a stream that does not exist, `StreamError` when the node
    cannot be read. A pattern is resolved here too: the range names the streams it matched."""
    from dataclasses import replace

    from xroute.streams import client

    endpoint = open_source(uri)
    if endpoint.pattern is not None:
        matched = streams_now(endpoint, 0)
        if not matched:
            raise _matches_none(endpoint)
        endpoint = replace(endpoint, streams=matched, pattern=None)
    start_spec = parse_offset(endpoint.start, "first", "start")
    end_spec = parse_offset(endpoint.end, "latest", "end")
    if end_spec.kind not in ("offset", "next", "last"):  # as an end, last and next: the tail
        raise StreamURIError(f"end={endpoint.end} in {endpoint.uri}: use an offset or latest")
    streams = list(endpoint.streams)
    tails = client.tails(endpoint, streams, reconnect_s=0)
    starts = client.positions(endpoint, streams, start_spec, 0)
    ends = {
        s: min(tails[s], end_spec.value) if end_spec.kind == "offset" else tails[s]
        for s in streams
    }
    return BrokerRange(endpoint, starts, {s: max(ends[s], starts[s]) for s in streams}, tails)


def pinned_options(options: Any) -> Any:
    """Pipeline (or diff) options whose ``messages`` is a broker URI, with the range pinned
    (`pinned_range`, unless the preflight did) and the typed headers column."""
    from dataclasses import replace

    span = options.broker_range or pinned_range(options.messages)
    offsets = {s: [span.start[s], span.end[s]] for s in span.start}
    changes: dict[str, Any] = {"broker_range": span, "columns": broker_columns(options.columns)}
    if hasattr(options, "extra"):  # the summary says which offsets were routed
        changes["extra"] = {**options.extra, "source": span.endpoint.uri, "offsets": offsets}
    return replace(options, **changes)


def describe(span: BrokerRange) -> str:
    """The range in one line: the node and each stream's offsets."""
    parts = [
        f"{s} offsets {span.start[s]:,}..{span.end[s]:,} ({span.end[s] - span.start[s]:,} "
        f"messages; tail {span.tails[s]:,})"
        for s in span.start
    ]
    return f"{span.endpoint.uri}: " + "; ".join(parts)


def _register(spark: Any, endpoint: StreamEndpoint) -> None:
    """The ``rabbitmq-stream`` format on ``spark``, with the driver's password (as
    `xroute.spark.register` does; not imported from there: the package imports this module's
    users)."""
    from xroute.spark.rabbitmq_stream import with_password

    spark.dataSource.register(with_password(endpoint.password))


def _frame(frame: Any) -> io.Dataset:
    """The source's rows as a dataset: the stream and offset name each record."""
    from pyspark.sql import functions as F

    columns = tuple(frame.columns)
    named = frame.select(
        *[F.col(f"`{c}`") for c in columns],
        F.col("stream").alias(FILE_COLUMN),
        F.col("offset").alias(ROW_COLUMN),
    )
    return io.Dataset(FORMAT, columns, "", named.schema, frame=named)


def read_broker_range(spark: Any, span: BrokerRange) -> io.Dataset:
    """The pinned range as a (batch) dataset."""
    _register(spark, span.endpoint)
    frame = (
        spark.read.format(FORMAT)
        .option("startingOffset", json.dumps(span.start))
        .option("endingOffset", json.dumps(span.end))
        .option("reconnectTimeout", span.endpoint.reconnect_s)
        .load(span.endpoint.uri)
    )
    return _frame(frame)


def pinned_start(checkpoint: str, endpoint: StreamEndpoint, spec: OffsetSpec) -> dict[str, int]:
    """Where a live stream starts in each stream: what its checkpoint folder recorded on the
    first run (`keep_start`), else ``spec`` resolved now."""
    from xroute.streams import client

    record = locate(checkpoint).child(START_FILE)
    if record.exists():
        kept = json.loads(record.read_bytes())
        start = {s: int(o) for s, o in kept["start"].items()}
        if endpoint.pattern is not None:  # the streams it matched then (later ones: from 0)
            return start
        missing = [s for s in endpoint.streams if s not in start]
        if missing:
            raise StreamURIError(
                f"the checkpoint {checkpoint} was made for streams {sorted(start)}, not "
                f"{missing}: use a new checkpoint (and OUT) for other streams"
            )
        return {s: start[s] for s in endpoint.streams}
    return client.positions(endpoint, list(streams_now(endpoint)), spec, endpoint.reconnect_s)


def keep_start(checkpoint: str, endpoint: StreamEndpoint, start: dict[str, int]) -> None:
    """Record ``start`` in the checkpoint folder unless it holds one (before Spark runs a
    batch: a restart before the first batch commits starts there too)."""
    record = locate(checkpoint).child(START_FILE)
    if not record.exists():
        record.write_bytes(json.dumps({"uri": endpoint.uri, "start": start}).encode())


def read_broker_stream(
    spark: Any, endpoint: StreamEndpoint, start: dict[str, int], max_messages: int
) -> io.Dataset:
    """The streams from ``start`` on as a streaming dataset, at most ``max_messages`` a batch."""
    _register(spark, endpoint)
    frame = (
        spark.readStream.format(FORMAT)
        .option("startingOffset", json.dumps(start))
        .option("maxRecordsPerTrigger", max_messages)
        .option("reconnectTimeout", endpoint.reconnect_s)
        .options(**({"managementUri": endpoint.management} if endpoint.management else {}))
        .load(endpoint.uri)
    )
    return _frame(frame)


def batch_offsets(checkpoint: str, batch_id: int) -> tuple[dict[str, int], dict[str, int]]:
    """Batch ``batch_id``'s offsets ``[start, end)`` per stream, as Spark's offset log holds
    them (written before the batch ran): the end of batch N-1 (or the pinned start) and the
    end of batch N."""
    folder = locate(checkpoint)
    end = _logged(folder, batch_id)
    if end is None:
        raise PipelineFailed(f"Spark's offset log in {checkpoint} has no batch {batch_id}")
    start = _logged(folder, batch_id - 1) if batch_id > 0 else None
    if start is None:
        record = folder.child(START_FILE)
        if not record.exists():
            raise PipelineFailed(f"{checkpoint} has no {START_FILE} (the stream's first start)")
        start = {s: int(o) for s, o in json.loads(record.read_bytes())["start"].items()}
    return {s: int(start.get(s, 0)) for s in end}, end


def _logged(folder: Location, batch_id: int) -> dict[str, int] | None:
    """The source's end offsets in Spark's offset log file for ``batch_id`` (None: absent)."""
    if batch_id < 0:
        return None
    entry = folder.child("offsets", str(batch_id))
    if not entry.exists():
        return None
    # "v1", the batch's metadata, then one line per source: ours is {"stream": offset}.
    lines = entry.read_bytes().decode().splitlines()
    return {s: int(o) for s, o in json.loads(lines[2]).items()}


def check_spans(
    start: dict[str, int], end: dict[str, int], spans: dict[str, list[int]], counts: dict[str, int]
) -> int:
    """The batch's message count, once the tasks are proven to have read exactly offsets
    ``[start, end)`` of each stream (first and last offset seen, and as many rows as offsets);
    `PipelineFailed` naming the stream otherwise."""
    total = 0
    for stream in end:
        want = end[stream] - start[stream]
        total += max(want, 0)
        seen = spans.get(stream)
        got = (seen[0], seen[1] + 1) if seen else None
        if want <= 0 and got is None:
            continue
        if got != (start[stream], end[stream]) or counts.get(stream, 0) != want:
            raise PipelineFailed(
                f"stream {stream!r}: the batch was to read offsets {start[stream]}..{end[stream] - 1}"
                f" ({want} messages); the tasks read "
                + (f"{got[0]}..{got[1] - 1} ({counts.get(stream, 0)} messages)" if got else "none")
                + "; nothing of this batch was committed"
            )
    return total


def lag_of(
    endpoint: StreamEndpoint, start: dict[str, int], markers: dict[int, dict[str, Any]]
) -> int | None:
    """Messages stored in the streams after the last committed batch (or after ``start``);
    None when the tails cannot be read now: lag is shown, never fatal."""
    from xroute.streams import client

    done: dict[str, int] = dict(start)
    for marker in markers.values():
        for stream, (_, end) in marker.get("offsets", {}).items():
            done[stream] = max(done.get(stream, 0), end)
    # With a pattern, the streams read so far (a new one shows in the next batch's lag).
    streams = list(done) if endpoint.pattern is not None else list(endpoint.streams)
    try:  # one try: a node away shows as an unknown lag, it does not hold the batch up
        tails = client.tails(endpoint, streams, done, reconnect_s=0)
    except StreamError:
        return None
    return sum(max(tails[s] - done.get(s, 0), 0) for s in streams)


def refuse_format(fmt: str, source: str) -> None:
    """The broker's streams are read as messages: a file format is a mistake."""
    if fmt not in ("auto", "messages"):
        raise DatasetError(
            f"--format {fmt} names a file format; {source} is read from the broker as messages "
            "(leave --format out)",
            fmt,
        )


def check_broker(uri: str) -> str:
    """Preflight, before Spark starts: the URI, the password, each stream there and readable
    (its last chunk read); the streams' tails in one line. `StreamURIError`,
    `StreamNotFound` or `StreamError` saying what is wrong."""
    from xroute.streams import client

    endpoint = open_source(uri)
    streams = streams_now(endpoint, 0)  # at once: the preflight says what is wrong
    tails = client.tails(endpoint, list(streams), reconnect_s=0)
    found = ", ".join(f"{s} (tail at offset {tails[s]:,})" for s in streams)
    if endpoint.pattern is None:
        return f"{endpoint.uri}: stream{'s' if len(tails) > 1 else ''} {found}"
    if not streams:
        return (f"{endpoint.uri}: pattern {endpoint.pattern!r} matches no stream yet (one "
                "created later is read from its first offset)")
    return f"{endpoint.uri}: pattern {endpoint.pattern!r} matches {found}"
