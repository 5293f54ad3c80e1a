"""Routing inside your own PySpark code: `route` adds each message's queues to a DataFrame.

```python
from xroute.spark import route

routed = route(messages_df, "s3://bucket/definitions.json", exchange="events")
routed.where("size(queues) = 0 AND error IS NULL")  # unroutable
```

One row in, one row out, in the same order, with every input column kept: no message can be
lost by construction. The routing is `xroute.batch.BatchRouter`, proven equal to
`Topology.route_message`, run batch by batch on Arrow (``mapInArrow``), never a row UDF. The
topology travels inside the function itself (no ``SparkContext``), so a Spark Connect session
(``SparkSession.builder.remote("sc://host:15002")``) routes exactly as a classic one; each
Python worker builds its router once. The result is lazy and works on any DataFrame, batch or
streaming. `read_traces` gives RabbitMQ's own traces as such a DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from xroute.batch import BatchRouter
from xroute.definitions import read_definitions, with_profile
from xroute.errors import DatasetError
from xroute.pipeline.engine import PIPELINE_ENGINE
from xroute.pipeline.transform import (
    exchanges_of,
    properties_of,
    queue_names,
    reason,
    route_records,
)
from xroute.pipeline.worker import ShippedTopology
from xroute.topology import Topology

QUEUES, ERROR = "queues", "error"

__all__ = ["read_traces", "route"]


def read_traces(
    spark: Any, source: str, format: str | None = None, record_types: Any = ("publish",)
) -> Any:
    """A RabbitMQ trace as a DataFrame, one row a record (docs/traces.md): `xroute capture`'s
    files or the tracing plugin's logs, a file or a folder on any storage, read by the tasks.
    Publish records by default (``record_types=None``: deliveries and events too); their
    ``routing_key``, ``exchange``, ``headers`` and ``message_id`` are what `route` reads, and
    ``routed_queues`` is where the broker put each message."""
    from xroute.pipeline.trace_frame import read_trace_frame

    return read_trace_frame(spark, source, format, record_types)


def route(
    df: Any,
    topology: Topology | Mapping[str, Any] | str | Path,
    exchange: str | None = None,
    *,
    routing_key: str = "routing_key",
    exchange_column: str = "exchange",
    headers: str = "headers",
    vhost: str | None = None,
    engine: str = PIPELINE_ENGINE,
    queues_column: str = QUEUES,
    error_column: str = ERROR,
    rabbitmq: str | None = None,
) -> Any:
    """``df`` with two columns more: ``queues`` and ``error``.

    - ``queues`` (array<string>, never null): the queues the message reaches, sorted; empty
      when it is unroutable or refused.
    - ``error`` (string): null, unless the record is refused; then the library's typed error,
      ``ErrorType: message`` (e.g. ``InvalidRoutingKey: ...``).

    ``topology`` is a `Topology`, a parsed definitions export, or the path or URI of one
    (``vhost`` picks a virtual host). Each record is published to its ``exchange_column``
    value, else to ``exchange`` (a record with neither is refused). ``headers`` names an
    optional column: a map, a struct, or a JSON object as text. Columns absent from ``df``
    are taken as absent from every record (no headers; the default exchange). Columns named
    ``message_id``, ``correlation_id`` and ``timestamp`` are the messages' basic properties,
    for the exchange types that read them. ``rabbitmq`` is a version profile (a `Topology`
    brings its own).

    Raises `DatasetError` when ``df`` has no routing key column, names no exchange at all, or
    already has a column named like an output; `DefinitionsError` for a bad topology.
    """
    definitions = _definitions(topology, rabbitmq)
    if isinstance(topology, Topology):
        vhost = None  # the export of one Topology is one virtual host
    # Checked here, on the driver, so that a bad topology fails before any task runs.
    Topology.from_definitions(definitions, vhost=vhost, engine="reference")
    columns = list(df.columns)
    _check_columns(df.schema, routing_key, exchange_column, headers, exchange)
    for name in (queues_column, error_column):
        if name in columns:
            raise DatasetError(
                f"the DataFrame already has a column {name!r}; pass "
                f"{'queues_column' if name == queues_column else 'error_column'}= another name",
                name,
            )
    from pyspark.sql.types import ArrayType, StringType, StructField, StructType

    schema = StructType(
        [
            *df.schema.fields,
            StructField(queues_column, ArrayType(StringType(), False), False),
            StructField(error_column, StringType(), True),
        ]
    )
    function = _batch_function(
        ShippedTopology.of(definitions, vhost, engine),
        Columns(
            routing_key,
            exchange_column if exchange_column in columns else None,
            headers if headers in columns else None,
            exchange,
            queues_column,
            error_column,
        ),
    )
    return df.mapInArrow(function, schema)


@dataclass(frozen=True)
class Columns:
    """Where each record's routing fields are, the exchange of records without one, and the
    names of the two columns added."""

    key: str
    exchange: str | None  # None: the DataFrame has no exchange column
    headers: str | None  # None: no headers column
    default_exchange: str | None
    queues: str = QUEUES
    error: str = ERROR


def routes_of(router: BatchRouter, batch: pa.RecordBatch, columns: Columns) -> pa.RecordBatch:
    """``batch`` with its ``queues`` and ``error`` columns (see `route`)."""
    size = batch.num_rows
    keys = batch.column(columns.key)
    if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
        keys = keys.cast(pa.string())
    exchanges = exchanges_of(
        batch.column(columns.exchange) if columns.exchange else None,
        columns.default_exchange,
        size,
    )
    outcome = route_records(
        router,
        keys,
        exchanges,
        batch.column(columns.headers) if columns.headers else None,
        properties=properties_of(router, batch),
    )
    rows, queue_ids = outcome.delivery_rows, outcome.queue_ids
    order = np.lexsort((_name_ranks(router)[queue_ids], rows))  # each row's queues by name
    offsets = np.zeros(size + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=size), out=offsets[1:])
    queues = pa.ListArray.from_arrays(
        pa.array(offsets),
        queue_names(router).take(pa.array(queue_ids[order])),
        type=pa.list_(pa.field("element", pa.string(), nullable=False)),
    )
    errors: list[str | None] = [None] * size
    for row, error in outcome.errors.items():
        errors[row] = reason(error)
    return pa.RecordBatch.from_arrays(
        [*batch.columns, queues, pa.array(errors, pa.string())],
        names=[*batch.schema.names, columns.queues, columns.error],
    )


def _batch_function(
    topology: ShippedTopology, columns: Columns
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def route_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        router = topology.router()
        for batch in batches:
            yield routes_of(router, batch, columns)

    return route_batches


_RANKS: dict[int, tuple[BatchRouter, np.ndarray]] = {}


def _name_ranks(router: BatchRouter) -> np.ndarray:
    """Each queue id's rank in name order, computed once per router."""
    cached = _RANKS.get(id(router))
    if cached is None or cached[0] is not router:
        ranks = np.empty(len(router.queues), dtype=np.int64)
        ranks[np.argsort(np.array(router.queues, dtype=object), kind="stable")] = np.arange(
            len(router.queues)
        )
        cached = _RANKS[id(router)] = (router, ranks)
    return cached[1]


def _definitions(
    topology: Topology | Mapping[str, Any] | str | Path, rabbitmq: str | None
) -> dict[str, Any]:
    # The profile travels with the definitions to the workers (xroute.definitions.PROFILE_KEY).
    if isinstance(topology, Topology):
        return dict(with_profile(topology.to_definitions(), rabbitmq or topology.profile.name))
    return dict(with_profile(read_definitions(topology), rabbitmq))


def _check_columns(
    schema: Any, key: str, exchange_column: str, headers: str, exchange: str | None
) -> None:
    from pyspark.sql.types import MapType, StringType, StructType

    columns = [field.name for field in schema.fields]
    if key not in columns:
        raise DatasetError(
            f"the DataFrame has no routing key column {key!r}; its columns are {columns} "
            "(pass routing_key= to name another)",
            key,
        )
    if exchange_column not in columns and exchange is None:
        raise DatasetError(
            f"the DataFrame has no {exchange_column!r} column and no exchange= was given: "
            "name the exchange messages are published to",
            exchange_column,
        )
    if headers in columns:
        kind = schema[headers].dataType
        if not isinstance(kind, (StringType, MapType, StructType)):
            raise DatasetError(
                f"column {headers!r} must be a map, a struct or a JSON object as text, not "
                f"{kind.simpleString()}",
                headers,
            )
