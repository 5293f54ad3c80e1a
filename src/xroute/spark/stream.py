"""``xroute stream``: route files as they land in a folder, on Spark Structured Streaming,
each message written exactly once through crashes and restarts.

Spark's file stream source lists SOURCE and hands each micro-batch (at most
``max_files`` new files) to `foreachBatch`. Each batch is routed and written by the executors
with the batch job's own task function (`xroute.spark.worker.partition_function`: route,
write deliveries / unroutable / rejected as Parquet parts, return a manifest), proven with the
job's own invariant, and committed with a marker written last
(`xroute.pipeline.stream_commit`). The running summary is derived from the markers
(`xroute.pipeline.stream_summary`).

Where things may live: SOURCE is read by Spark's JVM, so it must be a local path (or file://,
or hdfs://); Spark reads s3:// only with hadoop-aws on its classpath. OUT is written by
xroute's Python tasks with pyarrow: a local path or any URI (s3://, gs://, ...). The
checkpoint is Spark's: a local path (or HDFS).
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlparse

from xroute.core.batch import BatchRouter
from xroute.core.errors import (
    DatasetError,
    DefinitionsError,
    OtherStreamOutput,
    PipelineFailed,
    SparkConnectUnavailable,
    XRouteError,
)
from xroute.core.topology import Topology
from xroute.engines import TopicMatcher
from xroute.pipeline.delta import DeltaBatchCommit, check_table_format
from xroute.pipeline.engine import PIPELINE_ENGINE
from xroute.pipeline.output import STREAM_FILE, check_apart, check_stream_out
from xroute.pipeline.stream_commit import BatchCommit, committed_batches
from xroute.pipeline.stream_summary import status_line, stream_summary, summary_files
from xroute.pipeline.transform import Plan
from xroute.sources.definitions import read_definitions, with_profile
from xroute.sources.storage import Location, locate
from xroute.spark import broker_input, io
from xroute.spark.job import (
    check_invariant,
    make_plan,
    merge_manifests,
    spark_error,
    unreadable_file,
)
from xroute.spark.session import (
    is_connect,
    master_of,
    server_lost,
    session_settings,
)
from xroute.spark.trace_input import (
    detect_trace,
    is_trace,
    publish_records,
    read_trace_stream,
    refuse_schema,
)
from xroute.spark.worker import (
    MANIFEST_SCHEMA,
    OUTPUTS,
    ShippedTopology,
    Task,
    partition_function,
)
from xroute.streams.offsets import parse_offset


@dataclass(frozen=True)
class StreamOptions:
    """One stream's parameters, as ``xroute stream`` takes them."""

    definitions: str
    source: str
    out: str
    checkpoint: str
    exchange: str | None = None
    format: str = "auto"  # or firehose: xroute capture's files (`xroute.spark.trace_input`)
    schema: str | None = None  # Spark DDL; None: from the files present at start
    max_files: int = 10  # maxFilesPerTrigger: a backlog is eaten in steps of this many files
    available_now: bool = False  # route what is there, then stop
    trigger_seconds: float | None = None  # None: each batch starts when the last one ends
    reload_definitions: bool = False
    keep_columns: tuple[str, ...] = ()
    engine: str = PIPELINE_ENGINE
    vhost: str | None = None
    rabbitmq: str | None = None  # the version profile (xroute.core.profiles)
    columns: io.Columns = io.Columns()  # the routing key, exchange and headers columns
    table_format: str = "parquet"  # or "delta": see `xroute.pipeline.delta`
    # A broker source (rabbitmq-stream://): at most this many messages a batch.
    max_messages: int = broker_input.DEFAULT_MAX_MESSAGES


class StopRequested(Exception):
    """Raised inside foreachBatch when Ctrl-C came before the batch started: the batch is
    not committed, so Spark runs it again on the next start."""


