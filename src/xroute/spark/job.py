"""The pipeline's main: read, check, route on the executors, prove the counts, publish.

Every path may be local or a storage URI. Outputs are staged under OUT and published only once
the invariant (input = delivered + unroutable + rejected, and every written file counted)
holds, ``_SUCCESS`` last (`xroute.pipeline.commit`): a failed run leaves no output behind, and
OUT is written only if it is new, empty, or an earlier xroute output replaced with
``overwrite`` (`xroute.pipeline.output`).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xroute.core.batch import BatchRouter
from xroute.core.errors import DatasetError, PipelineFailed, XRouteError
from xroute.core.topology import Topology
from xroute.engines import TopicMatcher
from xroute.pipeline.commit import Commit
from xroute.pipeline.delta import DeltaCommit, check_table_format
from xroute.pipeline.engine import PIPELINE_ENGINE
from xroute.pipeline.summary import TOP_KEYS, build_summary, summary_files
from xroute.pipeline.transform import Plan, route_batch
from xroute.sources.definitions import read_definitions
from xroute.sources.storage import locate
from xroute.spark import broker_input, io
from xroute.spark.progress import spark_progress
from xroute.spark.pyarrow_reader import (
    READERS,
    arrow_schema,
    plan_splits,
    splits_frame,
    survey,
)
from xroute.spark.session import (
    default_parallelism,
    is_connect,
    master_of,
    server_lost,
    session_settings,
)
from xroute.spark.trace_input import (
    is_trace,
    message_format,
    read_trace_dataset,
    skipped_records,
)
from xroute.spark.worker import (
    MANIFEST_SCHEMA,
    OUTPUTS,
    ShippedTopology,
    Task,
    partition_function,
    split_function,
)
from xroute.tools.lint import FINGERPRINT, topology_fingerprint


@dataclass(frozen=True)
class PipelineOptions:
    """One run's parameters, as ``xroute pipeline`` takes them."""

    definitions: str | Mapping[str, Any]  # a path, a management API URL, or a parsed export
    messages: str
    out: str
    exchange: str | None = None
    format: str = "auto"  # or a RabbitMQ trace format: see `xroute.spark.trace_input`
    overwrite: bool = False
    keep_columns: tuple[str, ...] = ()
    engine: str = PIPELINE_ENGINE
    vhost: str | None = None
    reader: str = "auto"  # how Parquet input is read: see `xroute.spark.pyarrow_reader`
    progress: bool = False
    table_format: str = "parquet"  # or "delta": see `xroute.pipeline.delta`
    extra: dict[str, Any] = field(default_factory=dict)  # added to summary.json as is
    columns: io.Columns = io.Columns()  # the routing key, exchange and headers columns
    # From a broker's streams (messages a rabbitmq-stream:// URI): the offsets pinned by the
    # preflight (`xroute.spark.broker_input.BrokerRange`); None: pinned when the run starts.
    broker_range: Any = None


def run_pipeline(
    spark: Any, options: PipelineOptions, session_start_s: float = 0.0
) -> dict[str, Any]:
    """Run the job on ``spark`` and return its summary (also written to DIR/summary.json)."""
    started = time.perf_counter()
    check_table_format(options.table_format)
    if broker_input.is_broker(options.messages):
        options = broker_input.pinned_options(options)
    writer = DeltaCommit if options.table_format == "delta" else Commit
    commit = writer(options.out, OUTPUTS, options.overwrite, inputs=_inputs(options))
    TopicMatcher(engine=options.engine)  # an unknown engine fails here, not on the executors
    definitions = read_definitions(options.definitions, options.vhost)
    # Checks the definitions, and numbers the queues and bindings as the workers will; the
    # driver routes nothing, so the engine with the cheapest build will do.
    topology = Topology.from_definitions(definitions, vhost=options.vhost, engine="reference")
    router = BatchRouter(topology)
    dataset = _read(spark, options)
    io.check_columns(dataset, options.exchange, options.keep_columns, options.columns)
    plan = make_plan(dataset, options.exchange, options.keep_columns, options.columns)
    phases = {"prepare": time.perf_counter() - started}
    try:
        commit.begin()
        counts, manifest = _route(spark, options, dataset, plan, definitions, commit, phases)
        mark = time.perf_counter()
        top_keys = top_unroutable(commit, counts["unroutable"], plan.key_column)
        _write_empty_outputs(_batch_schema(spark, dataset), plan, router, commit)
        phases["unroutable_keys"] = time.perf_counter() - mark
        wall = time.perf_counter() - started
        summary = build_summary(
            counts=counts,
            wall_time_s=wall,
            session_start_s=session_start_s,
            queues=router.queues,
            queue_counts=manifest["queues"],
            bindings=router.bindings,
            hits=manifest["hits"],
            top_unroutable_keys=top_keys,
            rejected_by_error=manifest["errors"],
            engine=options.engine,
            master=master_of(spark),
            extra={
                "format": dataset.format,
                "table_format": options.table_format,
                "reader": _reader_name(dataset),
                # lint --summary reads a summary only against the topology it was made with
                FINGERPRINT: topology_fingerprint(topology),
                "partitions": manifest["partitions"],
                "phases_s": {name: round(seconds, 3) for name, seconds in phases.items()},
                # Summed over tasks: where the executors' Python time went.
                "task_seconds": {k: round(v, 3) for k, v in manifest["task_seconds"].items()},
                **_skipped(manifest),
                **options.extra,
            },
        )
        commit.publish(summary_files(summary), {"counts": counts})
    except BaseException:
        commit.abort()
        raise
    return summary


