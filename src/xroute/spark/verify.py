"""``xroute verify``, on Spark: route every published message of a RabbitMQ trace with a
topology (or the topology of its moment, `xroute.traces.history`) and compare with the queues
the broker chose (`xroute.traces.verify`).

The trace's files are dealt out to tasks (`mapInArrow` over a small frame of file names: no RDD,
so it runs on Spark Connect as on classic Spark). Each task reads its files with pyarrow from
any storage, verifies their publish records, writes the verdicts of its messages as a Parquet
part under the commit's staging folder, and returns its counts; the driver adds them up, checks
that the staged rows are exactly the publish records counted, and publishes OUT by the
pipeline's commit protocol (`xroute.pipeline.commit`): ``messages/``, ``verify.json``,
``verify.png``, then ``_SUCCESS``.

A tracing-plugin log has no order of its own across files: its records are numbered
``file index * 2**32 + line`` (`xroute.spark.trace_frame`) so that every record keeps one
place.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from xroute.core.errors import PipelineFailed, TraceFormatError
from xroute.pipeline.commit import Commit
from xroute.pipeline.engine import PIPELINE_ENGINE
from xroute.pipeline.figures import per_queue_bars
from xroute.pipeline.output import check_apart, check_writable
from xroute.sources.definitions import read_definitions
from xroute.sources.storage import locate
from xroute.spark.trace_frame import FILE_SEQ_STRIDE, file_frame
from xroute.spark.worker import PartWriter, ShippedTopology, part_name
from xroute.tools.explain import explain
from xroute.traces.history import TopologyEvent, TopologyHistory
from xroute.traces.read import check_files, read_file, trace_files
from xroute.traces.records import DELIVER, EVENT, PUBLISH, SCHEMA
from xroute.traces.verify import (
    AGREE,
    DISAGREE,
    NEEDED,
    STATUSES,
    VERDICT_SCHEMA,
    verify_batch,
)

MESSAGES = "messages"
SAMPLES = 5  # disagreeing messages explained exchange by exchange


@dataclass(frozen=True)
class VerifyOptions:
    """One verify run's parameters, as ``xroute verify`` takes them."""

    definitions: str | Mapping[str, Any]
    traces: str
    out: str
    events: str | None = None  # a capture holding the topology's changes; None: the traces'
    base_at: str = "end"  # where the export stands among the events: end, start
    format: str | None = None
    vhost: str | None = None
    overwrite: bool = False
    samples: int = SAMPLES


@dataclass
class VerifyResult:
    """The counts of a verify run (see `to_dict`)."""

    statuses: Counter = field(default_factory=Counter)
    records: Counter = field(default_factory=Counter)
    missing: Counter = field(default_factory=Counter)
    extra: Counter = field(default_factory=Counter)
    suspects: Counter = field(default_factory=Counter)
    versions: int = 1
    skipped_changes: list[str] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def published(self) -> int:
        """Publish records verified."""
        return sum(self.statuses.values())

    @property
    def agrees(self) -> bool:
        """True when every published message went where the broker put it."""
        return self.statuses[AGREE] == self.published

    def to_dict(self) -> dict[str, Any]:
        """As JSON-ready data (``verify.json``)."""
        return {
            "agrees": self.agrees,
            "counts": {
                "published": self.published,
                **{status: self.statuses[status] for status in STATUSES},
                "deliveries": self.records[DELIVER],
                "events": self.records[EVENT],
            },
            "per_queue": [
                {"queue": q, "missing": self.missing[q], "extra": self.extra[q]}
                for q in sorted(set(self.missing) | set(self.extra),
                                key=lambda q: (-(self.missing[q] + self.extra[q]), q))
            ],
            "per_binding": [{"binding": b, "messages": n} for b, n in self.suspects.most_common()],
            "topology_versions": self.versions,
            "changes_not_replayed": self.skipped_changes,
            "samples": self.samples,
        }


