"""``rabbitmq-stream``: RabbitMQ streams as a Spark data source, batch and streaming, on
classic Spark and Spark Connect alike (the Python Data Source API of Spark 4).

```python
from xroute.spark import register, route

register(spark)  # once per session
df = (spark.readStream.format("rabbitmq-stream")
      .option("startingOffset", "first").option("maxRecordsPerTrigger", 100000)
      .load("rabbitmq-stream://reader@broker:5552/%2F?stream=orders"))
routed = route(df, "definitions.json", headers="amqp_headers")
```

Options (the URI's ``stream``, ``start`` and ``end`` parameters are the same options):

- ``path`` (``load``'s argument) or ``uri``: ``rabbitmq-stream://user@host:5552/vhost``; the
  password is the ``password`` option, else ``RABBITMQ_PASSWORD`` (`xroute.streams.uri`);
- ``stream`` (or ``streams``): one name or several, comma-separated; or
  ``streamPattern``: a regular expression matching whole stream names (``orders-.*``), the
  virtual host's streams listed through the management API at ``managementUri`` (default
  ``http://<host>:15672``, same user and password; `xroute.streams.names`). A streaming query
  lists them again at each micro-batch: a stream created later is read from its first
  offset (as Kafka's ``subscribePattern`` reads a new partition), and a stream it was reading
  that is gone fails the query with `StreamVanished`;
- ``startingOffset``: ``first`` (default), ``last``, ``next``, an offset, a time
  (`xroute.streams.offsets`), or one offset per stream as a JSON object (``{"orders": 12}``:
  what the CLI pins, so that a restart starts where the first run meant to);
  ``endingOffset`` (batch only): ``latest`` (default: what is stored when the read is
  planned), an offset, or a JSON object of one offset per stream;
- ``maxRecordsPerTrigger`` (streaming): at most so many messages a micro-batch, over all
  streams;
- ``maxRecordsPerPartition`` (default 200,000) and ``minPartitions`` (default 1): each
  range is split into ranges read in parallel by the executors;
- ``format``: ``messages`` (default, `xroute.streams.records.MESSAGE_SCHEMA`) or
  ``firehose`` (trace records, for a stream bound to ``amq.rabbitmq.trace``);
- ``failOnDataLoss``: ``true`` (default) fails with `StreamTruncated` when retention removed
  offsets a query had not read; ``false`` goes on from the stream's first offset;
- ``reconnectTimeout`` (seconds, default 60): how long the driver and each task retry, with a
  growing back-off, while the node is away (stopped, restarting); then `StreamUnreachable`
  names the stream and the node. A task that lost its connection mid-range resumes after the
  last offset it received (`xroute.streams.reconnect`).

Offsets are the streams' own, one JSON object ``{"stream": next offset}``, and Spark's
checkpoint commits them: a restarted query reads from the committed end, so nothing committed
is read twice and nothing is skipped. The driver only asks each stream for its tail; the
executors read the messages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator

from xroute.core.errors import StreamNotFound, StreamURIError, StreamVanished
from xroute.streams.offsets import OffsetSpec, parse_offset
from xroute.streams.uri import StreamEndpoint, parse_stream_uri, split_streams

NAME = "rabbitmq-stream"
BATCH_ROWS = 8192  # rows per Arrow record batch a task yields
DEFAULT_PARTITION_RECORDS = 200_000

try:  # pyspark is an extra: the module imports without it (the classes then cannot be used)
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceReader,
        DataSourceStreamReader,
        InputPartition,
    )
except ImportError:  # pragma: no cover - exercised by the lean install test only
    DataSource = DataSourceReader = DataSourceStreamReader = InputPartition = object  # type: ignore
try:  # Spark 4.1 and later: availableNow with a target the source fixes itself
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older pyspark: Spark's own fallback
    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Absent from this pyspark."""


@dataclass(frozen=True)
class StreamRange(InputPartition):  # type: ignore[misc]
    """Offsets ``[start, end)`` of one stream: what one task reads."""

    stream: str
    start: int
    end: int