def _not_files(fmt: str) -> bool:
    return is_trace(fmt) or fmt == broker_input.FORMAT


def _reader_name(dataset: io.Dataset) -> str:
    if is_trace(dataset.format):
        return "pyarrow"  # the tasks read the trace files (`xroute.spark.trace_frame`)
    return "spark" if dataset.frame is not None else "pyarrow"


def _skipped(manifest: dict[str, Any]) -> dict[str, Any]:
    """A trace's records that are not messages (deliveries, events), counted apart."""
    skipped = manifest.get("trace_records_skipped")
    return {} if skipped is None else {"trace_records_skipped": skipped}


def _inputs(options: PipelineOptions) -> tuple[str | None, ...]:
    """The paths the run reads, which OUT may not overlap."""
    definitions = options.definitions if isinstance(options.definitions, str) else None
    messages = None if broker_input.is_broker(options.messages) else options.messages
    return (messages, definitions)


def _read(spark: Any, options: PipelineOptions) -> io.Dataset:
    """The dataset: surveyed for the tasks to read with pyarrow where that reader reads it as
    Spark would (see `xroute.spark.pyarrow_reader`), else read by Spark."""
    if options.reader not in READERS:
        raise DatasetError(
            f"unknown reader {options.reader!r}; use {', '.join(READERS)}", options.reader
        )
    if options.broker_range is not None:
        return broker_input.read_broker_range(spark, options.broker_range)
    fmt = message_format(options.messages, options.format)
    if is_trace(fmt):
        return read_trace_dataset(spark, options.messages, fmt)
    if options.reader != "spark":
        if fmt == "parquet":
            try:
                return survey(options.messages)
            except DatasetError:
                if options.reader == "pyarrow":
                    raise
        elif options.reader == "pyarrow":
            raise DatasetError(
                f"--reader pyarrow reads Parquet only; this dataset is {fmt}", options.reader
            )
    return io.read_messages(spark, options.messages, fmt, options.columns)


def make_plan(
    dataset: io.Dataset,
    exchange: str | None,
    keep_columns: tuple[str, ...],
    names: io.Columns = io.Columns(),
) -> Plan:
    """What each task needs to route the dataset's records."""
    return Plan(
        dataset.columns,
        exchange,
        tuple(keep_columns),
        dataset.root,
        key_column=names.key,
        exchange_column=names.exchange,
        headers_column=names.headers,
    )


def _route(
    spark: Any,
    options: PipelineOptions,
    dataset: io.Dataset,
    plan: Plan,
    definitions: dict[str, Any],
    commit: Commit,
    phases: dict[str, float],
) -> tuple[dict[str, int], dict[str, Any]]:
    """Run the routing job; the proven counts and the merged manifest.

    DataFrame operations only (``mapInArrow``, ``collect``), so that a Spark Connect session
    runs it as a classic one does; the progress bar needs a classic session's status tracker.
    """
    topology = ShippedTopology.of(definitions, options.vhost, options.engine)
    task = Task(plan, commit.staging.uri)
    parallelism = default_parallelism(spark)
    settings = (
        _read_settings(dataset.format, parallelism)
        if dataset.frame is not None and not _not_files(dataset.format)
        else {}
    )
    group = f"xroute-{uuid.uuid4().hex[:8]}"
    progress = (
        nullcontext()
        if is_connect(spark)
        else spark_progress(spark.sparkContext, group, "routing", enabled=options.progress)
    )
    try:
        with session_settings(spark, settings), progress:
            mark = time.perf_counter()
            route = partition_function(task, topology)
            if dataset.frame is not None:
                routed = dataset.frame.mapInArrow(route, MANIFEST_SCHEMA)
            else:
                inputs = plan_splits(dataset.footers, io.TASKS_PER_CORE * parallelism)
                reading = split_function(route, inputs, _batch_schema(spark, dataset))
                routed = splits_frame(spark, len(inputs)).mapInArrow(reading, MANIFEST_SCHEMA)
            manifests = [json.loads(row[0]) for row in routed.collect()]
            phases["route"] = time.perf_counter() - mark
            # Counted apart from the routing, for the invariant.
            mark = time.perf_counter()
            skipped = None
            if is_trace(dataset.format):
                read, skipped = skipped_records(spark, options.messages, dataset.format)
            else:
                read = _count_input(dataset, options.broker_range)
            phases["count"] = time.perf_counter() - mark
    except XRouteError:
        raise
    except Exception as error:
        raise spark_failure(error, options.messages) from None
    manifest = merge_manifests(manifests)
    if skipped is not None:
        manifest["trace_records_skipped"] = skipped
    written = commit.keep_listed(manifest["files"])
    counts = {
        "input": read,
        "delivered": manifest["delivered"],
        "deliveries": written["deliveries"],
        "unroutable": written["unroutable"],
        "rejected": written["rejected"],
    }
    check_invariant(counts, manifest)
    return counts, manifest