class Definitions:
    """The topology the stream routes with now: parsed, fingerprinted, packed for the tasks;
    re-read at a batch boundary when asked and the file changed."""

    def __init__(
        self,
        path: str,
        vhost: str | None,
        engine: str,
        text: bytes | None = None,
        rabbitmq: str | None = None,
    ) -> None:
        """Read ``path``, or take ``text`` as its content (as read by the client); ``rabbitmq``
        is the version profile."""
        self.path, self.vhost, self.engine = path, vhost, engine
        self.rabbitmq = rabbitmq
        self.text = b""
        self._load(self._read() if text is None else text)

    def _read(self) -> bytes:
        return locate(self.path).read_bytes()

    def _load(self, text: bytes) -> None:
        try:
            parsed = json.loads(text)
        except ValueError as error:  # UnicodeDecodeError included
            raise DefinitionsError(
                f"cannot read definitions file {self.path!r}: {error}", self.path
            ) from None
        definitions = dict(with_profile(read_definitions(parsed), self.rabbitmq))
        # Checks the definitions, and numbers queues and bindings as the workers will.
        topology = Topology.from_definitions(definitions, vhost=self.vhost, engine="reference")
        self.router, self.text = BatchRouter(topology), text
        self.shipped = ShippedTopology.of(definitions, self.vhost, self.engine)
        self.token = self.shipped.token

    def refresh(self) -> bool:
        """Re-read the file; whether it changed (a bad new file raises, naming it)."""
        text = self._read()
        if text == self.text:
            return False
        self._load(text)
        return True


class Background:
    """Runs ``work`` on the latest value submitted, in a thread of its own; values submitted
    while it is busy are coalesced (only the newest matters). An error is kept in ``error``
    (the stream's final, synchronous summary write fails the same way, and says so)."""

    def __init__(self, work: Callable[[Any], Any]) -> None:
        self.work = work
        self._latest: Any = None
        self._pending = threading.Event()
        self._closing = False
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="xroute-summary", daemon=True)
        self._thread.start()

    def submit(self, value: Any) -> None:
        """Have ``work(value)`` done soon, replacing any value not yet taken."""
        self._latest = value
        self._pending.set()

    def _run(self) -> None:
        while True:
            self._pending.wait()
            self._pending.clear()
            if self._closing:
                return
            try:
                self.work(self._latest)
            except BaseException as error:  # noqa: BLE001 - raised again by close()
                self.error = error

    def close(self) -> None:
        """Stop the thread (the caller writes the final value itself)."""
        self._closing = True
        self._pending.set()
        self._thread.join()


class _State:
    """What the driver's main thread and Spark's foreachBatch thread share."""

    def __init__(self, stop: threading.Event | None = None) -> None:
        self.stop = stop or threading.Event()
        self.interrupted = False  # the stop came from Ctrl-C (SIGINT), not from ``stop``
        self.lock = threading.Lock()  # guards ``running`` against ``stop``
        self.running = False  # a batch is being processed
        self.error: BaseException | None = None


