"""The figure frame every experiment plots into: one row of panels, saved as one PNG (Agg)."""

from __future__ import annotations

from typing import Any

PANEL_WIDTH, PANEL_HEIGHT = 6.4, 4.8  # inches per panel: matplotlib's default figure


def figure(panels: int, title: str) -> tuple[Any, list[Any]]:
    """A new figure of ``panels`` side by side under ``title``: (figure, list of axes)."""
    import matplotlib

    matplotlib.use("Agg")  # never a window: benchmarks run headless
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, panels, figsize=(PANEL_WIDTH * panels, PANEL_HEIGHT), squeeze=False)
    fig.suptitle(title)
    for ax in axes[0]:
        ax.grid(True, which="both", alpha=0.3)
    return fig, list(axes[0])


def save(fig: Any, path: str) -> None:
    """Write ``fig`` as a PNG at ``path`` and free it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
