"""PNG plots of `xroute.bench.shapes_bench` results (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xroute.pipeline.figures import figure_legend, pyplot

plt = pyplot()  # Agg, and xroute's series style

PANELS = (
    ("route_first_per_s", "Topology.route, first time (routes/s)", 460_000),
    ("route_repeat_per_s", "Topology.route, repeated (routes/s)", 2_000_000),
    ("match_first_us", "match, first time (µs)", 2.0),
    ("match_repeat_us", "match, repeated (µs)", 0.5),
    ("ids_new_keys_per_s", "match_many_ids, new keys (keys/s)", 2_000_000),
    ("batch_router_per_s", "BatchRouter.route (keys/s)", 2_000_000),
)


def write_shape_plots(results: dict[str, Any], out: Path) -> list[Path]:
    """Write ``shapes.png`` (one panel per measure, grouped bars per shape) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    shapes = [entry["shape"] for entry in results["shapes"]]
    engines = list(results["shapes"][0]["engines"])
    figure, axes = plt.subplots(2, 3, figsize=(18, 9))
    width = 0.8 / len(engines)
    for axis, (measure, title, goal) in zip(axes.flat, PANELS):
        for i, spec in enumerate(engines):
            values = [entry["engines"][spec][measure] for entry in results["shapes"]]
            style = dict(edgecolor="black", linewidth=2) if spec == "auto" else {}
            axis.bar([x + i * width for x in range(len(shapes))], values, width, label=spec,
                     **style)
        axis.axhline(goal, color="red", linestyle="--", linewidth=1, label="issue 20 goal")
        axis.set_yscale("log")
        axis.set_title(title)
        axis.set_xticks([x + 0.4 - width / 2 for x in range(len(shapes))])
        axis.set_xticklabels(shapes, rotation=30, ha="right")
    figure_legend(figure, axes)
    load = results["meta"]["load_before"][0], results["meta"]["load_after"][0]
    figure.suptitle(f"xroute engines on other brokers' benchmark shapes (one process; "
                    f"2 shared cores, load {load[0]:.1f} -> {load[1]:.1f})")
    figure.tight_layout()
    path = out / "shapes.png"
    figure.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(figure)
    return [path]
