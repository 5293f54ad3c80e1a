"""The pipeline's main: read, check, route on the executors, prove the counts, move into place.

Outputs are written into a temporary folder beside DIR and moved into place only once the
invariant (input = delivered + unroutable + rejected, and every written file counted) holds:
a failed run leaves no DIR behind, and an existing DIR is refused unless ``overwrite``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xroute.batch import BatchRouter
from xroute.definitions import read_definitions
from xroute.engines import TopicMatcher
from xroute.errors import DatasetError, OutputExists, PipelineFailed, XRouteError
from xroute.pipeline import io
from xroute.pipeline.engine import PIPELINE_ENGINE
from xroute.pipeline.progress import spark_progress
from xroute.pipeline.pyarrow_reader import READERS, arrow_schema, plan_splits, survey
from xroute.pipeline.summary import TOP_KEYS, build_summary, write_summary
from xroute.pipeline.transform import Plan, route_batch
from xroute.pipeline.worker import (
    MANIFEST_SCHEMA,
    OUTPUTS,
    Task,
    partition_function,
    split_function,
)
from xroute.topology import Topology


@dataclass(frozen=True)
class PipelineOptions:
    """One run's parameters, as ``xroute pipeline`` takes them."""

    definitions: str
    messages: str
    out: str
    exchange: str | None = None
    format: str = "auto"
    overwrite: bool = False
    keep_columns: tuple[str, ...] = ()
    engine: str = PIPELINE_ENGINE
    vhost: str | None = None
    reader: str = "auto"  # how Parquet input is read: see `xroute.pipeline.pyarrow_reader`
    progress: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # added to summary.json as is


def run_pipeline(
    spark: Any, options: PipelineOptions, session_start_s: float = 0.0
) -> dict[str, Any]:
    """Run the job on ``spark`` and return its summary (also written to DIR/summary.json)."""
    started = time.perf_counter()
    out = Path(options.out).absolute()
    _refuse_existing(out, options.overwrite)
    TopicMatcher(engine=options.engine)  # an unknown engine fails here, not on the executors
    definitions = read_definitions(options.definitions)
    # Checks the definitions, and numbers the queues and bindings as the workers will; the
    # driver routes nothing, so the engine with the cheapest build will do.
    topology = Topology.from_definitions(definitions, vhost=options.vhost, engine="reference")
    router = BatchRouter(topology)
    dataset = _read(spark, options)
    io.check_columns(dataset, options.exchange, options.keep_columns)
    plan = Plan(dataset.columns, options.exchange, tuple(options.keep_columns), dataset.root)
    temp = out.parent / f".{out.name}.xroute-{uuid.uuid4().hex[:12]}"
    temp.mkdir(parents=True)
    phases = {"prepare": time.perf_counter() - started}
    try:
        counts, manifest = _route(spark, options, dataset, plan, definitions, temp, phases)
        mark = time.perf_counter()
        top_keys = _top_unroutable(temp, counts["unroutable"])
        _write_empty_outputs(_batch_schema(spark, dataset), plan, router, temp)
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
            master=spark.sparkContext.master,
            extra={
                "format": dataset.format,
                "reader": "spark" if dataset.frame is not None else "pyarrow",
                "partitions": manifest["partitions"],
                "phases_s": {name: round(seconds, 3) for name, seconds in phases.items()},
                # Summed over tasks: where the executors' Python time went.
                "task_seconds": {k: round(v, 3) for k, v in manifest["task_seconds"].items()},
                **options.extra,
            },
        )
        write_summary(summary, temp)
        _move_into_place(temp, out, options.overwrite)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return summary


def _refuse_existing(out: Path, overwrite: bool) -> None:
    if out.exists() and not overwrite:
        raise OutputExists(out)
    if out.exists() and not out.is_dir():
        raise OutputExists(out)  # a file is never replaced by a folder


