"""The executor side of the job: the function each task runs on its partition (Spark's
`mapInArrow` batches, or `Split` s that the task reads itself).

It routes every Arrow batch of its partition (`xroute.pipeline.transform`), writes the three
outputs as Parquet parts into the job's temporary folder, and returns one row: a manifest of
the files it wrote and its counts. The driver keeps only the files named by the manifests it
collects, which come from successful task attempts only, so a retried task leaves nothing
counted twice.

The topology travels inside the task function itself (`ShippedTopology`, pickled with it), not
through ``SparkContext.broadcast``: a Spark Connect session has no SparkContext, and one path
serves both. PySpark broadcasts a pickled function larger than 1 MB by itself on classic Spark.
Each Python worker process (Spark reuses them) builds the router once and keeps it in a
module-level cache keyed by the topology's fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from xroute.core.batch import BatchRouter
from xroute.core.topology import Topology
from xroute.pipeline.transform import (
    Plan,
    RouteColumns,
    Routed,
    name_records,
    outputs_of,
    route_columns,
)
from xroute.sources.storage import Location, locate
from xroute.spark.io import FILE_COLUMN, ROW_COLUMN
from xroute.spark.pyarrow_reader import Split, read_split
from xroute.spark.session import ARROW_BATCH_ROWS

OUTPUTS = ("deliveries", "unroutable", "rejected")
MANIFEST_SCHEMA = "manifest string"
# Small outputs are gathered up to this many rows before a Parquet row group is written.
ROW_GROUP_ROWS = 65536
DICTIONARY_PAGE_BYTES = 64 << 20

# Routers built in this worker process, by topology fingerprint: a job routes with one, a
# diff or a stream whose definitions changed with two.
MAX_ROUTERS = 4
_ROUTERS: dict[str, BatchRouter] = {}


@dataclass(frozen=True)
class ShippedTopology:
    """A topology as the tasks get it: the definitions pickled and compressed (one bytes
    object, cheap to unpickle with the function: opened only by a worker that has not built
    this router yet), the virtual host, the engine, and their fingerprint, the key of the
    workers' router cache."""

    token: str
    definitions: bytes
    vhost: str | None
    engine: str

    @classmethod
    def of(cls, definitions: Any, vhost: str | None, engine: str) -> ShippedTopology:
        """Pack a parsed definitions export for the tasks."""
        text = json.dumps([definitions, vhost, engine], sort_keys=True, default=str)
        token = hashlib.sha256(text.encode()).hexdigest()[:24]
        return cls(token, zlib.compress(pickle.dumps(definitions)), vhost, engine)

    def router(self) -> BatchRouter:
        """The router of this topology in this worker process, built on first use."""
        router = _ROUTERS.get(self.token)
        if router is None:
            definitions = pickle.loads(zlib.decompress(self.definitions))
            topology = Topology.from_definitions(definitions, vhost=self.vhost, engine=self.engine)
            router = BatchRouter(topology)
            if len(_ROUTERS) >= MAX_ROUTERS:  # a worker serves few topologies at a time
                _ROUTERS.pop(next(iter(_ROUTERS)))
            _ROUTERS[self.token] = router
        return router


@dataclass(frozen=True)
class Task:
    """What each partition needs besides the topology: small and picklable."""

    plan: Plan
    folder: str  # the URI of the job's staging folder (`xroute.pipeline.commit`)
    count_files: bool = False  # count records by input file in the manifest (streams)
    # the first and last row number of each input (a broker stream's offsets, proven whole)
    spans: bool = False