@dataclass(frozen=True)
class SourceOptions:
    """The source's options, checked on the driver (a bad one fails before any task)."""

    endpoint: StreamEndpoint
    streams: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    max_per_trigger: int | None
    max_per_partition: int
    min_partitions: int
    format: str
    fail_on_loss: bool
    # Offsets per stream given as JSON objects: they win over ``starting`` / ``ending``.
    start_at: tuple[tuple[str, int], ...] | None = None
    end_at: tuple[tuple[str, int], ...] | None = None
    pattern: str | None = None  # streamPattern: ``streams`` is then empty
    management_uri: str | None = None
    reconnect_s: float = 60.0

    @classmethod
    def parse(cls, options: dict[str, str], password: str | None = None) -> SourceOptions:
        """The options Spark gives the source; `StreamURIError` naming a bad one. The
        ``password`` option wins over ``password`` (what `register` captured)."""
        opts = {k.lower(): v for k, v in options.items()}
        if "password" not in opts and password is not None:
            opts["password"] = password
        uri = opts.get("path") or opts.get("uri")
        if not uri:
            raise StreamURIError(
                "no rabbitmq-stream:// URI: pass it to load() or as the 'uri' option"
            )
        endpoint = parse_stream_uri(uri, opts.get("password"))
        streams = endpoint.streams + split_streams(opts.get("stream") or opts.get("streams"))
        streams = tuple(dict.fromkeys(streams))
        pattern = opts.get("streampattern", endpoint.pattern)
        if pattern is not None:
            from xroute.streams.names import compile_pattern

            compile_pattern(pattern)
            if streams:
                raise StreamURIError(
                    f"streams {list(streams)} and streamPattern {pattern!r} given: use one"
                )
        elif not streams:
            raise StreamURIError(
                f"no stream named: add ?stream=NAME (or ?pattern=REGEX) to {endpoint.uri}, or "
                "the 'stream' (or 'streamPattern') option"
            )
        from xroute.streams.records import FORMATS

        fmt = opts.get("format", "messages")
        if fmt not in FORMATS:
            raise StreamURIError(f"format {fmt!r} is not one of {sorted(FORMATS)}")
        starting = opts.get("startingoffset", endpoint.start)
        ending = opts.get("endingoffset", endpoint.end)
        start_at = _per_stream(starting, streams, "startingOffset", every=pattern is None)
        end_at = _per_stream(ending, streams, "endingOffset", every=pattern is None)
        return cls(
            endpoint,
            streams,
            parse_offset(None if start_at is not None else starting, "first", "startingOffset"),
            parse_offset(None if end_at is not None else ending, "latest", "endingOffset"),
            _positive(opts, "maxrecordspertrigger", None),
            _positive(opts, "maxrecordsperpartition", DEFAULT_PARTITION_RECORDS) or 1,
            _positive(opts, "minpartitions", 1) or 1,
            fmt,
            _flag(opts.get("failondataloss", "true")),
            start_at,
            end_at,
            pattern,
            opts.get("managementuri", endpoint.management),
            _seconds(opts.get("reconnecttimeout"), endpoint.reconnect_s),
        )

    def resolve(self) -> tuple[tuple[str, ...], frozenset[str] | None]:
        """The streams to read now, and (with a pattern) every stream of the virtual host:
        the management API is asked, and retried while the node is away."""
        if self.pattern is None:
            return self.streams, None
        from xroute.streams.names import resolve

        return resolve(self.endpoint, self.pattern, self.management_uri, self.reconnect_s)


def _per_stream(
    text: str | None, streams: tuple[str, ...], what: str, every: bool = True
) -> tuple[tuple[str, int], ...] | None:
    """A JSON object of one offset per stream (None when ``text`` is not one); ``every``
    stream must have one, unless they are a pattern's (then those it names, any of them)."""
    if text is None or not str(text).strip().startswith("{"):
        return None
    import json

    try:
        given = json.loads(text)
    except ValueError as error:
        raise StreamURIError(f"{what} {text!r} is not a JSON object: {error}") from None
    if not isinstance(given, dict):
        raise StreamURIError(f"{what} {text!r} is not a JSON object")
    missing = [s for s in streams if s not in given] if every else []
    bad = {s: v for s, v in given.items() if type(v) is not int or v < 0}
    if missing or bad:
        raise StreamURIError(
            f"{what} {text!r} must give every stream ({list(streams)}) an offset >= 0"
            + (f"; missing {missing}" if missing else "")
            + (f"; not offsets: {bad}" if bad else "")
        )
    return tuple((s, int(given[s])) for s in (streams if every else tuple(given)))


def _seconds(text: str | None, default: float) -> float:
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise StreamURIError(f"reconnectTimeout must be seconds (>= 0), not {text!r}")
    return value


def _positive(opts: dict[str, str], key: str, default: int | None) -> int | None:
    if key not in opts:
        return default
    try:
        value = int(opts[key])
    except ValueError:
        value = 0
    if value <= 0:
        raise StreamURIError(f"option {key} must be a positive integer, not {opts[key]!r}")
    return value


