"""Every plot xroute draws, rendered on a normal input (a committed run's results) and on a tiny
one, and read back as a reader would (issue 38): each series its own colour and marker, legends
outside the data, whole numbers where values count, "no data" on an empty panel, plurals that
agree, and wrong results marked."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

matplotlib.use("Agg")

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "docs" / "results"


@pytest.fixture
def drawn(monkeypatch):
    """The figures saved while a test runs (each read after its save, when it is laid out)."""
    figures: list[Figure] = []
    original = Figure.savefig

    def savefig(self, *args, **kwargs):
        figures.append(self)
        kwargs["dpi"] = 30  # laid out the same; fewer pixels to paint in a test
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return figures


def read(name: str) -> dict:
    return json.loads((RESULTS / name / "results.json").read_text())


def check_readable(figure: Figure) -> None:
    """The rules every figure keeps."""
    figure.set_dpi(30)
    canvas = FigureCanvasAgg(figure)  # a saved figure is closed: draw it again, off screen
    canvas.draw()
    renderer = canvas.get_renderer()
    data_areas = [axes.get_window_extent(renderer) for axes in figure.axes]
    legends = [axes.get_legend() for axes in figure.axes] + list(figure.legends)
    for legend in filter(None, legends):
        box = legend.get_window_extent(renderer)
        for area in data_areas:
            assert not box.overlaps(area), f"a legend covers a panel: {_labels(legend)}"
    for axes in figure.axes:
        styles = [(line.get_color(), line.get_marker(), line.get_linestyle())
                  for line in axes.get_lines() if not line.get_label().startswith("_")]
        assert len(styles) == len(set(styles)), f"two series look alike in {axes.get_title()!r}"
        drawn = axes.get_lines() or axes.patches or axes.collections or axes.images
        texts = [text.get_text() for text in axes.texts]
        assert drawn or texts, f"an empty panel says nothing: {axes.get_title()!r}"
    for text in figure.findobj(matplotlib.text.Text):
        shown = f" {text.get_text()} "
        for singular in ("message", "batch", "queue", "binding"):
            assert f" 1 {singular}s " not in shown, f"'1 {singular}s' in {shown!r}"


def _labels(legend) -> list[str]:
    return [text.get_text() for text in legend.get_texts()]


def integer_ticks(axes, axis: str) -> bool:
    ticks = axes.get_yticks() if axis == "y" else axes.get_xticks()
    low, high = axes.get_ylim() if axis == "y" else axes.get_xlim()
    shown = [t for t in ticks if low <= t <= high]
    return all(float(t).is_integer() for t in shown)


# ---------------------------------------------------------------------- the benchmarks


def test_engine_plots(tmp_path, drawn):
    from xroute.bench.plots import write_plots

    results = read("engines")
    assert len(write_plots(results, tmp_path)) == 4
    for figure in drawn:
        check_readable(figure)
    throughput = drawn[2].axes[0]
    assert len(throughput.get_lines()) >= 12  # twelve series, twelve looks (not ten colours)


def test_seed_plots_mark_wrong_peers(tmp_path, drawn):
    from xroute.bench.experiments import write_outputs

    results = read("seeds")
    write_outputs(results, tmp_path)
    for figure in drawn:
        check_readable(figure)
    trie_dfa = next(f for f in drawn if "Experiment 2" in f._suptitle.get_text())
    labels = [t.get_text() for t in trie_dfa.axes[0].get_yticklabels()]
    assert "paho-mqtt MQTTMatcher (WRONG: 10000 of 10000)" in labels
    hatched = [bar for bar in trie_dfa.axes[0].patches if bar.get_hatch()]
    assert len(hatched) == 2  # kombu and paho-mqtt, both wrong


@pytest.mark.parametrize("name, module, function", [
    ("kombu", "xroute.bench.kombu_plots", "write_plots"),
    ("engines-paths", "xroute.bench.paths_plots", "write_path_plots"),
    ("engines-shapes", "xroute.bench.shapes_plots", "write_shape_plots"),
])
def test_other_benchmark_plots(tmp_path, drawn, name, module, function):
    import importlib

    draw = getattr(importlib.import_module(module), function)
    draw(read(name), tmp_path)
    assert drawn
    for figure in drawn:
        check_readable(figure)


# ---------------------------------------------------------------------- the pipeline


def summary(messages: int, queues: dict[str, int], hits: list[int]) -> dict:
    return {
        "counts": {"input": messages, "delivered": messages, "unroutable": 0, "rejected": 0,
                   "deliveries": messages},
        "messages_per_s": 10.0, "wall_time_s": 1.0, "queues": queues,
        "bindings": [{"hits": h} for h in hits], "unused_bindings": hits.count(0),
        "engine": "auto", "master": "local[2]",
    }


@pytest.mark.parametrize("case", ["tiny", "empty", "normal"])
def test_pipeline_summary(tmp_path, drawn, case):
    from xroute.pipeline.summary import plot_summary

    given = {
        "tiny": summary(1, {"q": 1}, [1]),
        "empty": summary(0, {}, [0]),
        "normal": summary(1_000_000, {f"q{i}": 1000 * i for i in range(40)},
                          list(range(500, 0, -1))),
    }[case]
    plot_summary(given, tmp_path / "summary.png")
    (figure,) = drawn
    check_readable(figure)
    outcomes = figure.axes[0]
    assert integer_ticks(outcomes, "y"), outcomes.get_yticks()
    if case == "tiny":
        assert outcomes.get_title() == "1 message"
    if case == "empty":
        assert [t.get_text() for t in figure.axes[1].texts] == ["no delivery"]


@pytest.mark.parametrize("batches", [0, 1, 30])
def test_stream_summary(tmp_path, drawn, batches):
    from xroute.pipeline.stream_summary import plot_stream

    rows = [{"batch_id": i, "input": 1 + i, "delivered": 1 + i, "unroutable": 0, "rejected": 0}
            for i in range(batches)]
    plot_stream({"batches": rows, "definitions_changes": [{"batch_id": 0}],
                 "messages_per_s": 5.0, "master": "local[2]", "engine": "auto"},
                tmp_path / "stream.png")
    (figure,) = drawn
    check_readable(figure)
    if batches:
        for axes in figure.axes:
            assert integer_ticks(axes, "x") and integer_ticks(axes, "y")
    if batches == 1:
        assert figure.axes[1].get_title() == "1 message in 1 batch"


def test_per_queue_bars_keep_the_legend_off_the_only_bar(drawn):
    from xroute.pipeline.figures import per_queue_bars

    per_queue_bars([("gained", 0, 5)], ("lost", "#c33"), ("gained", "#3a7"), "diff", "messages",
                   "no change")
    per_queue_bars([], ("lost", "#c33"), ("gained", "#3a7"), "diff", "messages", "no change")
    for figure in drawn:
        check_readable(figure)
    assert [t.get_text() for t in drawn[1].axes[0].texts] == ["no change"]


def test_a_broken_figure_fails_the_checks(drawn, tmp_path):
    # The checks themselves catch what they look for.
    from xroute.pipeline.figures import pyplot

    plt = pyplot()
    figure, axes = plt.subplots()
    axes.plot([0, 1], [0, 1], color="red", marker="o", label="a")
    axes.plot([0, 1], [1, 0], color="red", marker="o", label="b")
    axes.legend(loc="center")
    figure.savefig(tmp_path / "bad.png")
    with pytest.raises(AssertionError, match="legend covers"):
        check_readable(drawn[0])
    axes.get_legend().remove()
    with pytest.raises(AssertionError, match="look alike"):
        check_readable(drawn[0])