def partition_function(
    task: Task, topology: ShippedTopology
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function for ``DataFrame.mapInArrow``: routes and writes the partition, and yields
    its manifest (`MANIFEST_SCHEMA`)."""

    def route_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        started = time.perf_counter()
        router = topology.router()
        yield run_partition(task, router, batches, setup_s=time.perf_counter() - started)

    return route_partition


def split_function(
    route: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    plan: list[tuple[Split, ...]],
    schema: pa.Schema,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function for ``mapInArrow`` over ``spark.range(len(plan))`` in ``len(plan)``
    partitions (`xroute.spark.pyarrow_reader.splits_frame`): partition ``i`` reads the `Split` s of ``plan[i]`` with
    pyarrow as ``schema`` and hands the batches to ``route`` (a `partition_function`)."""

    def route_splits(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tasks = [plan[i] for batch in ids for i in batch.column(0).to_pylist()]
        splits = (split for task in tasks for split in task)
        batches = (b for split in splits for b in read_split(split, schema, ARROW_BATCH_ROWS))
        yield from route(batches)

    return route_splits


def run_partition(
    task: Task, router: BatchRouter, batches: Iterator[pa.RecordBatch], setup_s: float = 0.0
) -> pa.RecordBatch:
    """Name, route and write one partition; its manifest as a one-row batch.

    The job is read, then `xroute.spark.route`, then `xroute.spark.write`, run in one Python
    task: the records are named (`name_records`), routed by `route_columns` (the very batch
    function `route` maps with ``mapInArrow``), and written by `write_partition`.
    """
    plan = task.plan
    clock = {"setup": setup_s, "read": 0.0, "route": 0.0, "write": 0.0}
    hits = np.zeros(len(router.bindings), dtype=np.int64)
    rows_seen: dict[str, int] = {}
    read = timed(batches, clock, "read")
    named = (name_records(batch, plan, rows_seen) for batch in read)
    routed = timed(
        (route_columns(router, b, plan.route_columns, hits, dictionary=True) for b in named),
        clock,
        "route",
    )
    manifest = write_partition(task, router, routed, hits, clock)
    clock["route"] -= clock["read"]  # timed around the reading it pulls
    return manifest


def write_partition(
    task: Task,
    router: BatchRouter,
    routed: Iterator[pa.RecordBatch],
    hits: np.ndarray | None,
    clock: dict[str, float],
    columns: RouteColumns | None = None,
) -> pa.RecordBatch:
    """Write routed batches (`route_columns`' shape) as the three outputs' Parquet parts
    under the task's folder; the manifest of the files and counts as a one-row batch.
    ``hits``: the messages per binding summed while routing (None: not known, zeros)."""
    part = part_name()
    staging = locate(task.folder)
    parts = {name: PartWriter(staging.child(name), part) for name in OUTPUTS}
    totals = Totals(len(router.queues), len(router.bindings))
    cpu = time.process_time()
    try:
        for batch in routed:
            mark = time.perf_counter()
            outputs = outputs_of(batch, task.plan, router, None, columns)
            parts["deliveries"].write(outputs.deliveries)
            parts["unroutable"].write(outputs.unroutable)
            parts["rejected"].write(outputs.rejected)
            totals.add(outputs)
            if task.count_files:
                totals.count_files(batch)
            if task.spans:
                totals.count_spans(batch)
            clock["write"] += time.perf_counter() - mark
    finally:
        mark = time.perf_counter()
        for writer in parts.values():
            writer.close()
        clock["write"] += time.perf_counter() - mark
    if hits is not None:
        totals.hits += hits
    clock["cpu"] = time.process_time() - cpu  # this Python process's CPU, to compare with wall
    manifest = totals.as_dict()
    manifest["seconds"] = clock
    manifest["files"] = {name: writer.files for name, writer in parts.items()}
    manifest["rows"] = {name: writer.rows for name, writer in parts.items()}
    return pa.RecordBatch.from_pydict({"manifest": [json.dumps(manifest)]})


def timed(
    items: Iterator[pa.RecordBatch], clock: dict[str, float], name: str
) -> Iterator[pa.RecordBatch]:
    """``items``, the time spent making each added to ``clock[name]`` (with the time of the
    steps it pulls from)."""
    items = iter(items)
    while True:
        mark = time.perf_counter()
        try:
            item = next(items)
        except StopIteration:
            clock[name] += time.perf_counter() - mark
            return
        clock[name] += time.perf_counter() - mark
        yield item


def part_name() -> str:
    """A part's file name, unique to this task attempt (see `xroute.pipeline.commit`)."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
    except ImportError:  # run_partition used without Spark (the benchmark's single process)
        context = None
    number = context.partitionId() if context is not None else 0
    attempt = context.attemptNumber() if context is not None else 0
    return f"part-{number:05d}-{attempt}-{uuid.uuid4().hex[:12]}"


class PartWriter:
    """One output's Parquet file for one task, opened on its first row, on any storage."""

    def __init__(self, folder: Location, name: str) -> None:
        self.folder = folder
        self.name = f"{name}.parquet"
        self.files: list[str] = []
        self.rows = 0
        self._stream: Any = None
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        """Add rows; small batches are gathered so that row groups are not tiny."""
        if not batch.num_rows:
            return
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        if self._pending_rows >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending)
        if self._writer is None:
            filesystem = self.folder.filesystem
            if self.folder.local:
                # Not recursive: a late task never re-creates the staging of a finished job.
                filesystem.create_dir(self.folder.path, recursive=False)
            # On an object store the part becomes visible only when the stream is closed,
            # whole: a killed task leaves nothing, or an upload that never completes.
            self._stream = filesystem.open_output_stream(self.folder.child(self.name).path)
            self._writer = pq.ParquetWriter(
                self._stream,
                table.schema,
                # Read back as plain text columns, whatever Arrow type they were written from.
                store_schema=False,
                # Room for a batch's worth of message ids in one dictionary page.
                dictionary_pagesize_limit=DICTIONARY_PAGE_BYTES,
            )
            self.files.append(self.name)
        self._writer.write_table(table)
        self.rows += table.num_rows
        self._pending, self._pending_rows = [], 0

    def close(self) -> None:
        """Write what is left and close the file."""
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._stream.close()
            self._writer = self._stream = None


class Totals:
    """The counts of one partition, summed over its batches."""

    def __init__(self, queues: int, bindings: int) -> None:
        self.input = 0
        self.delivered = 0
        self.queues = np.zeros(queues, dtype=np.int64)
        self.hits = np.zeros(bindings, dtype=np.int64)
        self.errors: Counter = Counter()
        self.inputs: Counter = Counter()  # records read, by input file URI
        self.spans: dict[str, list[int]] = {}  # input -> [first, last] row number seen

    def add(self, routed: Routed) -> None:
        """Count one routed batch."""
        self.input += routed.input
        self.delivered += routed.delivered
        self.queues += routed.queue_counts
        self.hits += routed.hits
        self.errors.update(routed.errors)

    def count_files(self, batch: pa.RecordBatch) -> None:
        """Count the records of a batch by the file they came from (a stream's lag, latency
        and the files each micro-batch consumed come from these)."""
        if FILE_COLUMN in batch.schema.names and batch.num_rows:
            found = pc.value_counts(batch.column(FILE_COLUMN)).flatten()
            self.inputs.update(dict(zip(found[0].to_pylist(), found[1].to_pylist())))

    def count_spans(self, batch: pa.RecordBatch) -> None:
        """The first and last row number (a stream's offset) of each input in the batch."""
        if FILE_COLUMN not in batch.schema.names or not batch.num_rows:
            return
        found = pa.table(
            {"input": batch.column(FILE_COLUMN), "row": batch.column(ROW_COLUMN)}
        ).group_by("input").aggregate([("row", "min"), ("row", "max")])
        for name, low, high in zip(*(found.column(c).to_pylist() for c in ("input", "row_min", "row_max"))):
            known = self.spans.get(name)
            self.spans[name] = [low, high] if known is None else [min(known[0], low), max(known[1], high)]

    def as_dict(self) -> dict[str, Any]:
        """The counts as JSON-ready values."""
        return {
            **({"spans": self.spans} if self.spans else {}),
            "input": self.input,
            "inputs": dict(self.inputs),
            "delivered": self.delivered,
            "queues": self.queues.tolist(),
            "hits": self.hits.tolist(),
            "errors": dict(self.errors),
        }