def _token(definitions: dict[str, Any], options: PipelineOptions) -> str:
    text = json.dumps([definitions, options.vhost, options.engine], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _read(spark: Any, options: PipelineOptions) -> io.Dataset:
    """The dataset: surveyed for the tasks to read with pyarrow where that reader reads it as
    Spark would (see `xroute.pipeline.pyarrow_reader`), else read by Spark."""
    if options.reader not in READERS:
        raise DatasetError(
            f"unknown reader {options.reader!r}; use {', '.join(READERS)}", options.reader
        )
    fmt = io.detect_format(options.messages, options.format)
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
    return io.read_messages(spark, options.messages, fmt)


def _route(
    spark: Any,
    options: PipelineOptions,
    dataset: io.Dataset,
    plan: Plan,
    definitions: dict[str, Any],
    temp: Path,
    phases: dict[str, float],
) -> tuple[dict[str, int], dict[str, Any]]:
    """Run the routing job; the proven counts and the merged manifest."""
    context = spark.sparkContext
    broadcast = context.broadcast(definitions)
    task = Task(plan, _token(definitions, options), options.vhost, options.engine, str(temp))
    saved = _set_read_settings(spark, dataset.format) if dataset.frame is not None else {}
    group = f"xroute-{uuid.uuid4().hex[:8]}"
    try:
        with spark_progress(context, group, "routing", enabled=options.progress):
            mark = time.perf_counter()
            route = partition_function(task, broadcast)
            if dataset.frame is not None:
                routed = dataset.frame.mapInArrow(route, MANIFEST_SCHEMA)
                manifests = [json.loads(row[0]) for row in routed.collect()]
            else:
                schema = _batch_schema(spark, dataset)
                inputs = plan_splits(
                    dataset.footers, io.TASKS_PER_CORE * context.defaultParallelism
                )
                tasks = context.parallelize(inputs, len(inputs))
                manifests = [
                    json.loads(text)
                    for text in tasks.mapPartitions(split_function(route, schema)).collect()
                ]
            phases["route"] = time.perf_counter() - mark
            # Counted apart from the routing, for the invariant.
            mark = time.perf_counter()
            read = _count_input(dataset)
            phases["count"] = time.perf_counter() - mark
    except XRouteError:
        raise
    except Exception as error:
        raise PipelineFailed(f"the Spark job failed: {_spark_error(error)}") from None
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
        broadcast.unpersist()
    manifest = _merge(manifests)
    written = _keep_listed_files(temp, manifest["files"])
    counts = {
        "input": read,
        "delivered": manifest["delivered"],
        "deliveries": written["deliveries"],
        "unroutable": written["unroutable"],
        "rejected": written["rejected"],
    }
    _check_invariant(counts, manifest)
    return counts, manifest


def _count_input(dataset: io.Dataset) -> int:
    """The dataset's records, counted without the routing: from the Parquet footers when the
    files are local, else by Spark."""
    if dataset.frame is None:
        return sum(sum(footer.row_groups) for footer in dataset.footers)
    if dataset.format == "parquet":
        files = dataset.frame.inputFiles()
        if all(name.startswith("file:") for name in files):
            return sum(pq.ParquetFile(io.local_path(name)).metadata.num_rows for name in files)
    return dataset.frame.count()


def _set_read_settings(spark: Any, fmt: str) -> dict[str, str | None]:
    """Set how Spark splits the input for this job; the previous values, to restore."""
    if fmt == "parquet":
        # Several tasks per core even for a file of a few hundred MB: they balance better and
        # the progress bar moves (rows keep their numbers whatever the split).
        wanted = {
            "spark.sql.files.minPartitionNum": str(
                io.TASKS_PER_CORE * spark.sparkContext.defaultParallelism
            )
        }
    else:
        wanted = dict(io.WHOLE_FILES)
    saved = {}
    for key, value in wanted.items():
        saved[key] = spark.conf.get(key, None)
        spark.conf.set(key, value)
    return saved


def _merge(manifests: list[dict[str, Any]]) -> dict[str, Any]:
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
    }
    for m in manifests:
        merged["input"] += m["input"]
        merged["delivered"] += m["delivered"]
        merged["queues"] += np.asarray(m["queues"], dtype=np.int64)
        merged["hits"] += np.asarray(m["hits"], dtype=np.int64)
        merged["errors"].update(m["errors"])
        merged["rows"].update(m["rows"])
        merged["task_seconds"].update(m.get("seconds", {}))
        for name in OUTPUTS:
            merged["files"][name].extend(m["files"][name])
    merged["queues"] = merged["queues"].tolist()
    merged["hits"] = merged["hits"].tolist()
    return merged


def _keep_listed_files(temp: Path, files: dict[str, list[str]]) -> dict[str, int]:
    """Delete parts of failed task attempts (named by no manifest); rows of the rest, read
    from their Parquet footers."""
    rows = {}
    for name in OUTPUTS:
        folder = temp / name
        folder.mkdir(exist_ok=True)
        listed = set(files[name])
        missing = listed - {p.name for p in folder.iterdir()}
        if missing:
            raise PipelineFailed(
                f"{name}: parts named by the manifests are missing: {sorted(missing)[:3]}"
            )
        total = 0
        for path in folder.iterdir():
            if path.name in listed:
                total += pq.ParquetFile(path).metadata.num_rows
            else:
                path.unlink()
        rows[name] = total
    return rows


def _check_invariant(counts: dict[str, int], manifest: dict[str, Any]) -> None:
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


def _top_unroutable(temp: Path, unroutable: int) -> list[tuple[str, int]]:
    """The most frequent keys of the unroutable parts (ties by key), counted file by file."""
    if not unroutable:
        return []
    import pyarrow.compute as pc

    counts: Counter = Counter()
    for path in sorted((temp / "unroutable").iterdir()):
        keys = pq.read_table(path, columns=[io.KEY]).column(io.KEY)
        found = pc.value_counts(keys).flatten()
        counts.update(dict(zip(found[0].to_pylist(), found[1].to_pylist())))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_KEYS]


def _write_empty_outputs(schema: pa.Schema, plan: Plan, router: BatchRouter, temp: Path) -> None:
    """An output no task wrote to still gets one empty file, so that it reads with its schema."""
    empty_names = [name for name in OUTPUTS if not any((temp / name).iterdir())]
    if not empty_names:
        return
    routed = route_batch(router, pa.RecordBatch.from_pylist([], schema=schema), plan)
    for name in empty_names:
        batch = getattr(routed, name)
        table = pa.Table.from_batches([batch], schema=batch.schema)
        pq.write_table(table, temp / name / "part-empty.parquet", store_schema=False)


def _batch_schema(spark: Any, dataset: io.Dataset) -> pa.Schema:
    """The Arrow schema of the batches the routing function gets, whichever reader."""
    return arrow_schema(dataset, spark.conf.get("spark.sql.session.timeZone"))


def _move_into_place(temp: Path, out: Path, overwrite: bool) -> None:
    if out.exists():
        if not overwrite:
            raise OutputExists(out)
        old = out.parent / f".{out.name}.xroute-old-{uuid.uuid4().hex[:12]}"
        os.replace(out, old)
        os.replace(temp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(temp, out)


def _spark_error(error: Exception) -> str:
    text = str(error)
    # A Python error in a worker arrives wrapped in Java; its last lines name it.
    lines = [line for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "Exception" in line:
            return line.strip()[:500]
    return (lines[0] if lines else type(error).__name__)[:500]
