"""PNG plots of `xroute.bench.engines` results (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

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
    for name, points in _series(results, "engines", warm).items():
        axes.plot(*zip(*points), marker="o", label=name)
    for name, points in _series(results, "peers", warm).items():
        axes.plot(*zip(*points), marker="s", linestyle="--", label=f"peer: {name}")
    axes.set(xscale="log", yscale="log", xlabel="bindings", ylabel="µs per key (median, warm)",
             title="Single-key match, 5-word keys")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    return figure


def _latency_by_length(results: dict[str, Any]):
    if not results["sizes"]:
        return None
    # The size nearest 10k bindings: the one the targets speak of.
    entry = min(results["sizes"], key=lambda e: abs(e["bindings"] - 10_001))
    figure, (absolute, per_word) = plt.subplots(1, 2, figsize=(12, 5))
    for name, figures in entry["engines"].items():
        curve = figures.get("warm_us_by_length") or {}
        lengths = sorted(curve, key=int)
        words = [int(n) for n in lengths]
        medians = [curve[n]["median"] for n in lengths]
        absolute.plot(words, medians, marker="o", label=name)
        per_word.plot(words, [m / w for m, w in zip(medians, words)], marker="o", label=name)
    # A linear axis: a straight line here is the "linear in key length" the seed looks for.
    absolute.set(xlabel="words in the routing key", ylabel="µs per key (median, warm)",
                 title=f"Key length, {entry['bindings']:,} bindings (with one '#.#')")
    per_word.set(xlabel="words in the routing key", ylabel="µs per word", yscale="log",
                 title="Cost per word: flat when linear")
    for axes in (absolute, per_word):
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=8)
    return figure


def _throughput(results: dict[str, Any]):
    figure, axes = plt.subplots(figsize=(8, 5))
    for key, style in (("match_many_ids_keys_per_s", "-"), ("match_many_keys_per_s", ":")):
        for name, points in _series(results, "engines", lambda f, k=key: f.get(k)).items():
            label = f"{name} ({'ids' if 'ids' in key else 'sets'})"
            axes.plot(*zip(*points), marker="o", linestyle=style, label=label)
    axes.set(xscale="log", yscale="log", xlabel="bindings", ylabel="keys per second",
             title="Batches: match_many_ids (Arrow in, flat ids out) and match_many (sets)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, ncol=2)
    return figure


def _memory(results: dict[str, Any]):
    figure, axes = plt.subplots(figsize=(8, 5))
    for name, points in _series(results, "engines", lambda f: f.get("memory_bytes")).items():
        axes.plot(*zip(*[(n, b / 1e6) for n, b in points]), marker="o", label=f"{name} built")
    warm = lambda f: f.get("warm_memory_bytes")  # noqa: E731
    for name, points in _series(results, "engines", warm).items():
        if any(b > 0 for _, b in points):
            axes.plot(*zip(*[(n, max(b, 1) / 1e6) for n, b in points]), marker="x",
                      linestyle=":", label=f"{name} + warm-up")
    axes.set(xscale="log", yscale="log", xlabel="bindings", ylabel="MB (tracemalloc)",
             title="Memory: the built structure, and what routing warm keys adds")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, ncol=2)
    return figure
