"""PNG plots of `xroute.bench.paths` results (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xroute.pipeline.figures import figure_legend, pyplot

plt = pyplot()  # Agg, and xroute's series style

from xroute.bench.paths import GOAL, PATHS, WORKLOADS  # noqa: E402


def _note(results: dict[str, Any]) -> str:
    """The run's machine as measured (cores, CPU, load), from its results."""
    return results["meta"].get("machine_note", "compare within this run only")


def write_path_plots(results: dict[str, Any], out: Path) -> list[Path]:
    """Write the plots into ``out``; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    figures = [(_rates(results, workload), f"paths_{workload}.png") for workload in WORKLOADS]
    figures += [(_gaps(results), "auto_vs_best.png"), (_churn(results), "churn.png")]
    for figure, name in figures:
        path = out / name
        figure.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(figure)
        written.append(path)
    return written


def _rates(results: dict[str, Any], workload: str) -> Any:
    sizes = [entry["bindings"] for entry in results["sizes"]]
    engines = list(results["sizes"][0]["engines"])
    figure, axes = plt.subplots(2, 3, figsize=(15, 8), sharex=True)
    for axis, path in zip(axes.flat, PATHS):
        for spec in engines:
            rates = [entry["engines"][spec][workload][path] for entry in results["sizes"]]
            style = dict(linewidth=3, color="black") if spec == "auto" else {}
            axis.plot(sizes, rates, marker="o", label=spec, **style)
        if path == "match":
            for peer in results["sizes"][0]["peers"]:
                rates = [entry["peers"][peer]["match keys/s"] for entry in results["sizes"]]
                axis.plot(sizes, rates, marker="x", linestyle=":", label=f"peer: {peer}")
        axis.set(title=path, xscale="log", yscale="log", xlabel="bindings", ylabel="keys/s")
        axis.grid(True, which="both", alpha=0.3)
    figure_legend(figure, axes)
    figure.suptitle(f"keys/s by path, workload '{workload}' ({_note(results)})")
    return figure


def _gaps(results: dict[str, Any]) -> Any:
    figure, axes = plt.subplots(1, len(WORKLOADS), figsize=(15, 5), sharey=True)
    sizes = [entry["bindings"] for entry in results["sizes"]]
    width = 0.8 / max(len(sizes), 1)
    for axis, workload in zip(axes, WORKLOADS):
        for n, size in enumerate(sizes):
            ratios = [g["ratio"] for path in PATHS for g in results["gaps"]
                      if g["bindings"] == size and g["workload"] == workload and g["path"] == path]
            axis.bar([i + n * width for i in range(len(ratios))], ratios, width,
                     label=f"{size:,} bindings")
        axis.axhline(GOAL, color="red", linestyle="--", label=f"goal {GOAL}x")
        axis.set_xticks([i + width for i in range(len(PATHS))], PATHS, rotation=30, ha="right",
                        fontsize=8)
        axis.set(title=f"best engine / auto, workload '{workload}'", ylabel="ratio (1 = auto best)")
    figure_legend(figure, axes)
    figure.suptitle(_note(results))
    return figure


def _churn(results: dict[str, Any]) -> Any:
    timed = [c for c in results["churn"] if "remove_all_s" in c]
    memory = [c for c in results["churn"] if "after_over_fresh" in c]
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    names = [c["engine"] for c in timed]
    left.bar([i - 0.2 for i in range(len(timed))], [c["remove_all_s"] for c in timed], 0.4,
             label="remove all")
    left.bar([i + 0.2 for i in range(len(timed))], [c["add_all_s"] for c in timed], 0.4,
             label="add all back")
    left.axhline(1.0, color="red", linestyle="--", label="goal 1 s")
    left.set_xticks(range(len(timed)), names)
    bindings = timed[0]["bindings"] if timed else 0
    left.set(title=f"churn of {bindings:,} bindings, random order, warm caches", ylabel="s")
    right.bar(range(len(memory)), [c["after_over_fresh"] for c in memory])
    right.axhline(1.1, color="red", linestyle="--", label="goal 1.1")
    right.set_xticks(range(len(memory)), [c["engine"] for c in memory])
    right.set(title="memory after churn / fresh (tracemalloc)", ylabel="ratio")
    figure_legend(figure, [left, right])
    figure.suptitle(_note(results))
    return figure
