"""`xroute.spark.read_messages` and `xroute.spark.write`: the pipeline's reading and writing
as DataFrame steps around `xroute.spark.route` (`xroute.spark.steps`).

``write(route(read_messages(spark, path), defs, exchange), out)`` runs, in each task, the
job's own code: pyarrow reads the task's splits, `name_records` names them, `route_columns`
routes them, `write_partition` writes the three outputs and returns a manifest; the driver
proves the counts and publishes with the job's commit (`xroute.pipeline.commit`,
`xroute.pipeline.delta`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from xroute.core.errors import DatasetError, XRouteError
from xroute.pipeline.commit import Commit
from xroute.pipeline.delta import DeltaCommit, check_table_format
from xroute.pipeline.summary import build_summary, summary_files
from xroute.pipeline.transform import Plan, RouteColumns, name_records, outputs_of
from xroute.spark import io
from xroute.spark.pyarrow_reader import arrow_schema, plan_splits, read_split, splits_frame, survey
from xroute.spark.session import ARROW_BATCH_ROWS, default_parallelism, master_of
from xroute.spark.steps import RouteStep, Staged, Tally, run_steps, staged_of
from xroute.spark.worker import MANIFEST_SCHEMA, OUTPUTS, Task, write_partition


@dataclass(frozen=True)
class ReadSplits:
    """Step: the task reads its splits of the plan with pyarrow (its input rows are their
    numbers in ``spark.range``, `xroute.spark.pyarrow_reader.splits_frame`)."""

    plan: list[tuple[Any, ...]]
    schema: pa.Schema

    def __call__(self, ids: Iterator[pa.RecordBatch], tally: Tally) -> Iterator[pa.RecordBatch]:
        tasks = [self.plan[i] for batch in ids for i in batch.column(0).to_pylist()]
        for task in tasks:
            for split in task:
                yield from read_split(split, self.schema, ARROW_BATCH_ROWS)


@dataclass(frozen=True)
class NameStep:
    """Step: each record's ``message_id`` (``file:row`` when it has none), the two naming
    columns dropped."""

    plan: Plan

    def __call__(self, batches: Iterator[pa.RecordBatch], tally: Tally) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            named = name_records(batch, self.plan, tally.rows_seen)
            keep = [n for n in named.schema.names if n not in (io.FILE_COLUMN, io.ROW_COLUMN)]
            yield named.select(keep)


def read_messages(spark: Any, path: str) -> Any:
    """See `xroute.spark.read_messages`."""
    from pyspark.sql.types import StringType, StructField, StructType

    if io.detect_format(path) != "parquet":
        raise DatasetError(
            f"read_messages reads Parquet; {path!r} is not: read it with spark.read, then route()",
            path,
        )
    try:
        dataset = survey(path)
    except DatasetError:  # not as Spark would read it with pyarrow: Spark reads it
        dataset = io.read_messages(spark, path, "parquet")
    plan = Plan(dataset.columns, root=dataset.root)
    fields = [
        StructField(io.MESSAGE_ID, StringType(), True) if f.name == io.MESSAGE_ID else f
        for f in dataset.schema.fields
        if f.name not in (io.FILE_COLUMN, io.ROW_COLUMN)
    ]
    if io.MESSAGE_ID not in dataset.columns:
        fields.append(StructField(io.MESSAGE_ID, StringType(), False))
    schema = StructType(fields)
    if dataset.frame is not None:
        return Staged(dataset.frame, source=path).then(NameStep(plan), schema)
    splits = plan_splits(dataset.footers, io.TASKS_PER_CORE * default_parallelism(spark))
    reading = ReadSplits(splits, arrow_schema(dataset, spark.conf.get("spark.sql.session.timeZone")))
    rows = sum(sum(footer.row_groups) for footer in dataset.footers)
    staged = Staged(splits_frame(spark, len(splits)), (reading,), rows, source=path)
    return staged.then(NameStep(plan), schema)


@dataclass(frozen=True)
class WriteStep:
    """The last step: name what has no id, write the outputs, yield the manifest."""

    task: Task
    route: RouteStep

    def __call__(self, batches: Iterator[pa.RecordBatch], tally: Tally) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        prefix = f"part-{context.partitionId() if context is not None else 0:05d}"
        router = self.route.topology.router()
        columns = self.route.columns
        named = (name_records(b, self.task.plan, tally.rows_seen, prefix) for b in batches)
        hits = tally.hits.get(columns.queues)
        yield write_partition(self.task, router, named, hits, tally.clock, columns)


def write_routed(
    routed: Any,
    out: str,
    *,
    table_format: str,
    overwrite: bool,
    keep_columns: tuple[str, ...],
    queues_column: str,
    error_column: str,
) -> dict[str, Any]:
    """See `xroute.spark.write`."""
    from xroute.spark.job import check_invariant, merge_manifests, spark_failure, top_unroutable

    started = time.perf_counter()
    check_table_format(table_format)
    staged = staged_of(routed)
    routing = [s for s in staged.route_steps() if s.columns.queues == queues_column]
    if not routing or routing[-1].columns.error != error_column:
        raise DatasetError(
            f"write() takes a DataFrame that xroute.spark.route made (queues column "
            f"{queues_column!r}, error column {error_column!r}), with no other operation between",
            queues_column,
        )
    route = routing[-1]
    columns = [c for c in routed.columns if c not in (queues_column, error_column)]
    for name in keep_columns:
        if name not in columns:
            raise DatasetError(f"keep_columns names {name!r}, not a column of the frame", name)
    plan = _plan(route.columns, tuple(columns), keep_columns)
    writer = DeltaCommit if table_format == "delta" else Commit
    commit = writer(out, OUTPUTS, overwrite, inputs=(staged.source,))
    router = route.topology.router()
    try:
        commit.begin()
        task = Task(plan, commit.staging.uri)
        steps = (*staged.steps, WriteStep(task, route))
        function = _task_function(steps)
        try:
            manifests = [
                json.loads(row[0])
                for row in staged.base.mapInArrow(function, MANIFEST_SCHEMA).collect()
            ]
            read = staged.rows if staged.rows is not None else staged.base.count()
        except XRouteError:
            raise
        except Exception as error:
            raise spark_failure(error, out) from None
        manifest = merge_manifests(manifests)
        written = commit.keep_listed(manifest["files"])
        counts = {
            "input": read,
            "delivered": manifest["delivered"],
            **{name: written[name] for name in OUTPUTS},
        }
        check_invariant(counts, manifest)
        _stage_empty(routed, plan, router, route.columns, commit)
        summary = build_summary(
            counts=counts,
            wall_time_s=time.perf_counter() - started,
            session_start_s=0.0,
            queues=router.queues,
            queue_counts=manifest["queues"],
            bindings=router.bindings,
            hits=manifest["hits"],
            top_unroutable_keys=top_unroutable(commit, counts["unroutable"], plan.key_column),
            rejected_by_error=manifest["errors"],
            engine=route.topology.engine,
            master=master_of(routed.sparkSession),
            extra={"table_format": table_format, "writer": "xroute.spark.write"},
        )
        commit.publish(summary_files(summary), {"counts": counts})
    except BaseException:
        commit.abort()
        raise
    return summary


def _plan(route: RouteColumns, columns: tuple[str, ...], keep: tuple[str, ...]) -> Plan:
    return Plan(
        columns,
        route.default_exchange,
        keep,
        key_column=route.key,
        exchange_column=route.exchange or io.EXCHANGE,
        headers_column=route.headers or io.HEADERS,
    )


def _task_function(steps: tuple[Any, ...]) -> Any:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from run_steps(steps, batches, Tally(to_spark=False))

    return run


def _stage_empty(
    routed: Any, plan: Plan, router: Any, columns: RouteColumns, commit: Commit
) -> None:
    """An output no task wrote to still gets one empty file, so that it reads with its schema."""
    empty_names = [name for name in OUTPUTS if not commit.staged(name)]
    if not empty_names:
        return
    from pyspark.sql.pandas.types import to_arrow_schema

    timezone = routed.sparkSession.conf.get("spark.sql.session.timeZone")
    schema = to_arrow_schema(routed.schema, timezone=timezone)
    empty = name_records(pa.RecordBatch.from_pylist([], schema=schema), plan, {}, "part")
    outputs = outputs_of(empty, plan, router, np.zeros(len(router.bindings), np.int64), columns)
    for name in empty_names:
        commit.stage_empty(name, getattr(outputs, name).schema)