def _count_input(dataset: io.Dataset, broker_range: Any = None) -> int:
    """The dataset's records, counted without the routing: from the Parquet footers when the
    files are local, from the pinned offsets of a broker's streams, else by Spark."""
    if dataset.frame is None:
        return sum(sum(footer.row_groups) for footer in dataset.footers)
    if broker_range is not None:
        # Stream offsets are consecutive and a read with a gap fails (`StreamTruncated`): the
        # tasks must have seen this many (and the broker is not read a second time to count).
        return broker_range.messages
    if dataset.format == "parquet":
        files = dataset.frame.inputFiles()
        if all(name.startswith("file:") for name in files):
            return sum(pq.ParquetFile(io.local_path(name)).metadata.num_rows for name in files)
    return dataset.frame.count()


def _read_settings(fmt: str, parallelism: int) -> dict[str, str | None]:
    """How Spark splits the input for this job."""
    if fmt == "parquet":
        # Several tasks per core even for a file of a few hundred MB: they balance better and
        # the progress bar moves (rows keep their numbers whatever the split).
        return {"spark.sql.files.minPartitionNum": str(io.TASKS_PER_CORE * parallelism)}
    return dict(io.WHOLE_FILES)


def merge_manifests(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    """The manifests of a job's tasks, summed (files listed, per-file input counts merged)."""
    if not manifests:
        raise PipelineFailed("the Spark job returned no manifest at all")
    merged: dict[str, Any] = {
        "input": 0,
        "delivered": 0,
        "queues": np.zeros(len(manifests[0]["queues"]), dtype=np.int64),
        "hits": np.zeros(len(manifests[0]["hits"]), dtype=np.int64),
        "errors": Counter(),
        "files": {name: [] for name in OUTPUTS},
        "rows": Counter(),
        "partitions": len(manifests),
        "task_seconds": Counter(),
        "inputs": Counter(),
    }
    for m in manifests:
        merged["input"] += m["input"]
        merged["delivered"] += m["delivered"]
        merged["queues"] += np.asarray(m["queues"], dtype=np.int64)
        merged["hits"] += np.asarray(m["hits"], dtype=np.int64)
        merged["errors"].update(m["errors"])
        merged["rows"].update(m["rows"])
        merged["task_seconds"].update(m.get("seconds", {}))
        merged["inputs"].update(m.get("inputs", {}))
        for name, (low, high) in m.get("spans", {}).items():
            known = merged.setdefault("spans", {}).get(name)
            merged["spans"][name] = [low, high] if known is None else [
                min(known[0], low), max(known[1], high)
            ]
        for name in OUTPUTS:
            merged["files"][name].extend(m["files"][name])
    merged["queues"] = merged["queues"].tolist()
    merged["hits"] = merged["hits"].tolist()
    return merged


def check_invariant(counts: dict[str, int], manifest: dict[str, Any]) -> None:
    """Raise `PipelineFailed` unless the counts prove that no message was lost or doubled."""
    problems = []
    if counts["input"] != counts["delivered"] + counts["unroutable"] + counts["rejected"]:
        problems.append("input != delivered + unroutable + rejected")
    if manifest["input"] != counts["input"]:
        problems.append(
            f"the routing saw {manifest['input']} records, Spark counted {counts['input']}"
        )
    for name in OUTPUTS:
        if manifest["rows"][name] != counts[name]:
            problems.append(f"{name}: {manifest['rows'][name]} rows written, {counts[name]} found")
    if (
        counts["deliveries"] < counts["delivered"]
        or sum(manifest["queues"]) != counts["deliveries"]
    ):
        problems.append("deliveries do not add up to the per-queue counts")
    if problems:
        raise PipelineFailed(
            f"the run cannot prove that no message was lost ({'; '.join(problems)}); counts: "
            f"{counts}; nothing was written",
            counts,
        )


def top_unroutable(commit: Commit, unroutable: int, key: str) -> list[tuple[str, int]]:
    """The most frequent keys of the unroutable parts (ties by key), counted file by file."""
    if not unroutable:
        return []
    import pyarrow.compute as pc

    counts: Counter = Counter()
    for part in commit.staged("unroutable"):
        with part.filesystem.open_input_file(part.path) as source:
            keys = pq.read_table(source, columns=[key]).column(key)
        found = pc.value_counts(keys).flatten()
        counts.update(dict(zip(found[0].to_pylist(), found[1].to_pylist())))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_KEYS]