def load_history(options: VerifyOptions) -> tuple[Mapping[str, Any], TopologyHistory | None]:
    """The base export and, when the trace or ``--events`` holds topology changes, the
    history around it (ordered by capture position when they share one capture)."""
    base = read_definitions(options.definitions, options.vhost)
    source = options.events or options.traces
    events_table = _events_of(source, options.format if source == options.traces else None)
    events = [TopologyEvent.from_row(row) for row in events_table.to_pylist()]
    if not events:
        if options.events:
            raise TraceFormatError(f"--events {options.events!r} holds no topology events")
        return base, None
    if options.base_at not in ("start", "end"):
        raise TraceFormatError(f"--base-at must be 'start' or 'end', got {options.base_at!r}")
    order = "seq" if options.events in (None, options.traces) else "time"
    base_version = 0 if options.base_at == "start" else None  # None: after every event
    history = TopologyHistory(base, events, base_version, order=order)
    return base, history


EVENT_COLUMNS = ["seq", "routing_key", "headers", "traced_at"]


def _events_of(source: str, format: str | None) -> pa.Table:
    """The event records of a trace (a capture's Parquet: only those rows are read)."""
    tables = [SCHEMA.empty_table().select(EVENT_COLUMNS)]
    for location, name in trace_files(source):
        if location.path.endswith(".parquet"):  # a capture: read only its event rows
            table = pq.read_table(
                location.path, filesystem=location.filesystem, filters=[("record_type", "=", EVENT)]
            )
            tables.append(table.select(EVENT_COLUMNS).cast(tables[0].schema))
        else:
            table = read_file(location, format, name=name)
            mask = pa.compute.equal(table.column("record_type"), EVENT)
            tables.append(table.filter(mask).select(EVENT_COLUMNS))
    return pa.concat_tables(tables)


def _task(against: Any, folder: str, format: str | None, samples: int) -> Any:
    """The function each Spark task runs on its rows of (uri, name, file_index); ``against``
    is a `TopologyHistory`, or one topology as `ShippedTopology` (its router built once per
    Python worker, as the pipeline's)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if isinstance(against, TopologyHistory):
            verifier: Any = against
        else:
            verifier = against.router()
        writer = PartWriter(locate(folder), part_name())
        counts: dict[str, Counter] = {k: Counter() for k in ("status", "record", "missing", "extra", "suspect")}
        found: list[dict[str, Any]] = []
        try:
            for batch in batches:
                for uri, name, index in zip(*(c.to_pylist() for c in batch.columns)):
                    table = read_file(locate(uri), format, index * FILE_SEQ_STRIDE, name, NEEDED)
                    counts["record"].update(table.column("record_type").to_pylist())
                    verdicts = verify_batch(table, verifier)
                    for row in verdicts.to_pylist():
                        counts["status"][row["status"]] += 1
                        if row["status"] == DISAGREE:  # an inexact verdict accuses no queue
                            counts["missing"].update(row["missing"])
                            counts["extra"].update(row["extra"])
                            counts["suspect"].update(row["suspects"])
                        if row["status"] != AGREE and len(found) < samples:
                            found.append(row)
                    for part in verdicts.to_batches():
                        writer.write(part)
        finally:
            writer.close()
        yield pa.RecordBatch.from_pydict(
            {"result": [json.dumps({"files": writer.files, "samples": found,
                                    **{k: dict(v) for k, v in counts.items()}}, default=str)]}
        )

    return run


@dataclass(frozen=True)
class Prepared:
    """What `prepare_verify` found: the trace's files, the base export, the history (if any)."""

    files: list[tuple[Any, str]]
    base: Mapping[str, Any]
    history: TopologyHistory | None


