"""PNG plots of `xroute.bench.kombu` results (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xroute.pipeline.figures import legend_outside, pyplot

plt = pyplot()  # Agg, and xroute's series style

STYLE = {"kombu": ("s", "--"), "xroute": ("o", "-")}


def _machine(results: dict[str, Any]) -> str:
    """The machine as measured at the run's start: cores, CPU, load average."""
    meta = results["meta"]
    load = meta.get("load_before")
    shown = f", load average {load[0]:g}" if load else ""
    return f"{meta.get('cpus')} cores, {meta.get('processor')}{shown}"


def write_plots(results: dict[str, Any], out: Path) -> list[Path]:
    """Write messages/s by binding count and the split of publish time; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for draw, name in ((_rate, "messages_per_s.png"), (_split, "publish_time_split.png")):
        figure = draw(results)
        path = out / name
        figure.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(figure)
        written.append(path)
    return written


def _rate(results: dict[str, Any]):
    figure, axes = plt.subplots(figsize=(8, 5))
    lines: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for run in results["runs"]:
        lines.setdefault((run["transport"], run["mode"]), []).append(
            (run["bindings"], run["messages_per_s"])
        )
    for (transport, mode), points in sorted(lines.items()):
        marker, style = STYLE[mode]
        label = f"{transport}, {'xroute.kombu installed' if mode == 'xroute' else 'kombu topic'}"
        axes.plot(*zip(*sorted(points)), marker=marker, linestyle=style, label=label)
    axes.set(xscale="log", yscale="log", xlabel="topic bindings",
             ylabel="messages/s (one Producer)",
             title=f"kombu publish, topic exchange ({_machine(results)})")
    axes.grid(True, which="both", alpha=0.3)
    legend_outside(axes, fontsize=8)
    return figure


def _split(results: dict[str, Any]):
    runs = results["runs"]
    figure, axes = plt.subplots(figsize=(11, 5))
    labels, routing, table, rest = [], [], [], []
    for run in runs:
        labels.append(f"{run['transport']}\n{run['bindings']:,}\n{run['mode']}")
        routing.append(run["routing_share"])
        table.append(run["table_share"])
        rest.append(max(1.0 - run["routing_share"] - run["table_share"], 0.0))
    positions = list(range(len(runs)))
    axes.bar(positions, routing, label="routing (the exchange type's lookup)")
    axes.bar(positions, table, bottom=routing, label="reading the binding table (get_table)")
    axes.bar(positions, rest, bottom=[r + t for r, t in zip(routing, table)],
             label="the rest of publish (encoding, putting on queues)")
    for x, run in zip(positions, runs):
        axes.text(x, 1.01, f"{run['publish_us']:,.0f} µs", ha="center", fontsize=6)
    axes.set_xticks(positions, labels, fontsize=7)
    axes.set(ylim=(0, 1.1), ylabel="share of publish time",
             title="Where a publish spends its time, µs per message on top "
                   f"({_machine(results)})")
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure
