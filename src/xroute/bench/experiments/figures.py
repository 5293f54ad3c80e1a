"""The figure frame every experiment plots into: one row of panels, saved as one PNG (Agg),
in the house style (`xroute.pipeline.figures`); and bars that say which results were wrong."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xroute.pipeline.figures import WRONG_HATCH, legend_outside, pyplot, wrong_label

PANEL_WIDTH, PANEL_HEIGHT = 6.4, 4.8  # inches per panel: matplotlib's default figure


def figure(panels: int, title: str) -> tuple[Any, list[Any]]:
    """A new figure of ``panels`` side by side under ``title``: (figure, list of axes)."""
    plt = pyplot()  # never a window: benchmarks run headless
    fig, axes = plt.subplots(1, panels, figsize=(PANEL_WIDTH * panels, PANEL_HEIGHT), squeeze=False)
    fig.suptitle(title)
    for ax in axes[0]:
        ax.grid(True, which="both", alpha=0.3)
    return fig, list(axes[0])


def save(fig: Any, path: str) -> None:
    """Write ``fig`` as a PNG at ``path`` (legends outside the panels kept) and free it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def wrong_of(row: dict[str, Any]) -> tuple[int, int]:
    """(wrong answers, answers checked) of a result row; (0, 0) when it was not checked."""
    return int(row.get("wrong") or 0), int(row.get("wrong_of") or row.get("keys") or 0)


def marked_barh(ax: Any, rows: Sequence[dict[str, Any]], values: Sequence[float],
                colours: Sequence[str], extra: Sequence[tuple[str, float, str]] = (),
                kinds: dict[str, str] | None = None) -> None:
    """Horizontal bars, one per row (``row["name"]``) and per ``extra`` (name, value, colour):
    a row that gave wrong answers is hatched and labelled "(WRONG: w of n)", so no wrong
    result passes for a fast one; ``kinds`` (label -> colour) explains the colours."""
    names = [wrong_label(row["name"], *wrong_of(row)) for row in rows]
    names += [name for name, _, _ in extra]
    bars = ax.barh(names, list(values) + [value for _, value, _ in extra],
                   color=list(colours) + [colour for _, _, colour in extra])
    import matplotlib.patches as patches

    handles = [patches.Patch(color=colour, label=label) for label, colour in (kinds or {}).items()]
    if any(wrong_of(row)[0] for row in rows):
        for bar, row in zip(bars, rows):
            if wrong_of(row)[0]:
                bar.set_hatch(WRONG_HATCH)
                bar.set_edgecolor("#c00")
        handles.append(patches.Patch(facecolor="white", edgecolor="#c00", hatch=WRONG_HATCH,
                                     label="wrong answers (not comparable)"))
    if handles:
        legend_outside(ax, handles=handles)