def prepare_verify(options: VerifyOptions) -> Prepared:
    """Everything that can be checked and read before Spark starts, each mistake refused in
    one line: OUT apart from the inputs and free to write, the trace's files (their first
    bytes), the definitions and the events."""
    check_apart(options.out, [options.traces, options.events], what="trace")
    check_writable(locate(options.out), options.out, options.overwrite)
    files = trace_files(options.traces)
    if not files:
        raise TraceFormatError(f"no trace files in {options.traces!r}")
    check_files(files, options.format)
    if options.events:
        check_files(trace_files(options.events))
    return Prepared(files, *load_history(options))


def run_verify(
    spark: Any, options: VerifyOptions, prepared: Prepared | None = None
) -> VerifyResult:
    """Verify the trace and publish OUT (see the module docstring); ``prepared`` is
    `prepare_verify`'s result when the caller already has it."""
    prepared = prepared or prepare_verify(options)
    files, base, history = prepared.files, prepared.base, prepared.history
    commit = Commit(options.out, [MESSAGES], options.overwrite)
    against: Any = history if history is not None else ShippedTopology.of(base, None, PIPELINE_ENGINE)
    try:
        commit.begin()
        rows = file_frame(spark, files).mapInArrow(
            _task(against, commit.folder(MESSAGES).uri, options.format, options.samples),
            "result string",
        ).collect()
        result = VerifyResult(versions=len(history) if history is not None else 1)
        listed: list[str] = []
        for row in rows:
            part = json.loads(row[0])
            listed += part["files"]
            result.statuses.update(part["status"])
            result.records.update(part["record"])
            result.missing.update(part["missing"])
            result.extra.update(part["extra"])
            result.suspects.update(part["suspect"])
            result.samples += part["samples"]
        staged = commit.keep_listed({MESSAGES: listed})[MESSAGES]
        if not listed:
            commit.stage_empty(MESSAGES, VERDICT_SCHEMA)
        if staged != result.published or result.published != result.records[PUBLISH]:
            raise PipelineFailed(
                f"{staged:,} verdicts staged in {MESSAGES}/ for {result.records[PUBLISH]:,} "
                f"published records ({result.published:,} verified): nothing published"
            )
        result.samples = [_explained(s, against) for s in result.samples[: options.samples]]
        if history is not None:
            result.skipped_changes = history.skipped
        report = result.to_dict()
        commit.publish(
            {"verify.json": (json.dumps(report, indent=2, default=str) + "\n").encode(),
             "verify.png": plot(report)},
            {"counts": report["counts"]},
        )
    except BaseException:
        commit.abort()
        raise
    return result


def _explained(sample: dict[str, Any], against: Any) -> dict[str, Any]:
    """A disagreeing message with its path through the topology that verified it."""
    if isinstance(against, TopologyHistory):
        topology = against.topology(sample["topology_version"])
    else:
        topology = against.router().topology
    headers = json.loads(sample["headers"]) if sample["headers"] else None
    try:
        path = explain(topology, sample["exchange"] or "", sample["routing_key"] or "", headers).to_dict()
    except Exception as error:  # noqa: BLE001 - the sample already says why it failed
        path = {"error": f"{type(error).__name__}: {error}"}
    return {**sample, "path": path}


def plot(report: Mapping[str, Any], top: int = 20) -> bytes:
    """Disagreements per queue (missing to the left, extra to the right), as a PNG."""
    rows = report["per_queue"][:top]
    counts = report["counts"]
    return per_queue_bars(
        [(r["queue"], r["missing"], r["extra"]) for r in rows],
        ("missing", "#c33"),
        ("extra", "#37a"),
        f"xroute verify: {counts['agree']:,} of {counts['published']:,} messages agree "
        f"({counts[DISAGREE]:,} disagree, {counts['missing_exchange']:,} missing exchange, "
        f"{counts['unsupported_exchange']:,} unsupported, {counts['invalid']:,} invalid)",
        "messages (missing: the broker's queues xroute did not reach; extra: the reverse)",
        "every queue agrees with the broker",
    )