def _flag(text: str) -> bool:
    if text.strip().lower() in ("true", "1", "yes"):
        return True
    if text.strip().lower() in ("false", "0", "no"):
        return False
    raise StreamURIError(f"failOnDataLoss must be true or false, not {text!r}")


def arrow_schema(fmt: str) -> Any:
    """The Arrow schema of the rows of ``fmt`` as Spark reads it back: timestamps in
    microseconds (Spark's unit)."""
    import pyarrow as pa

    from xroute.streams.records import FORMATS

    return pa.schema([
        f.with_type(pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(f.type) else f
        for f in FORMATS[fmt]
    ])


def spark_schema(fmt: str) -> Any:
    """The Spark schema of the rows of ``fmt`` (from the Arrow one)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema(fmt))


def split(stream: str, start: int, end: int, max_per_partition: int, min_partitions: int) -> list[StreamRange]:
    """``[start, end)`` as consecutive ranges of at most ``max_per_partition`` offsets, at
    least ``min_partitions`` of them when there are that many offsets."""
    size = end - start
    if size <= 0:
        return []
    count = max(math.ceil(size / max_per_partition), min(min_partitions, size))
    step = math.ceil(size / count)
    return [StreamRange(stream, s, min(s + step, end)) for s in range(start, end, step)]


def read_range(options: SourceOptions, part: StreamRange) -> Iterator[Any]:
    """The rows of one range as Arrow record batches (what every task runs)."""
    from xroute.streams.client import read_range as read
    from xroute.streams.records import firehose_batch, message_batch

    make = firehose_batch if options.format == "firehose" else message_batch
    target = arrow_schema(options.format)

    def build(stream: str, entries: list[tuple[int, int, bytes]]) -> Any:
        return make(stream, entries).cast(target)

    pending: list[tuple[int, int, bytes]] = []
    try:
        for first, chunk_ms, entries in read(
            options.endpoint, part.stream, part.start, part.end, options.fail_on_loss,
            options.reconnect_s,
        ):
            pending.extend((first + i, chunk_ms, data) for i, data in enumerate(entries))
            if len(pending) >= BATCH_ROWS:
                yield build(part.stream, pending)
                pending = []
    except StreamNotFound:  # the driver planned this range: the stream existed then
        raise StreamVanished(
            f"stream {part.stream!r} was deleted on {options.endpoint.uri} while offsets "
            f"{part.start}..{part.end - 1} were being read: the query stops rather than skip "
            "them", part.stream,
        ) from None
    if pending:
        yield build(part.stream, pending)


class RabbitMQStreamDataSource(DataSource):  # type: ignore[misc]
    """The ``rabbitmq-stream`` format (see the module's docstring)."""

    # The password `register` found in the driver's environment: Spark creates the source in
    # a Python worker, whose environment is the JVM's, not the driver's.
    _password: str | None = None

    @classmethod
    def name(cls) -> str:
        """The format's name: ``rabbitmq-stream``."""
        return NAME

    def schema(self) -> Any:
        """xroute's message columns (or trace records) and ``stream``, ``offset``,
        ``chunk_timestamp``."""
        return spark_schema(self._options().format)

    def reader(self, schema: Any) -> Any:
        """A batch read of the range ``startingOffset``..``endingOffset``."""
        return BatchReader(self._options())

    def streamReader(self, schema: Any) -> Any:  # noqa: N802 - Spark's name
        """A streaming read from ``startingOffset`` on."""
        return StreamReader(self._options())

    def _options(self) -> SourceOptions:
        return SourceOptions.parse(dict(self.options), self._password)


def with_password(password: str | None) -> type:
    """`RabbitMQStreamDataSource` carrying ``password`` (what `xroute.spark.register`
    registers): a class made here, so that Spark ships it by value, password included, to the
    Python workers that create the source."""
    return type(
        "RabbitMQStreamDataSource",
        (RabbitMQStreamDataSource,),
        {"_password": password, "__qualname__": "with_password.<locals>.RabbitMQStreamDataSource",
         "__doc__": RabbitMQStreamDataSource.__doc__},
    )


class BatchReader(DataSourceReader):  # type: ignore[misc]
    """A bounded read: the range is fixed on the driver when the read is planned."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[StreamRange]:
        """Each stream's range, split (`split`)."""
        from xroute.streams import client

        o = self.options
        streams, _ = o.resolve()
        tails = client.tails(o.endpoint, list(streams), reconnect_s=o.reconnect_s)
        if o.start_at is not None:  # a pattern's unnamed streams: from 0
            starts = {s: dict(o.start_at).get(s, 0) for s in streams}
        else:
            starts = client.positions(o.endpoint, list(streams), o.starting, o.reconnect_s)
        parts: list[StreamRange] = []
        for stream in streams:
            end = tails[stream]
            if o.end_at is not None:
                end = min(end, dict(o.end_at).get(stream, end))
            elif o.ending.kind == "offset":
                end = min(end, int(o.ending.value or 0))
            parts += split(stream, starts[stream], end, o.max_per_partition, o.min_partitions)
        return parts or [StreamRange(streams[0] if streams else "", 0, 0)]

    def read(self, partition: StreamRange) -> Iterator[Any]:
        """The messages of one range."""
        return read_range(self.options, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Micro-batches over the streams' offsets (see the module's docstring)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._initial: dict[str, int] | None = None
        self._target: dict[str, int] | None = None  # availableNow: the tails when it started

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 - Spark's name
        """availableNow: read up to each stream's tail as it is now, in batches of at most
        ``maxRecordsPerTrigger``, then stop (a batch replayed after a restart included; a
        stream a pattern matches only later is left for the next run)."""
        from xroute.streams import client

        o = self.options
        streams, _ = o.resolve()
        self._target = client.tails(o.endpoint, list(streams), reconnect_s=o.reconnect_s)

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 - Spark's name
        """``startingOffset`` resolved in each stream, when the query first starts (a restarted
        query starts from its checkpoint instead). Resolved once per reader: Spark asks again
        when it runs the first batch, and ``next`` or ``last`` would have moved by then."""
        from xroute.streams import client

        if self._initial is None:
            o = self.options
            streams, _ = o.resolve()
            if o.start_at is not None:  # a pattern's unnamed streams: from 0
                self._initial = {s: dict(o.start_at).get(s, 0) for s in streams}
            else:
                self._initial = client.positions(o.endpoint, list(streams), o.starting,
                                                 o.reconnect_s)
        return dict(self._initial)

    def getDefaultReadLimit(self) -> Any:  # noqa: N802 - Spark's name
        """``maxRecordsPerTrigger`` as Spark's read limit."""
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        limit = self.options.max_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:  # noqa: N802
        """Each stream's tail, or less so that the micro-batch holds at most the limit's rows
        (taken from the streams in their order, each given its share). With a pattern, the
        streams are listed again: a new one joins from offset 0, one that is gone fails the
        query (`StreamVanished`)."""
        from xroute.streams import client

        o = self.options
        streams, every = o.resolve()
        if every is not None:
            gone = sorted(s for s in start if s not in every)
            if gone:
                raise self._vanished(gone, start)
        begun = start
        start = {s: int(start.get(s, 0)) for s in streams}
        try:
            tails = client.tails(o.endpoint, list(streams), start, o.reconnect_s)
        except StreamNotFound as error:  # deleted between the listing and the tails
            if every is not None and error.stream in begun:
                raise self._vanished([error.stream], begun) from None
            raise
        if self._target is not None:
            tails = {s: min(tails[s], self._target.get(s, 0)) for s in tails}
        end = {s: max(tails[s], start[s]) for s in streams}
        budget = getattr(limit, "max_rows", None)
        if budget is not None:
            for stream in streams:
                take = min(end[stream] - start[stream], budget)
                end[stream] = start[stream] + take
                budget -= take
        return end

    def _vanished(self, gone: list[str], start: dict[str, int]) -> StreamVanished:
        """The error for streams a pattern's query was reading that are gone."""
        many = len(gone) > 1
        return StreamVanished(
            f"stream{'s' if many else ''} {', '.join(map(repr, gone))} (matched by "
            f"streamPattern {self.options.pattern!r}, read up to offset{'s' if many else ''} "
            f"{', '.join(str(start[s]) for s in gone)}) no longer exist{'' if many else 's'} "
            f"on {self.options.endpoint.uri}: the query stops rather than skip "
            f"{'them' if many else 'it'}; start a new checkpoint to go on without "
            f"{'them' if many else 'it'}",
            gone[0],
        )

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[StreamRange]:
        """The micro-batch's ranges, split (a stream absent from ``start`` is new: from 0)."""
        o = self.options
        parts: list[StreamRange] = []
        for stream in end:
            parts += split(stream, int(start.get(stream, 0)), end[stream],
                           o.max_per_partition, o.min_partitions)
        return parts

    def read(self, partition: StreamRange) -> Iterator[Any]:
        """The messages of one range."""
        return read_range(self.options, partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets (the broker keeps no state of
        this query)."""
