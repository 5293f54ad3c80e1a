"""PNG plots of `xroute.bench.engines` results (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xroute.pipeline.figures import figure_legend, legend_outside, pyplot, series_style

plt = pyplot()  # Agg, and xroute's series style

HEADLINE = "5"  # key length of the headline latency (JSON keys are strings)


def write_plots(results: dict[str, Any], out: Path) -> list[Path]:
    """Write every plot into ``out``; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    plots = [
        (_latency_by_size, "latency_by_bindings.png"),
        (_latency_by_length, "latency_by_key_length.png"),
        (_throughput, "batch_throughput.png"),
        (_memory, "memory.png"),
    ]
    written = []
    for draw, name in plots:
        figure = draw(results)
        if figure is not None:
            path = out / name
            figure.savefig(path, dpi=110, bbox_inches="tight")
            plt.close(figure)
            written.append(path)
    return written


def _sizes(results: dict[str, Any]) -> list[int]:
    return [entry["bindings"] for entry in results["sizes"]]


def _series(results: dict[str, Any], group: str, pick) -> dict[str, list[tuple[int, float]]]:
    lines: dict[str, list[tuple[int, float]]] = {}
    for entry in results["sizes"]:
        for name, figures in entry.get(group, {}).items():
            value = pick(figures)
            if value is not None:
                lines.setdefault(name, []).append((entry["bindings"], value))
    return lines


def _latency_by_size(results: dict[str, Any]):
    figure, axes = plt.subplots(figsize=(8, 5))
    warm = lambda f: (f.get("warm_us") or {}).get("median")  # noqa: E731
    engines = _series(results, "engines", warm)
    for i, (name, points) in enumerate(engines.items()):
        axes.plot(*zip(*points), label=name, **series_style(i))
    for i, (name, points) in enumerate(_series(results, "peers", warm).items(), len(engines)):
        axes.plot(*zip(*points), linestyle="--", label=f"peer: {name}", **series_style(i))
    axes.set(xscale="log", yscale="log", xlabel="bindings", ylabel="µs per key (median, warm)",
             title="Single-key match, 5-word keys")
    axes.grid(True, which="both", alpha=0.3)
    legend_outside(axes, fontsize=8)
    return figure


def _latency_by_length(results: dict[str, Any]):
    if not results["sizes"]:
        return None
    # The size nearest 10k bindings: the one the targets speak of.
    entry = min(results["sizes"], key=lambda e: abs(e["bindings"] - 10_001))
    figure, (absolute, per_word) = plt.subplots(1, 2, figsize=(12, 5))
    for i, (name, figures) in enumerate(entry["engines"].items()):
        curve = figures.get("warm_us_by_length") or {}
        lengths = sorted(curve, key=int)
        words = [int(n) for n in lengths]
        medians = [curve[n]["median"] for n in lengths]
        absolute.plot(words, medians, label=name, **series_style(i))
        per_word.plot(words, [m / w for m, w in zip(medians, words)], label=name,
                      **series_style(i))
    # A linear axis: a straight line here is the "linear in key length" the seed looks for.
    absolute.set(xlabel="words in the routing key", ylabel="µs per key (median, warm)",
                 title=f"Key length, {entry['bindings']:,} bindings (with one '#.#')")
    per_word.set(xlabel="words in the routing key", ylabel="µs per word", yscale="log",
                 title="Cost per word: flat when linear")
    for axes in (absolute, per_word):
        axes.grid(True, which="both", alpha=0.3)
    figure_legend(figure, [absolute, per_word])
    return figure


def _throughput(results: dict[str, Any]):
    figure, axes = plt.subplots(figsize=(8, 5))
    index = 0
    for key, style in (("match_many_ids_keys_per_s", "-"), ("match_many_keys_per_s", ":")):
        for name, points in _series(results, "engines", lambda f, k=key: f.get(k)).items():
            label = f"{name} ({'ids' if 'ids' in key else 'sets'})"
            axes.plot(*zip(*points), linestyle=style, label=label, **series_style(index))
            index += 1
    axes.set(xscale="log", yscale="log", xlabel="bindings", ylabel="keys per second",
             title="Batches: match_many_ids (Arrow in, flat ids out) and match_many (sets)")
    axes.grid(True, which="both", alpha=0.3)
    legend_outside(axes, fontsize=7, ncol=2)
    return figure


def _memory(results: dict[str, Any]):
    figure, axes = plt.subplots(figsize=(8, 5))
    built = _series(results, "engines", lambda f: f.get("memory_bytes"))
    # Engines of the same structure (trie, trie+cache) draw the same line: their own markers,
    # hollow and of decreasing size, keep each visible over the others.
    for i, (name, points) in enumerate(built.items()):
        style = series_style(i)
        axes.plot(*zip(*[(n, b / 1e6) for n, b in points]), label=f"{name} built",
                  markerfacecolor="none", markersize=10 - min(i, 6), **style)
    warm = lambda f: f.get("warm_memory_bytes")  # noqa: E731
    for i, (name, points) in enumerate(_series(results, "engines", warm).items(), len(built)):
        if any(b > 0 for _, b in points):
            axes.plot(*zip(*[(n, max(b, 1) / 1e6) for n, b in points]),
                      linestyle=":", label=f"{name} + warm-up", **series_style(i))
    axes.set(xscale="log", yscale="log", xlabel="bindings", ylabel="MB (tracemalloc)",
             title="Memory: the built structure, and what routing warm keys adds")
    axes.grid(True, which="both", alpha=0.3)
    legend_outside(axes, fontsize=7, ncol=2)
    return figure
