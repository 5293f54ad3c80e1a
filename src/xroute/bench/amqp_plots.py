"""The PNG of `xroute.bench.amqp` results (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xroute.pipeline.figures import legend_outside, pyplot

plt = pyplot()  # Agg, and xroute's series style


def write_plot(results: dict[str, Any], out: Path) -> Path:
    """Bars of messages/s per cell, xroute beside RabbitMQ; the path written."""
    runs = results["runs"]
    cells = sorted({(r["client"], r["confirms"], r["bindings"]) for r in runs},
                   key=lambda cell: (cell[2], cell[0], cell[1]))
    brokers = sorted({r["broker"] for r in runs}, reverse=True)
    rate = {(r["broker"], r["client"], r["confirms"], r["bindings"]): r["messages_per_s"]
            for r in runs}
    figure, axes = plt.subplots(figsize=(max(8, len(cells) * 0.9), 5))
    width = 0.8 / max(len(brokers), 1)
    for index, broker in enumerate(brokers):
        positions = [i + index * width for i in range(len(cells))]
        axes.bar(positions, [rate.get((broker, *cell), 0) for cell in cells], width,
                 label=broker)
    axes.set_xticks([i + width * (len(brokers) - 1) / 2 for i in range(len(cells))])
    axes.set_xticklabels([f"{client}\n{'confirms' if confirms else 'no confirms'}\n"
                          f"{bindings:,} bindings" for client, confirms, bindings in cells],
                         fontsize=7)
    axes.set(yscale="log", ylabel="messages/s (publish, route, deliver, ack)",
             title="AMQP end to end: xroute serve and RabbitMQ (shared 2-core machine)")
    axes.grid(True, axis="y", which="both", alpha=0.3)
    legend_outside(axes)
    path = out / "amqp.png"
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path
