"""Figures as a reader sees them: the style every xroute plot shares (the pipeline's summaries,
`diff -m` and `verify`, the benchmarks), and the per-queue figure of `diff -m` and `verify`.

The rules (issue 38): every series its own colour and marker (no ten-colour cycle reused),
legends outside the data, whole numbers on axes that count, "no data" on an empty panel,
plurals that agree, and results that are wrong marked as such on the figure.
"""

from __future__ import annotations

from io import BytesIO
from typing import Any

# Twenty colours a reader tells apart (matplotlib's tab10, then ten darker or lighter others),
# and markers to go with them: a series is told apart by colour and by shape.
COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#e7ba52", "#637939", "#843c39", "#7b4173", "#3182bd",
    "#e6550d", "#31a354", "#756bb1", "#636363",
)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p", "d", "H", "8",
           "1", "2", "3", "4", "+")
WRONG_HATCH = "xx"  # bars of results that are wrong


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display), with xroute's series style."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from cycler import cycler

    plt.rcParams["axes.prop_cycle"] = cycler(color=COLOURS)
    return plt


def series_style(index: int) -> dict[str, Any]:
    """The colour and marker of the ``index``-th series of a panel: distinct for 400."""
    return {"color": COLOURS[index % len(COLOURS)],
            "marker": MARKERS[(index + index // len(COLOURS)) % len(MARKERS)]}


def legend_outside(axes: Any, **options: Any) -> Any:
    """The panel's legend to the right of its data, never over it (save with
    ``bbox_inches="tight"`` so it is kept)."""
    options.setdefault("fontsize", 8)
    return axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                       **options)


def figure_legend(figure: Any, axes: Any, **options: Any) -> Any:
    """One legend for panels that share their series, to the right of them all: the series of
    every panel in ``axes`` (an axes or many), each label once."""
    seen: dict[str, Any] = {}
    for panel in getattr(axes, "flat", axes if isinstance(axes, (list, tuple)) else [axes]):
        for handle, label in zip(*panel.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    options.setdefault("fontsize", 8)
    return figure.legend(list(seen.values()), list(seen), loc="center left",
                         bbox_to_anchor=(1.0, 0.5), **options)


def whole_numbers(axes: Any, axis: str = "y") -> None:
    """Ticks at whole numbers only, on an axis that counts (no "0.25 messages")."""
    from matplotlib.ticker import MaxNLocator

    locator = MaxNLocator(integer=True, min_n_ticks=1)  # one tick rather than fractions
    (axes.yaxis if axis == "y" else axes.xaxis).set_major_locator(locator)


def no_data(axes: Any, text: str = "no data") -> None:
    """Say so on a panel with nothing to draw, instead of empty axes."""
    axes.text(0.5, 0.5, text, ha="center", va="center", transform=axes.transAxes,
              fontsize=11, color="#555")
    axes.set_xticks([])
    axes.set_yticks([])


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 message``, ``2 messages`` (thousands separated)."""
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


def wrong_label(name: str, wrong: int, checked: int) -> str:
    """A result's label, saying how many of its answers were wrong, when any was."""
    return f"{name} (WRONG: {wrong} of {checked})" if wrong else name


def save(figure: Any, path: Any, dpi: int = 110) -> None:
    """Write ``figure`` as a PNG (a path or a binary file), legends outside included, and
    free it."""
    import matplotlib.pyplot as plt

    figure.savefig(path, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(figure)


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
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(9, 1.3 + 0.32 * max(len(rows), 3)))
    if rows:
        labels = [r[0] for r in reversed(rows)]
        axes.barh(labels, [-r[1] for r in reversed(rows)], color=left[1], label=left[0])
        axes.barh(labels, [r[2] for r in reversed(rows)], color=right[1], label=right[0])
        axes.axvline(0, color="#444", linewidth=0.8)
        legend_outside(axes)
        whole_numbers(axes, "x")
    else:
        no_data(axes, empty)
    axes.set_xlabel(xlabel)
    axes.set_title(title, fontsize=9)
    axes.tick_params(axis="y", labelsize=7)
    image = BytesIO()
    save(figure, image)
    return image.getvalue()
