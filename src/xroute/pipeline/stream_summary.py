"""A stream's running summary, derived from its committed batches' markers alone (so that it is
the same whatever crashed when): totals, per-batch rows, the batches at which the definitions
changed; as ``summary.json``, ``summary.png`` and a one-line status per batch."""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any, BinaryIO

from xroute.core.model import Binding
from xroute.pipeline.summary import build_summary

COUNTS = ("input", "delivered", "deliveries", "unroutable", "rejected")
RATE_BASIS = (
    "input messages / the sum of the batches' seconds (from the start of foreachBatch to the "
    "marker written); idle time between batches is not counted"
)


def stream_summary(
    markers: dict[int, dict[str, Any]],
    *,
    queues: Sequence[str],
    bindings: Sequence[Binding],
    definitions: str,
    engine: str,
    master: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary of every committed batch. ``queues``, ``bindings`` and ``definitions`` (a
    fingerprint) are those of the topology in use now: per-binding hits are summed over the
    batches routed with it."""
    totals: Counter = Counter()
    per_queue: Counter = Counter({name: 0 for name in queues})
    errors: Counter = Counter()
    hits = [0] * len(bindings)
    rows, changes, previous = [], [], None
    seconds = 0.0
    skipped: Counter | None = None  # a trace's deliveries and events, not routed
    for batch_id, marker in markers.items():
        counts = marker["counts"]
        totals.update({k: counts[k] for k in COUNTS})
        if "trace_records_skipped" in marker:
            skipped = (skipped or Counter()) + Counter(marker["trace_records_skipped"])
        per_queue.update(marker["queues"])
        errors.update(marker["errors"])
        if marker["definitions"] == definitions and len(marker["hits"]) == len(hits):
            hits = [a + b for a, b in zip(hits, marker["hits"])]
        if marker["definitions"] != previous:
            changes.append({"batch_id": batch_id, "definitions": marker["definitions"]})
            previous = marker["definitions"]
        seconds += marker["seconds"]
        rows.append(
            {
                "batch_id": batch_id,
                **{k: counts[k] for k in COUNTS},
                "files": len(marker["inputs"]),
                "seconds": marker["seconds"],
                "committed_at": marker["committed_at"],
            }
        )
    summary = build_summary(
        counts={k: totals[k] for k in COUNTS},
        wall_time_s=seconds,
        session_start_s=0.0,
        queues=list(per_queue),
        queue_counts=list(per_queue.values()),
        bindings=bindings,
        hits=hits,
        top_unroutable_keys=[],
        rejected_by_error=dict(errors),
        engine=engine,
        master=master,
        extra={
            "batches": rows,
            # Where a new definitions file took effect (the first entry: the one started with).
            "definitions_changes": changes,
            **({} if skipped is None else {"trace_records_skipped": dict(sorted(skipped.items()))}),
            **(extra or {}),
        },
    )
    summary["messages_per_s_basis"] = RATE_BASIS
    return summary


def summary_files(summary: dict[str, Any]) -> dict[str, bytes]:
    """``summary.json`` and ``summary.png``, by name, as the bytes to write."""
    image = io.BytesIO()
    plot_stream(summary, image)
    return {
        "summary.json": (json.dumps(summary, indent=1) + "\n").encode(),
        "summary.png": image.getvalue(),
    }


def plot_stream(summary: dict[str, Any], path: Any | BinaryIO) -> None:
    """Each batch's outcomes (stacked) and the running total of messages, with the batches at
    which the definitions changed marked."""
    from xroute.pipeline.figures import (
        legend_outside,
        no_data,
        plural,
        pyplot,
        save,
        whole_numbers,
    )

    plt = pyplot()
    rows = summary["batches"]
    ids = [r["batch_id"] for r in rows]
    figure, (per_batch, running) = plt.subplots(1, 2, figsize=(14, 5))
    total = sum(r["input"] for r in rows)
    if not rows:
        no_data(per_batch, "no batch yet")
        no_data(running, "no batch yet")
    else:
        bottom = [0] * len(rows)
        for name, color in (("delivered", "#3a7"), ("unroutable", "#e94"), ("rejected", "#c33")):
            values = [r[name] for r in rows]
            per_batch.bar(ids, values, bottom=bottom, color=color, label=name)
            bottom = [a + b for a, b in zip(bottom, values)]
        legend_outside(per_batch)
        running_total, seen = [], 0
        for r in rows:
            seen += r["input"]
            running_total.append(seen)
        running.plot(ids, running_total, marker="o", color="#47a")
        for change in summary["definitions_changes"][1:]:
            for axis in (per_batch, running):
                axis.axvline(change["batch_id"] - 0.5, color="#888", linestyle="--")
            running.annotate("new definitions", (change["batch_id"] - 0.5, 0), fontsize=8)
        for axis in (per_batch, running):
            # Batch ids and messages are counts: whole numbers on both axes.
            whole_numbers(axis, "x")
            whole_numbers(axis, "y")
            axis.ticklabel_format(axis="y", style="plain")
    per_batch.set_xlabel("batch id")
    per_batch.set_ylabel("messages")
    per_batch.set_title("messages per batch")
    running.set_xlabel("batch id")
    running.set_ylabel("messages routed, running total")
    running.set_title(f"{plural(total, 'message')} in {plural(len(rows), 'batch', 'batches')}")
    figure.suptitle(
        f"xroute stream: {summary['messages_per_s'] or 0:,.0f} messages/s while routing "
        f"({summary['master']}, engine {summary['engine']})"
    )
    figure.tight_layout()
    save(figure, path, dpi=100)


def status_line(marker: dict[str, Any], lag: int | None, unit: str = "files") -> str:
    """One batch, in a line: id, messages, rate, unroutable, rejected, the offsets read (a
    broker's streams), lag in ``unit`` (None: not known now)."""
    counts = marker["counts"]
    rate = counts["input"] / marker["seconds"] if marker["seconds"] > 0 else 0.0
    offsets = "".join(
        f" {stream} {first:,}..{end - 1:,}"
        for stream, (first, end) in marker.get("offsets", {}).items()
        if end > first
    )
    return (
        f"batch {marker['batch_id']:>4} {counts['input']:>9,} msgs {rate:>8,.0f}/s "
        f"{counts['unroutable']:>7,} unroutable {counts['rejected']:>6,} rejected"
        f"{' offsets' + offsets if offsets else ''} "
        f"lag {'?' if lag is None else format(lag, ',')} {unit}"
    )
