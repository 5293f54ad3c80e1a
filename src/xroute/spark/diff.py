"""``diff``, the traffic part: route every message of a log through an old and a new topology,
on Spark, and say which messages would go somewhere else.

Each record is routed twice in one pass, with `xroute.spark.route` applied twice in a row
(``queues_before``/``error_before``, then ``queues_after``/``error_after``): the two results
sit on the same row, so no join by message_id is needed (and none can go wrong on duplicate
or missing ids). Everything is aggregated in Spark; only the small results (counts, per queue,
top keys, a few samples) come to the driver.

Outputs, in OUT (a local path or a storage URI): ``changes/`` (Parquet: message_id,
queues_before, queues_after, one row per message whose set of queues changed), ``diff.json``
and ``diff.png`` (gained and lost per queue), then ``_SUCCESS``, published by the pipeline's
commit protocol (`xroute.pipeline.commit`): the tasks write the parts, so the driver and the
executors need share no disk.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from xroute.core.errors import DatasetError, PipelineFailed
from xroute.core.topology import Topology
from xroute.pipeline.commit import Commit
from xroute.pipeline.engine import PIPELINE_ENGINE
from xroute.pipeline.figures import per_queue_bars
from xroute.pipeline.transform import relative_path
from xroute.sources.definitions import read_definitions
from xroute.sources.storage import locate
from xroute.spark import broker_input, io
from xroute.spark.pyarrow_reader import read_frame, survey
from xroute.spark.session import ARROW_BATCH_ROWS, session_settings
from xroute.spark.trace_input import (
    is_trace,
    message_format,
    read_trace_dataset,
    skipped_records,
)
from xroute.spark.worker import PartWriter, part_name
from xroute.tools.diff import why_changed

CHANGES = "changes"  # the output folder of changed messages
BEFORE, AFTER = "queues_before", "queues_after"
ERROR_BEFORE, ERROR_AFTER = "error_before", "error_after"
TOP_KEYS = 10
SAMPLES = 5  # changed messages explained binding by binding


@dataclass
class TrafficDiff:
    """What a log's messages would do differently; ``per_queue`` rows are (queue, gained,
    lost), largest change first; ``top_keys`` rows (exchange, routing_key, messages)."""

    messages: int
    changed: int
    gained_messages: int  # messages that reach some queue they did not
    lost_messages: int  # messages that no longer reach some queue they did
    became_unroutable: int
    became_routable: int
    refused_before: int
    refused_after: int
    per_queue: list[tuple[str, int, int]] = field(default_factory=list)
    top_keys: list[tuple[str, str, int]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    # A RabbitMQ trace's records that are not messages (deliveries, events), not routed.
    trace_records_skipped: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        """As JSON-ready data."""
        skipped = self.trace_records_skipped
        return ({} if skipped is None else {"trace_records_skipped": skipped}) | {
            "counts": {
                "messages": self.messages,
                "changed": self.changed,
                "unchanged": self.messages - self.changed,
                "gained_a_queue": self.gained_messages,
                "lost_a_queue": self.lost_messages,
                "became_unroutable": self.became_unroutable,
                "became_routable": self.became_routable,
                "refused_before": self.refused_before,
                "refused_after": self.refused_after,
            },
            "per_queue": [
                {"queue": q, "gained": g, "lost": n_lost} for q, g, n_lost in self.per_queue
            ],
            "top_changed_keys": [
                {"exchange": e, "routing_key": k, "messages": n} for e, k, n in self.top_keys
            ],
            "samples": self.samples,
        }


def route_both(
    frame: Any,
    old: Mapping[str, Any] | Topology,
    new: Mapping[str, Any] | Topology,
    exchange: str | None = None,
    *,
    vhost: str | None = None,
    engine: str = PIPELINE_ENGINE,
) -> Any:
    """``frame`` with ``queues_before``, ``error_before``, ``queues_after``, ``error_after``:
    each record routed by `xroute.spark.route` through ``old`` and through ``new``."""
    from xroute.spark import route

    once = route(
        frame, old, exchange, vhost=vhost, engine=engine,
        queues_column=BEFORE, error_column=ERROR_BEFORE,
    )
    return route(
        once, new, exchange, vhost=vhost, engine=engine,
        queues_column=AFTER, error_column=ERROR_AFTER,
    )


def compare(routed: Any) -> Any:
    """The routed frame with ``gained`` and ``lost`` (queues, sorted) and ``changed``."""
    from pyspark.sql import functions as F

    return (
        routed.withColumn("gained", F.array_sort(F.array_except(AFTER, BEFORE)))
        .withColumn("lost", F.array_sort(F.array_except(BEFORE, AFTER)))
        .withColumn("changed", (F.size("gained") > 0) | (F.size("lost") > 0))
    )


def summarise(
    compared: Any,
    old: Topology,
    new: Topology,
    *,
    exchange: str | None = None,
    samples: int = SAMPLES,
    top_keys: int = TOP_KEYS,
) -> TrafficDiff:
    """Counts, per-queue gains and losses and the top changed keys, computed in Spark; and
    `why_changed` for the first ``samples`` changed messages."""
    from pyspark.sql import functions as F

    def flag(condition: Any) -> Any:
        return F.sum(F.when(condition, 1).otherwise(0))

    before_n, after_n = F.size(BEFORE), F.size(AFTER)
    row = compared.agg(
        F.count(F.lit(1)).alias("messages"),
        flag(F.col("changed")).alias("changed"),
        flag(F.size("gained") > 0).alias("gained"),
        flag(F.size("lost") > 0).alias("lost"),
        flag((before_n > 0) & (after_n == 0) & F.col(ERROR_AFTER).isNull()).alias("unroutable"),
        flag((before_n == 0) & (after_n > 0)).alias("routable"),
        flag(F.col(ERROR_BEFORE).isNotNull()).alias("refused_before"),
        flag(F.col(ERROR_AFTER).isNotNull()).alias("refused_after"),
    ).collect()[0]
    gained = dict(
        compared.select(F.explode("gained").alias("queue")).groupBy("queue").count().collect()
    )
    lost = dict(
        compared.select(F.explode("lost").alias("queue")).groupBy("queue").count().collect()
    )
    per_queue = sorted(
        ((q, int(gained.get(q, 0)), int(lost.get(q, 0))) for q in set(gained) | set(lost)),
        key=lambda r: (-(r[1] + r[2]), r[0]),
    )
    exchange_column = _exchange_column(compared, exchange)
    changed = compared.where("changed")
    keys = (
        changed.groupBy(exchange_column.alias("exchange"), F.col(io.KEY).alias("routing_key"))
        .count()
        .orderBy(F.desc("count"), "exchange", "routing_key")
        .limit(top_keys)
        .collect()
    )
    explained = [
        _sample(r.asDict(recursive=True), old, new)
        for r in changed.select(
            "message_id", exchange_column.alias("exchange"), io.KEY, *_headers(compared)
        )
        .limit(samples)
        .collect()
    ]
    return TrafficDiff(
        messages=int(row["messages"]),
        changed=int(row["changed"] or 0),
        gained_messages=int(row["gained"] or 0),
        lost_messages=int(row["lost"] or 0),
        became_unroutable=int(row["unroutable"] or 0),
        became_routable=int(row["routable"] or 0),
        refused_before=int(row["refused_before"] or 0),
        refused_after=int(row["refused_after"] or 0),
        per_queue=per_queue,
        top_keys=[(r["exchange"], r["routing_key"], int(r["count"])) for r in keys],
        samples=explained,
    )


def _exchange_column(frame: Any, exchange: str | None) -> Any:
    from pyspark.sql import functions as F

    default = F.lit(exchange).cast("string")
    if io.EXCHANGE in frame.columns:
        return F.coalesce(F.col(io.EXCHANGE), default)
    return default


def _headers(frame: Any) -> list[str]:
    return [io.HEADERS] if io.HEADERS in frame.columns else []


def _sample(record: dict[str, Any], old: Topology, new: Topology) -> dict[str, Any]:
    headers = record.get(io.HEADERS)
    if isinstance(headers, str):
        headers = json.loads(headers)
    elif isinstance(headers, (bytes, bytearray)):  # a stream's AMQP field table, typed
        from xroute.core.field_table import decode_table

        headers = decode_table(bytes(headers))[0]
    try:
        why = why_changed(old, new, record["exchange"], record[io.KEY], headers)
    except Exception as error:  # a record one topology refuses: say so, as the route did
        why = {"exchange": record["exchange"], "routing_key": record[io.KEY], "error": f"{type(error).__name__}: {error}"}
    return {"message_id": record["message_id"], **why}


def with_message_ids(dataset: io.Dataset) -> Any:
    """The dataset's frame with ``message_id`` as text: its own, else ``file:row`` as the
    pipeline names records (the file relative to the dataset's folder, the row from 0)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = dataset.frame
    files = [f.uri for f in dataset.footers] or [
        r[0] for r in frame.select(io.FILE_COLUMN).distinct().collect()
    ]
    names = F.create_map(
        *[x for path in files for x in (F.lit(path), F.lit(relative_path(path, dataset.root)))]
    ) if files else F.create_map().cast("map<string,string>")
    row = F.col(io.ROW_COLUMN)
    if dataset.format in ("json", "csv"):
        # Text formats are read whole, one file per task, in order (io.WHOLE_FILES): the
        # order of monotonically_increasing_id within a file is the file's line order.
        ordered = Window.partitionBy(io.FILE_COLUMN).orderBy(F.monotonically_increasing_id())
        row = F.row_number().over(ordered) - 1
    made = F.concat_ws(":", names[F.col(io.FILE_COLUMN)], row.cast("string"))
    given = F.col(io.MESSAGE_ID).cast("string") if io.MESSAGE_ID in dataset.columns else F.lit(None)
    return frame.withColumn(io.MESSAGE_ID, F.coalesce(given, made))


@dataclass(frozen=True)
class DiffOptions:
    """One traffic diff's parameters, as ``xroute diff`` takes them."""

    old: str | Mapping[str, Any]  # a path, a management API URL, or a parsed export
    new: str | Mapping[str, Any]
    messages: str  # a local path or a storage URI
    out: str  # likewise
    exchange: str | None = None
    format: str = "auto"  # or a RabbitMQ trace format: see `xroute.spark.trace_input`
    vhost: str | None = None
    engine: str = PIPELINE_ENGINE
    overwrite: bool = False
    samples: int = SAMPLES
    columns: io.Columns = io.Columns()  # the routing key, exchange and headers columns
    # From a broker's streams: the pinned offsets (`xroute.spark.broker_input.BrokerRange`).
    broker_range: Any = None


def run_diff(
    spark: Any, options: DiffOptions, report: Mapping[str, Any] | None = None
) -> TrafficDiff:
    """Route the log through both topologies and publish OUT, on any storage, by the
    pipeline's commit protocol (docs/pipeline.md): ``changes/``, then ``diff.json`` (``report``
    with the traffic part added) and ``diff.png``, then ``_SUCCESS``. Returns the traffic part.
    Nothing is published unless the staged changes are exactly the changed messages counted."""
    given = [d for d in (options.old, options.new) if isinstance(d, str)]
    broker = broker_input.is_broker(options.messages)
    if broker:
        options = broker_input.pinned_options(options)
    log = None if broker else options.messages
    commit = Commit(options.out, [CHANGES], options.overwrite, inputs=[log, *given])
    old_defs = read_definitions(options.old, options.vhost)
    new_defs = read_definitions(options.new, options.vhost)
    old = Topology.from_definitions(old_defs, vhost=options.vhost)
    new = Topology.from_definitions(new_defs, vhost=options.vhost)
    fmt = broker_input.FORMAT if broker else message_format(options.messages, options.format)
    skipped = None
    try:
        commit.begin()
        with session_settings(spark, io.WHOLE_FILES if fmt in ("json", "csv") else {}):
            if broker:
                dataset = _standard_names(
                    broker_input.read_broker_range(spark, options.broker_range), options.columns
                )
            elif is_trace(fmt):  # publish records only: deliveries and events counted apart
                dataset = read_trace_dataset(spark, options.messages, fmt)
                skipped = skipped_records(spark, options.messages, fmt)[1]
            else:
                dataset = read_log(spark, options.messages, fmt, options.columns)
            compared = compare(
                route_both(
                    with_message_ids(dataset), old_defs, new_defs, options.exchange,
                    vhost=options.vhost, engine=options.engine,
                )
            ).persist()
            try:
                staged = stage_changes(compared, commit)
                traffic = summarise(
                    compared, old, new, exchange=options.exchange, samples=options.samples
                )
            finally:
                compared.unpersist()
        if staged != traffic.changed:
            raise PipelineFailed(
                f"{staged:,} changed messages staged in {CHANGES}/ but {traffic.changed:,} "
                "counted: nothing published"
            )
        traffic.trace_records_skipped = skipped
        full = {**(report or {}), "traffic": traffic.to_dict()}
        commit.publish(report_files(full), {"counts": full["traffic"]["counts"]})
    except BaseException:
        commit.abort()
        raise
    return traffic


def read_log(
    spark: Any, messages: str, fmt: str, names: io.Columns = io.Columns()
) -> io.Dataset:
    """The log as a Dataset with its DataFrame: Parquet read by the tasks with pyarrow where
    that reader reads it as Spark does (on any storage pyarrow reads), else by Spark. The
    columns ``names`` gives are renamed to routing_key, exchange and headers."""
    dataset = None
    if fmt == "parquet":
        try:
            surveyed = survey(messages)
        except DatasetError:  # one this reader would read otherwise: Spark reads it
            pass
        else:
            dataset = replace(surveyed, frame=read_frame(spark, surveyed, ARROW_BATCH_ROWS))
    if dataset is None:
        dataset = io.read_messages(spark, messages, fmt, names)
    dataset = _standard_names(dataset, names)
    if io.KEY not in dataset.columns:
        raise DatasetError(
            f"message dataset {messages!r} has no {io.KEY!r} column; its columns are "
            f"{list(dataset.columns)}",
            messages,
        )
    return dataset


def _standard_names(dataset: io.Dataset, names: io.Columns) -> io.Dataset:
    """The dataset with its routing columns under the names the diff reads (a column already
    holding a standard name that another column replaces is dropped)."""
    frame, columns = dataset.frame, list(dataset.columns)
    for given, standard in ((names.key, io.KEY), (names.exchange, io.EXCHANGE),
                            (names.headers, io.HEADERS)):
        if given != standard and given in columns:
            if standard in columns:
                frame, columns = frame.drop(standard), [c for c in columns if c != standard]
            frame = frame.withColumnRenamed(given, standard)
            columns = [standard if c == given else c for c in columns]
    return replace(dataset, frame=frame, columns=tuple(columns))


def stage_changes(compared: Any, commit: Commit) -> int:
    """Stage the changed messages' rows (message_id, queues_before, queues_after) as Parquet
    parts written by the tasks to ``commit``'s staging; keep the parts of successful attempts
    and return their rows. An empty result still gets one file, to read with its schema."""
    from pyspark.sql.pandas.types import to_arrow_schema

    changes = compared.where("changed").select(io.MESSAGE_ID, BEFORE, AFTER)
    folder = commit.folder(CHANGES).uri

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        writer = PartWriter(locate(folder), part_name())
        try:
            for batch in batches:
                writer.write(batch)
        finally:
            writer.close()
        yield pa.RecordBatch.from_pydict({"files": [json.dumps(writer.files)]})

    manifests = changes.mapInArrow(write, "files string").collect()
    listed = [name for row in manifests for name in json.loads(row[0])]
    rows = commit.keep_listed({CHANGES: listed})[CHANGES]
    if not listed:
        commit.stage_empty(CHANGES, to_arrow_schema(changes.schema))
    return rows


def publish_report(
    report: Mapping[str, Any], out: str, overwrite: bool = False, inputs: tuple[str, ...] = ()
) -> None:
    """OUT/diff.json (and diff.png when ``report`` has traffic), on any storage, published as
    `run_diff` publishes: a report without traffic (no log given). ``inputs``: the definitions
    read, which OUT may not overlap."""
    commit = Commit(out, [], overwrite, inputs=inputs)
    try:
        commit.begin()
        commit.publish(report_files(report), {})
    except BaseException:
        commit.abort()
        raise


def report_files(report: Mapping[str, Any]) -> dict[str, bytes]:
    """diff.json and, when there is traffic, diff.png, as bytes."""
    files = {"diff.json": (json.dumps(report, indent=2, default=str) + "\n").encode()}
    traffic = report.get("traffic")
    if traffic is not None:
        files["diff.png"] = plot_per_queue(traffic)
    return files


def plot_per_queue(traffic: Mapping[str, Any], top: int = 25) -> bytes:
    """Messages gained and lost per queue, the largest changes on top, as a PNG."""
    rows = traffic["per_queue"][:top]
    counts = traffic["counts"]
    return per_queue_bars(
        [(r["queue"], r["lost"], r["gained"]) for r in rows],
        ("lost", "#c33"),
        ("gained", "#3a7"),
        f"xroute diff: {counts['changed']:,} of {counts['messages']:,} messages change queues "
        f"(top {len(rows)} of {len(traffic['per_queue'])} queues)",
        "messages (lost to the left, gained to the right)",
        "no message changes its queues",
    )