def run_stream(
    spark: Any,
    options: StreamOptions,
    say: Callable[[str], None] = print,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Run the stream until it ends (``available_now``), fails, or is stopped (by SIGINT, or
    by setting ``stop``: after the current batch); the summary of every committed batch."""
    TopicMatcher(engine=options.engine)  # an unknown engine fails here, not on the executors
    check_table_format(options.table_format)
    definitions = Definitions(
        options.definitions, options.vhost, options.engine, rabbitmq=options.rabbitmq
    )
    fmt = options.format
    broker = broker_input.is_broker(options.source)
    endpoint, start = None, {}
    if broker:
        broker_input.refuse_format(fmt, options.source)
        endpoint = broker_input.open_source(options.source)
        options = replace(options, columns=broker_input.broker_columns(options.columns))
        start = broker_input.pinned_start(
            options.checkpoint, endpoint, parse_offset(endpoint.start, "first", "start")
        )
        dataset = broker_input.read_broker_stream(spark, endpoint, start, options.max_messages)
    elif fmt == "auto" and locate(options.source).is_dir():
        fmt = detect_trace(options.source) or fmt
    if broker:
        pass  # read above, from the broker
    elif is_trace(fmt):
        refuse_schema(options.schema)
        dataset = read_trace_stream(
            spark, options.source, fmt, options.max_files, options.columns
        )
        options = replace(options, format=fmt)  # each batch takes its messages apart
    else:
        dataset = io.read_message_stream(
            spark, options.source, fmt, options.schema, options.max_files, options.columns
        )
    io.check_columns(dataset, options.exchange, options.keep_columns, options.columns)
    plan = make_plan(dataset, options.exchange, options.keep_columns, options.columns)
    out = locate(options.out)
    if not broker:
        check_apart(options.out, [options.source], what="stream source")
    check_stream_out(out, options.out)
    stream_id = _claim(out, options.checkpoint, options.out)
    if endpoint is not None:
        broker_input.keep_start(options.checkpoint, endpoint, start)
    markers = committed_batches(out)
    state = _State(stop)

    def summary(committed: dict[int, dict[str, Any]]) -> dict[str, Any]:
        result = stream_summary(
            committed,
            queues=definitions.router.queues,
            bindings=definitions.router.bindings,
            definitions=definitions.token,
            engine=options.engine,
            master=master_of(spark),
            extra={"source": options.source, "checkpoint": options.checkpoint},
        )
        for name, data in summary_files(result).items():
            out.child(name).write_bytes(data)
        return result

    # Drawn beside the stream, not inside a batch: the plot takes about a second here.
    summaries = Background(summary)

    def report(batch_id: int, marker: dict[str, Any]) -> None:
        markers[batch_id] = marker
        summaries.submit(dict(markers))
        if endpoint is not None:
            say(status_line(marker, broker_input.lag_of(endpoint, start, markers), "messages"))
        else:
            say(status_line(marker, _lag(options.source, markers)))

    def process(frame: Any, batch_id: int) -> None:
        with state.lock:
            stopping = state.stop.is_set()
            state.running = not stopping
        try:
            if stopping:
                raise StopRequested()
            _record_stream(out, options.checkpoint)  # before any marker of this stream
            commit = _batch_commit(out, batch_id, options)
            if commit.done():
                say(f"batch {batch_id:>5}  already committed: skipped (a replay)")
                return
            commit.clear()
            if options.reload_definitions and definitions.refresh():
                say(f"batch {batch_id:>5}  new definitions from {options.definitions}")
            report(batch_id, run_batch(frame, commit, plan, definitions, options))
        except BaseException as error:
            state.error = error
            raise
        finally:
            state.running = False

    def new_markers() -> None:
        if options.reload_definitions:
            definitions.refresh()
        for batch_id, marker in committed_batches(out).items():
            if batch_id not in markers:
                report(batch_id, marker)

    poll: Callable[[], None] | None = None
    if is_connect(spark):
        # foreachBatch runs in a Python process of the Connect server, not here: the batch
        # function carries all it needs, and this process learns of each batch by its marker.
        process = remote_batch_function(options, plan, definitions.text)
        poll = new_markers

    writer = (
        dataset.frame.writeStream.foreachBatch(process)
        .option("checkpointLocation", options.checkpoint)
        .queryName(f"xroute-stream-{stream_id[:8]}")
    )
    if options.available_now:
        writer = writer.trigger(availableNow=True)
    elif options.trigger_seconds:
        interval = f"{int(options.trigger_seconds * 1000)} milliseconds"
        writer = writer.trigger(processingTime=interval)
    # Text files are read whole, each by one task, so that generated ids (file:row) count
    # rows from the file's start; the query keeps the settings it started with.
    settings = io.WHOLE_FILES if dataset.format not in ("parquet", broker_input.FORMAT) else {}
    def interrupted(*_: Any) -> None:
        state.interrupted = True
        state.stop.set()

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        with session_settings(spark, settings):
            query = writer.start()
            _wait(query, state, say, poll)
            if poll is not None:
                poll()
    finally:
        signal.signal(signal.SIGINT, previous)
        summaries.close()
    _record_stream(out, options.checkpoint)  # OUT is this stream's, even with no batch yet
    return summary(markers)


def run_batch(
    frame: Any, commit: BatchCommit, plan: Plan, definitions: Definitions, options: StreamOptions
) -> dict[str, Any]:
    """Route, write, prove and commit one micro-batch; its marker."""
    started = time.time()
    commit.begin()
    broker = broker_input.is_broker(options.source)
    # The marker lists the files each batch read (lag, latency); from a broker, the first and
    # last offset of each stream too, to prove the batch read its range whole.
    task = Task(plan, commit.staging.uri, count_files=True, spans=broker)
    skipped, files = None, []
    try:
        if is_trace(options.format):  # deliveries and events: counted apart, not routed
            frame, skipped, files = publish_records(frame)
        routed = frame.mapInArrow(partition_function(task, definitions.shipped), MANIFEST_SCHEMA)
        manifests = [json.loads(row[0]) for row in routed.collect()]
        # Counted apart from the routing, for the invariant. From a broker, by the offsets
        # Spark logged for the batch (counting the frame would read the broker again).
        read = None if broker else frame.count()
    except XRouteError:
        raise
    except Exception as error:
        raise _failure(error, options.source) from None
    manifest = merge_manifests(manifests) if manifests else _nothing(definitions.router)
    offsets: dict[str, list[int]] = {}
    if broker:
        first, end = broker_input.batch_offsets(options.checkpoint, commit.batch_id)
        read = broker_input.check_spans(
            first, end, manifest.get("spans", {}), dict(manifest["inputs"])
        )
        offsets = {s: [first[s], end[s]] for s in end}
    manifest["inputs"].update(dict.fromkeys(files, 0))  # files of deliveries only, read too
    written = commit.keep_listed(manifest["files"])
    counts = {
        "input": read,
        "delivered": manifest["delivered"],
        **{name: written[name] for name in OUTPUTS},
    }
    check_invariant(counts, manifest)
    return commit.publish(
        {
            "counts": counts,
            "queues": dict(zip(definitions.router.queues, manifest["queues"])),
            "hits": manifest["hits"],
            "errors": dict(manifest["errors"]),
            "inputs": dict(manifest["inputs"]),
            "definitions": definitions.token,
            "started_at": started,
            **({"offsets": offsets} if offsets else {}),
            **({} if skipped is None else {"trace_records_skipped": skipped}),
        }
    )


def _batch_commit(out: Location, batch_id: int, options: StreamOptions) -> BatchCommit:
    """How batch ``batch_id`` reaches OUT: Parquet folders and a marker, or Delta tables
    appended by app transactions named by the checkpoint's id (the stream's identity)."""
    if options.table_format == "delta":
        app_id = _checkpoint_id(options.checkpoint)
        assert app_id is not None  # _record_stream waited for it
        return DeltaBatchCommit(out, OUTPUTS, batch_id, app_id=f"xroute-stream-{app_id}")
    return BatchCommit(out, OUTPUTS, batch_id)


def remote_batch_function(
    options: StreamOptions, plan: Plan, text: bytes
) -> Callable[[Any, int], None]:
    """foreachBatch's function for a Spark Connect session, where it runs in a Python process
    of the server: self-contained (the definitions as the client read them travel in it), it
    commits each batch exactly as the classic path does, and reports through its marker."""

    def process(frame: Any, batch_id: int) -> None:
        out = locate(options.out)
        _record_stream(out, options.checkpoint)
        commit = _batch_commit(out, batch_id, options)
        if commit.done():
            return
        commit.clear()
        definitions = Definitions(
            options.definitions, options.vhost, options.engine, text, options.rabbitmq
        )
        if options.reload_definitions:
            definitions.refresh()
        run_batch(frame, commit, plan, definitions, options)

    return process


def _wait(
    query: Any,
    state: _State,
    say: Callable[[str], None],
    poll: Callable[[], None] | None = None,
) -> None:
    """Until the query ends, calling ``poll`` between checks; turns its failure into an
    `XRouteError`."""
    from pyspark.errors import StreamingQueryException

    while True:
        if poll is not None:
            poll()
        try:
            if query.awaitTermination(0.5):
                return
        except StreamingQueryException as error:
            if isinstance(state.error, StopRequested):
                say(f"stopped{_why(state)} between batches; the next start goes on from here")
                return
            if isinstance(state.error, XRouteError):
                raise state.error from None
            raise PipelineFailed(f"the stream failed: {spark_error(error)}") from None
        except Exception as error:
            lost = server_lost(error)
            if lost is None:
                raise
            raise SparkConnectUnavailable(
                f"{lost}; once it runs again, the same command goes on from the checkpoint"
            ) from None
        if state.stop.is_set():
            with state.lock:
                idle = not state.running
            if idle:
                # Between batches: a batch that starts from now on sees the stop and is not
                # run (the lock is not held here: stop() waits for Spark's batch thread).
                query.stop()
                say(f"stopped{_why(state)} after the last committed batch")
                return


def _why(state: _State) -> str:
    return " (Ctrl-C)" if state.interrupted else ""


def _failure(error: Exception, source: str) -> XRouteError:
    """A Spark failure while reading or routing a batch, in a sentence; a file Spark cannot
    read at all is named (the stream stops rather than skip it)."""
    unreadable = unreadable_file(str(error), source)
    if unreadable is not None:
        path, sentence = unreadable
        return DatasetError(
            f"{sentence}. The stream stopped rather than skip it; "
            "its batch is not committed: replace the file by a readable one of the same name "
            "and start the stream again (Spark replays the batch with the same files)",
            path,
        )
    return PipelineFailed(f"the stream failed: {spark_error(error)}")


def _nothing(router: BatchRouter) -> dict[str, Any]:
    """The merged manifest of a batch with no partitions at all."""
    return {
        "input": 0,
        "delivered": 0,
        "queues": [0] * len(router.queues),
        "hits": [0] * len(router.bindings),
        "errors": {},
        "files": {name: [] for name in OUTPUTS},
        "rows": {name: 0 for name in OUTPUTS},
        "inputs": {},
    }


def _lag(source: str, markers: dict[int, dict[str, Any]]) -> int:
    """Files in the source that no committed batch has routed yet."""
    done = {_file_key(name) for marker in markers.values() for name in marker["inputs"]}
    return sum(1 for f in io.data_files(locate(source)) if _file_key(f.uri) not in done)


def _file_key(uri: str) -> str:
    """A file URI as Spark and pyarrow both spell it (file:/a and file:///a are one file)."""
    return urlparse(uri).netloc + io.local_path(uri)


def _checkpoint_id(checkpoint: str) -> str | None:
    """The id Spark gave the query of this checkpoint (None: a new checkpoint)."""
    metadata = locate(checkpoint).child("metadata")
    if not metadata.exists():
        return None
    return json.loads(metadata.read_bytes().decode().splitlines()[0])["id"]


def _claim(out: Location, checkpoint: str, typed: str) -> str:
    """Refuse an OUT written by another stream: batch ids restart at 0 with a new checkpoint,
    and batches already marked in OUT would be skipped, not routed (an OUT with batches but no
    record of their stream is refused before, by `check_stream_out`). The stream's id."""
    mine = _checkpoint_id(checkpoint)
    record = out.child(STREAM_FILE)
    if record.exists():
        theirs = json.loads(record.read_bytes())["checkpoint_id"]
        if theirs != mine:
            raise OtherStreamOutput(
                f"{typed} holds the output of another stream (checkpoint id {theirs}); "
                f"this checkpoint ({checkpoint}) is {'new' if mine is None else mine}: use a "
                "new OUT, or the stream's own checkpoint",
                out.uri,
            )
    return mine or "new"


def _record_stream(out: Location, checkpoint: str, timeout: float = 30.0) -> None:
    """Write OUT's record of the checkpoint, once Spark has made it."""
    record = out.child(STREAM_FILE)
    if record.exists():
        return
    deadline = time.monotonic() + timeout
    while (found := _checkpoint_id(checkpoint)) is None:
        if time.monotonic() > deadline:
            raise PipelineFailed(f"Spark made no checkpoint metadata in {checkpoint}")
        time.sleep(0.1)
    record.write_bytes(json.dumps({"checkpoint_id": found, "checkpoint": checkpoint}).encode())
