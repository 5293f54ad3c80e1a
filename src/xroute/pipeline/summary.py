"""The run's summary: counts, rates, per-queue deliveries, per-binding hits (the bindings that
never matched included), the most frequent unroutable keys; as JSON, as a plot, as a table."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from xroute.core.model import Binding

TOP_KEYS = 20
RATE_BASIS = (
    "input messages / wall_time_s; wall time runs from reading the definitions to the outputs "
    "written and checked, and excludes the Spark session start (session_start_s)"
)


def build_summary(
    *,
    counts: dict[str, int],
    wall_time_s: float,
    session_start_s: float,
    queues: Sequence[str],
    queue_counts: Sequence[int],
    bindings: Sequence[Binding],
    hits: Sequence[int],
    top_unroutable_keys: Sequence[tuple[str, int]],
    rejected_by_error: dict[str, int],
    engine: str,
    master: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary as a JSON-ready dict (the shape docs/pipeline.md describes)."""
    listed = [
        {
            "source": b.source,
            "destination": b.destination.name,
            "destination_type": b.destination.kind,
            "routing_key": b.routing_key,
            "arguments": _jsonable(b.arguments),
            "hits": int(h),
        }
        for b, h in zip(bindings, hits)
    ]
    return {
        "counts": {
            k: int(counts[k])
            for k in ("input", "delivered", "deliveries", "unroutable", "rejected")
        },
        "messages_per_s": round(counts["input"] / wall_time_s, 1) if wall_time_s > 0 else None,
        "messages_per_s_basis": RATE_BASIS,
        "wall_time_s": round(wall_time_s, 3),
        "session_start_s": round(session_start_s, 3),
        "queues": {name: int(n) for name, n in zip(queues, queue_counts)},
        "bindings": listed,
        "unused_bindings": sum(1 for b in listed if b["hits"] == 0),
        "top_unroutable_keys": [[key, int(n)] for key, n in top_unroutable_keys],
        "rejected_by_error": dict(sorted(rejected_by_error.items(), key=lambda kv: -kv[1])),
        "engine": engine,
        "master": master,
        **(extra or {}),
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return value


def summary_files(summary: dict[str, Any]) -> dict[str, bytes]:
    """``summary.json`` and ``summary.png``, by name, as the bytes to write."""
    image = io.BytesIO()
    plot_summary(summary, image)
    return {
        "summary.json": (json.dumps(summary, indent=1) + "\n").encode(),
        "summary.png": image.getvalue(),
    }


def plot_summary(summary: dict[str, Any], path: Path | BinaryIO) -> None:
    """Outcomes, the busiest queues, and how often bindings matched, in one figure."""
    from xroute.pipeline.figures import no_data, plural, pyplot, save, whole_numbers

    plt = pyplot()
    counts = summary["counts"]
    figure, (outcomes, queues, hits) = plt.subplots(
        1, 3, figsize=(16, 5.5), gridspec_kw={"width_ratios": [1, 2, 2]}
    )
    names = ["delivered", "unroutable", "rejected"]
    values = [counts[n] for n in names]
    outcomes.bar(names, values, color=["#3a7", "#e94", "#c33"])
    outcomes.set_title(plural(counts["input"], "message"))
    for x, v in enumerate(values):
        outcomes.annotate(f"{v:,}", (x, v), ha="center", va="bottom", fontsize=8)
    outcomes.ticklabel_format(axis="y", style="plain")
    outcomes.set_ylim(0, max(max(values) * 1.1, 1))  # counts from zero, even all zero
    whole_numbers(outcomes)

    busiest = sorted(summary["queues"].items(), key=lambda kv: -kv[1])[:20]
    if busiest:
        labels, numbers = zip(*reversed(busiest))
        queues.barh(labels, numbers, color="#47a")
        whole_numbers(queues, "x")
        queues.set_title(f"deliveries per queue (top {len(busiest)} of "
                         f"{plural(len(summary['queues']), 'queue')})")
    else:
        no_data(queues, "no delivery")
        queues.set_title("deliveries per queue")
    queues.tick_params(axis="y", labelsize=7)

    used = sorted((b["hits"] for b in summary["bindings"] if b["hits"]), reverse=True)
    if used:
        hits.plot(range(1, len(used) + 1), used, color="#85c")
        hits.set_xscale("log")
        hits.set_yscale("log")
    else:
        no_data(hits, "no binding matched")
    hits.set_xlabel("bindings, busiest first")
    hits.set_ylabel("messages matched")
    hits.set_title(
        f"binding hits: {len(used):,} used, {summary['unused_bindings']:,} never matched"
    )
    figure.suptitle(
        f"xroute pipeline: {summary['messages_per_s'] or 0:,.0f} messages/s over "
        f"{summary['wall_time_s']:.1f} s ({summary['master']}, engine {summary['engine']})"
    )
    figure.tight_layout()
    save(figure, path)


def summary_tables(summary: dict[str, Any], rows: int = 10) -> list[Any]:
    """The summary as rich tables: outcomes, busiest queues, unroutable keys, errors."""
    from rich.table import Table

    counts = summary["counts"]
    outcome = Table(title="xroute pipeline", show_header=False)
    outcome.add_column(style="bold")
    outcome.add_column(justify="right")
    for label, value in (
        ("input messages", counts["input"]),
        ("delivered", counts["delivered"]),
        ("deliveries (rows)", counts["deliveries"]),
        ("unroutable", counts["unroutable"]),
        ("rejected", counts["rejected"]),
        ("bindings never matched", summary["unused_bindings"]),
    ):
        outcome.add_row(label, f"{value:,}")
    for kind, n in summary.get("trace_records_skipped", {}).items():
        outcome.add_row(f"trace {kind} records (not routed)", f"{n:,}")
    outcome.add_row("wall time (s)", f"{summary['wall_time_s']:.2f}")
    rate = summary["messages_per_s"] or 0
    outcome.add_row("messages/s", f"{rate:,.0f}" if rate >= 100 else f"{rate:.2f}")
    outcome.add_row("Spark session start (s)", f"{summary['session_start_s']:.2f}")
    outcome.add_row("master / engine", f"{summary['master']} / {summary['engine']}")
    tables = [outcome]

    busiest = sorted(summary["queues"].items(), key=lambda kv: -kv[1])[:rows]
    queues = Table(title=f"Busiest queues (of {len(summary['queues']):,})")
    queues.add_column("queue")
    queues.add_column("deliveries", justify="right")
    for name, n in busiest:
        queues.add_row(name, f"{n:,}")
    tables.append(queues)

    if summary["top_unroutable_keys"]:
        keys = Table(title="Most frequent unroutable keys")
        keys.add_column("routing key")
        keys.add_column("messages", justify="right")
        for key, n in summary["top_unroutable_keys"][:rows]:
            keys.add_row(key, f"{n:,}")
        tables.append(keys)
    if summary["rejected_by_error"]:
        errors = Table(title="Rejected records by error")
        errors.add_column("error")
        errors.add_column("records", justify="right")
        for name, n in summary["rejected_by_error"].items():
            errors.add_row(name, f"{n:,}")
        tables.append(errors)
    return tables
