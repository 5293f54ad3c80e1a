"""xroute's DataFrame steps run in one Python task: read, route, write without Spark between.

Each of `xroute.spark.read_messages`, `xroute.spark.route` and `xroute.spark.write` is a
batch function over Arrow (``mapInArrow``). Chained as plain DataFrames, every step would hand
its batches back to the JVM and take them again: an array of queue names per record, converted
twice, costs more than the routing itself (`xroute bench pipeline`). So each DataFrame an xroute
step returns remembers the frame it started from and the steps on it (`Staged`), and the next
xroute step runs them all, with itself, in one ``mapInArrow`` over that first frame. Any other
operation makes a new DataFrame that remembers nothing: xroute's next step then starts from it,
the same records, one more trip through the JVM.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from xroute.pipeline.transform import RouteColumns, route_columns
from xroute.spark.worker import ShippedTopology, timed

ATTRIBUTE = "_xroute_staged"


@dataclass
class Tally:
    """What the steps of one Python task share besides the batches."""

    to_spark: bool  # the last step's batches go back to Spark: plain types, no dictionaries
    hits: dict[str, np.ndarray] = field(default_factory=dict)  # by queues column: per binding
    rows_seen: dict[str, int] = field(default_factory=dict)  # rows named so far, per file
    clock: dict[str, float] = field(
        default_factory=lambda: {"setup": 0.0, "read": 0.0, "route": 0.0, "write": 0.0}
    )


Step = Callable[[Iterator[pa.RecordBatch], Tally], Iterator[pa.RecordBatch]]


@dataclass(frozen=True)
class RouteStep:
    """`xroute.spark.route` as a step: `route_columns` over each batch, the router built once
    per worker process (`ShippedTopology`)."""

    topology: ShippedTopology
    columns: RouteColumns

    def __call__(self, batches: Iterator[pa.RecordBatch], tally: Tally) -> Iterator[pa.RecordBatch]:
        # Not a generator itself: the router and the hits are there for the next step at once.
        router = self.topology.router()
        hits = tally.hits.setdefault(self.columns.queues, np.zeros(len(router.bindings), np.int64))
        routed = (
            route_columns(router, batch, self.columns, hits, dictionary=not tally.to_spark)
            for batch in batches
        )
        return timed(routed, tally.clock, "route")


@dataclass(frozen=True)
class Staged:
    """The first frame of a chain of xroute steps, the steps, its record count when known
    without Spark (the Parquet footers of the pyarrow reader), and the path it was read from
    (which `write` keeps apart from its output)."""

    base: Any
    steps: tuple[Step, ...] = ()
    rows: int | None = None
    source: str | None = None

    def then(self, step: Step, schema: Any) -> Any:
        """The DataFrame of these steps and ``step``: one ``mapInArrow`` over the base."""
        staged = Staged(self.base, (*self.steps, step), self.rows, self.source)
        frame = self.base.mapInArrow(batch_function(staged.steps), schema)
        frame.__dict__[ATTRIBUTE] = staged  # __dict__: a DataFrame's attributes are its columns
        return frame

    def route_steps(self) -> list[RouteStep]:
        """The routing steps, first to last."""
        return [step for step in self.steps if isinstance(step, RouteStep)]


def staged_of(frame: Any) -> Staged:
    """How ``frame`` was made by xroute steps; a frame of its own if not by them."""
    found = frame.__dict__.get(ATTRIBUTE)
    return found if isinstance(found, Staged) else Staged(frame)


def run_steps(
    steps: tuple[Step, ...], batches: Iterator[pa.RecordBatch], tally: Tally
) -> Iterator[pa.RecordBatch]:
    """The batches through each step in turn, lazily."""
    for step in steps:
        batches = step(batches, tally)
    return batches


def batch_function(
    steps: tuple[Step, ...],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function for ``mapInArrow``: the steps, their last batches as Spark takes them."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in run_steps(steps, batches, Tally(to_spark=True)):
            yield plain(batch)

    return run


def plain(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with its dictionary columns decoded: Spark takes plain values back."""
    if not any(pa.types.is_dictionary(t) for t in batch.schema.types):
        return batch
    columns = [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in batch.columns]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)