def _write_empty_outputs(
    schema: pa.Schema, plan: Plan, router: BatchRouter, commit: Commit
) -> None:
    """An output no task wrote to still gets one empty file, so that it reads with its schema."""
    empty_names = [name for name in OUTPUTS if not commit.staged(name)]
    if not empty_names:
        return
    routed = route_batch(router, pa.RecordBatch.from_pylist([], schema=schema), plan)
    for name in empty_names:
        commit.stage_empty(name, getattr(routed, name).schema)


def _batch_schema(spark: Any, dataset: io.Dataset) -> pa.Schema:
    """The Arrow schema of the batches the routing function gets, whichever reader."""
    return arrow_schema(dataset, spark.conf.get("spark.sql.session.timeZone"))


def spark_failure(error: Exception, source: str) -> XRouteError:
    """A failed Spark job as one error: `DatasetError` naming the input file that could not
    be read and why (by Spark's reader or a task's), `SparkConnectUnavailable` when the Connect
    server went away, else `PipelineFailed` in a sentence."""
    lost = server_lost(error)
    if lost is not None:
        return lost
    text = str(error)
    unreadable = None
    if not (_worker_died(text) or _executor_lost(text)):  # those may name the file they read
        unreadable = unreadable_file(text, source)
    if unreadable is not None:
        path, sentence = unreadable
        return DatasetError(sentence, path)
    return PipelineFailed(f"the Spark job failed: {spark_error(error)}")


def unreadable_file(text: str, source: str) -> tuple[str, str] | None:
    """(the file, "cannot read FILE: why") when a Spark error's text says that a file under
    ``source`` could not be read, by Spark's reader or by a task (whose `DatasetError` names
    it already)."""
    raised = re.search(r"xroute\.core\.errors\.DatasetError: (cannot read (\S+?):? .*)", text)
    if raised:
        return raised.group(2), raised.group(1).strip()
    location = locate(source)
    root = io.local_path(location.uri) if location.local else location.uri
    # Spark names the file as file:/path or file:///path, often followed by a full stop.
    found = re.search(re.escape(root.rstrip("/")) + r"(/[^\s'\",;]*[^\s'\",;.])?", text)
    if not found:
        return None
    path = found.group(0)
    cause = _root_cause(text).replace(f"file://{path}", "it").replace(f"file:{path}", "it")
    return io.shown(path), f"cannot read {io.shown(path)}: {cause}"


def _root_cause(text: str) -> str:
    """The innermost cause of a Java stack trace, without its exception class."""
    causes = [line for line in text.splitlines() if line.startswith("Caused by:")]
    line = causes[-1] if causes else text.strip().splitlines()[0]
    return re.sub(r"^(Caused by:\s*)?([\w.$]+(Exception|Error):\s*)?", "", line).strip()[:300]


def _worker_died(text: str) -> bool:
    return "Python worker exited unexpectedly" in text or "crashed" in text.split("Caused by")[0]


def _executor_lost(text: str) -> bool:
    return "ExecutorLostFailure" in text or "Executor heartbeat timed out" in text


def spark_error(error: Exception) -> str:
    """What went wrong, in a sentence: Spark's own text is a Java stack trace (the stream
    reports its failures with it too)."""
    text = str(error)
    task = re.search(r"Task (\d+) in stage [\d.]+ failed (\d+) times?", text)
    where = f"partition {task.group(1)}" if task else "a partition"
    tries = f" (tried {task.group(2)} times)" if task else ""
    if _worker_died(text):
        return (
            f"a Python worker died while routing {where}{tries}: killed, or out of memory "
            "(see the executor's log; give executors more memory, or more partitions)"
        )
    if _executor_lost(text):
        return f"an executor was lost while routing {where}{tries}: its machine or JVM went away"
    # A Python error in a worker arrives wrapped in Java; its last lines name it.
    lines = [line for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "Exception" in line:
            return f"{where}{tries}: {line.strip()[:500]}"
    return (lines[0] if lines else type(error).__name__)[:500]
