"""What every seed experiment shares: scales, progress, timing, answer checks, memory, tables.

Timing follows `timeit`'s habits: the garbage collector is off inside a timed loop (it would
charge one experiment for another's garbage), and every answer is checked before it is timed.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

# "full" reproduces the seeds' sizes (scaled only where the report says so), "quick" is a
# reduced run of every experiment in under two minutes, "tiny" is for the test of the harness.
SCALES = ("full", "quick", "tiny")


class Progress(Protocol):
    """Where an experiment reports how far it got (the CLI shows a rich progress bar)."""

    def begin(self, title: str, steps: int) -> None:
        """Called when an experiment starts, with the number of steps it will report."""

    def step(self, what: str) -> None:
        """Called as each step begins (the one before it is then done); ``what`` names it."""


class NoProgress:
    """A `Progress` that shows nothing (library use, tests)."""

    def begin(self, title: str, steps: int) -> None:
        """Ignored."""

    def step(self, what: str) -> None:
        """Ignored."""


@dataclass
class Context:
    """What every experiment's ``run`` receives."""

    scale: str  # one of SCALES
    progress: Progress
    ghz: float | None = None  # this machine's clock, when known (OpenAMQ quotes per GHz)
    amqp_url: str | None = None  # a broker to use; None: start a private one when needed


class CheckFailed(AssertionError):
    """An xroute engine or exchange gave another answer than the reference before timing:
    a bug in xroute, never a benchmark result. Keeps the key and both answers."""

    def __init__(self, what: str, key: Any, expected: Any, actual: Any) -> None:
        super().__init__(
            f"{what}: wrong answer for {key!r}: expected {_short(expected)}, got {_short(actual)}"
        )
        self.what = what
        self.key = key
        self.expected = expected
        self.actual = actual

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Raised in a worker process (`xroute bench engines --shapes`), it crosses back whole.
        return CheckFailed, (self.what, self.key, self.expected, self.actual)


def _short(value: Any) -> str:
    if isinstance(value, (set, frozenset)):
        items = sorted(map(str, value))
        more = f" ... ({len(items)} in all)" if len(items) > 8 else ""
        return "{" + ", ".join(items[:8]) + more + "}"
    return repr(value)


def check_same(
    what: str, keys: Sequence[Any], expected: Sequence[Any], actual: Sequence[Any]
) -> int:
    """Raise `CheckFailed` at the first key whose answers differ; else the number checked."""
    for key, want, got in zip(keys, expected, actual, strict=True):
        if want != got:
            raise CheckFailed(what, key, want, got)
    return len(keys)


def wrong_routes(expected: Sequence[frozenset], actual: Sequence[frozenset]) -> int:
    """How many answers differ from the expected ones (peers are counted, not refused)."""
    return sum(1 for want, got in zip(expected, actual, strict=True) if set(want) != set(got))


@contextmanager
def quiet_gc() -> Iterator[None]:
    """Collect first, then keep the collector off while timing (as `timeit` does).

    Nested use collects only once, on the way in to the outermost: a full collection of a
    large heap costs more than many small timed loops (wrap a series of them in one).
    """
    was_on = gc.isenabled()
    if was_on:
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def seconds_per_item(function: Callable[[Any], Any], items: Sequence[Any]) -> float:
    """Mean wall time of ``function(item)`` over ``items`` (one call each)."""
    with quiet_gc():
        start = time.perf_counter()
        for item in items:
            function(item)
        elapsed = time.perf_counter() - start
    return elapsed / max(len(items), 1)


def seconds_of(function: Callable[[], Any]) -> tuple[float, Any]:
    """Wall time of one call of ``function``, and what it returned."""
    with quiet_gc():
        start = time.perf_counter()
        result = function()
        elapsed = time.perf_counter() - start
    return elapsed, result


def spread(samples: Sequence[float]) -> dict[str, float]:
    """Mean, standard deviation, min, max, median and the 5/25/75/95th percentiles."""
    ordered = sorted(samples)
    n = len(ordered)

    def percentile(p: float) -> float:
        return ordered[min(n - 1, max(0, math.ceil(p * n) - 1))]

    return {
        "n": n,
        "mean": statistics.fmean(ordered),
        "std": statistics.pstdev(ordered) if n > 1 else 0.0,
        "min": ordered[0],
        "max": ordered[-1],
        "median": statistics.median(ordered),
        "p5": percentile(0.05),
        "p25": percentile(0.25),
        "p75": percentile(0.75),
        "p95": percentile(0.95),
    }


def traced_bytes(build: Callable[[], Any]) -> tuple[int, Any]:
    """Python heap bytes still held after ``build()`` (NumPy buffers included), and its result.

    tracemalloc slows allocation down, so memory is measured on a separate build, never while
    timing.
    """
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = build()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, result


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> dict[str, float]:
    """Least-squares line through the points: slope, intercept and R² (1.0 is a straight line)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx if sxx else 0.0
    intercept = my - slope * mx
    total = sum((y - my) ** 2 for y in ys)
    residual = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys))
    return {"slope": slope, "intercept": intercept, "r2": 1 - residual / total if total else 1.0}


def table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], note: str = ""
) -> dict:
    """A table for the report: plain lists, so it survives results.json as it is."""
    return {"title": title, "columns": list(columns), "rows": [list(r) for r in rows], "note": note}


def us(seconds: float | None) -> float | None:
    """Seconds to microseconds, rounded for a table (None stays None)."""
    return None if seconds is None else round(seconds * 1e6, 3)
