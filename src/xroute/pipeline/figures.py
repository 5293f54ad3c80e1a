"""The per-queue figure of `diff -m` and `verify`: two counts per queue as bars to the left
and to the right of zero, the largest on top, as PNG bytes."""

from __future__ import annotations

from io import BytesIO


def per_queue_bars(
    rows: list[tuple[str, int, int]],
    left: tuple[str, str],
    right: tuple[str, str],
    title: str,
    xlabel: str,
    empty: str,
) -> bytes:
    """``rows`` of (queue, left count, right count), largest first; ``left`` and ``right``
    are each a (label, colour); ``empty`` is said when there are no rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 1.3 + 0.32 * max(len(rows), 3)))
    if rows:
        labels = [r[0] for r in reversed(rows)]
        axes.barh(labels, [-r[1] for r in reversed(rows)], color=left[1], label=left[0])
        axes.barh(labels, [r[2] for r in reversed(rows)], color=right[1], label=right[0])
        axes.axvline(0, color="#444", linewidth=0.8)
        axes.legend(loc="lower right")
    else:
        axes.text(0.5, 0.5, empty, ha="center", va="center")
    axes.set_xlabel(xlabel)
    axes.set_title(title, fontsize=9)
    axes.tick_params(axis="y", labelsize=7)
    figure.tight_layout()
    image = BytesIO()
    figure.savefig(image, format="png", dpi=110)
    plt.close(figure)
    return image.getvalue()
