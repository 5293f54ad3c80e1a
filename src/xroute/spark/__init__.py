"""Everything of xroute that touches Spark, built on the pure batch layer `xroute.pipeline`.

Routing inside your own PySpark code: `route` adds each message's queues to a DataFrame.

```python
from xroute.spark import route

routed = route(messages_df, "s3://bucket/definitions.json", exchange="events")
routed.where("size(queues) = 0 AND error IS NULL")  # unroutable
```

One row in, one row out, in the same order, with every input column kept: no message can be
lost by construction. The routing is `xroute.core.batch.BatchRouter`, proven equal to
`Topology.route_message`, run batch by batch on Arrow (``mapInArrow``), never a row UDF. The
topology travels inside the function itself (no ``SparkContext``), so a Spark Connect session
(``SparkSession.builder.remote("sc://host:15002")``) routes exactly as a classic one; each
Python worker builds its router once. The result is lazy and works on any DataFrame, batch or
streaming. `read_traces` gives RabbitMQ's own traces as such a DataFrame.

The modules: `session` (start Spark, classic or Connect), `io` and `pyarrow_reader` (read a
dataset), `steps` (xroute's DataFrame steps, run in one task), `worker` (what each task runs:
route with `xroute.pipeline.transform.route_columns`, write the parts, return a manifest),
`read_write` (`read_messages`, `write`), `job` (``xroute pipeline``), `stream`, `diff`, `verify`,
`trace_frame`, `trace_input`, `preflight`, `progress`, `submit` (for ``spark-submit``).

`write` publishes a routed DataFrame as the pipeline's three outputs (deliveries, unroutable,
rejected; Parquet folders or Delta tables) with xroute's commit and its proof that no message
was lost, written by the tasks. ``write(route(read_messages(spark, path), ...), out)`` is
``xroute pipeline``: the steps run in one Python task (`xroute.spark.steps`), at the job's
speed (`xroute bench pipeline`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xroute.core.errors import DatasetError
from xroute.core.topology import Topology
from xroute.pipeline.engine import PIPELINE_ENGINE
from xroute.pipeline.transform import ERROR, QUEUES, RouteColumns
from xroute.sources.definitions import read_definitions, with_profile
from xroute.spark.steps import RouteStep, staged_of
from xroute.spark.worker import ShippedTopology

__all__ = ["read_messages", "read_traces", "register", "route", "write"]


def read_traces(
    spark: Any, source: str, format: str | None = None, record_types: Any = ("publish",)
) -> Any:
    """A RabbitMQ trace as a DataFrame, one row a record (docs/traces.md): `xroute capture`'s
    files or the tracing plugin's logs, a file or a folder on any storage, read by the tasks.
    Publish records by default (``record_types=None``: deliveries and events too); their
    ``routing_key``, ``exchange``, ``headers`` and ``message_id`` are what `route` reads, and
    ``routed_queues`` is where the broker put each message."""
    from xroute.spark.trace_frame import read_trace_frame

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
    optional column: a map, a struct, a JSON object as text, or an AMQP field table as bytes
    (a RabbitMQ stream's ``amqp_headers``: typed). Columns absent from ``df``
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
    step = RouteStep(
        ShippedTopology.of(definitions, vhost, engine),
        RouteColumns(
            routing_key,
            exchange_column if exchange_column in columns else None,
            headers if headers in columns else None,
            exchange,
            queues_column,
            error_column,
        ),
    )
    # Run in the same Python task as the xroute steps before it and after it.
    return staged_of(df).then(step, schema)


def read_messages(spark: Any, path: str) -> Any:
    """The messages of a Parquet file or folder (any storage) as a DataFrame, read as
    ``xroute pipeline`` reads them: by pyarrow in the tasks where it reads them as Spark would
    (`xroute.spark.pyarrow_reader`), else by Spark; a record without a ``message_id`` is
    named ``file:row``. Routed by `route` and written by `write`, the three run in one task."""
    from xroute.spark.read_write import read_messages as read

    return read(spark, path)


def write(
    routed: Any,
    out: str,
    *,
    table_format: str = "parquet",
    overwrite: bool = False,
    keep_columns: tuple[str, ...] = (),
    queues_column: str = QUEUES,
    error_column: str = ERROR,
) -> dict[str, Any]:
    """Publish a DataFrame `route` made as ``xroute pipeline``'s outputs under ``out``, and
    return the summary (also in OUT/summary.json).

    ``deliveries`` (message_id, queue, ``keep_columns``: one row per queue reached),
    ``unroutable`` and ``rejected`` (each record, with its ``reason``), as Parquet folders or
    Delta tables (``table_format="delta"``), written by the tasks with pyarrow and published
    with xroute's commit: only once ``input = delivered + unroutable + rejected`` is proven,
    ``_SUCCESS`` last; a failed write leaves nothing. A record without a ``message_id`` is
    named ``part-NNNNN:row`` (its partition and row).

    ``routed`` is `route`'s own result (the proof needs what was read, and the summary what
    each binding matched): the reading, the routing and the writing then run in the same
    tasks, one ``mapInArrow``. Raises `DatasetError` for any other frame, and the pipeline's
    errors (`OutputNotOurs`, `OutputOverlapsInput` for an ``out`` that is, holds or lies inside
    the path `read_messages` read, `PipelineFailed`, ...).
    """
    from xroute.spark.read_write import write_routed

    return write_routed(
        routed,
        out,
        table_format=table_format,
        overwrite=overwrite,
        keep_columns=tuple(keep_columns),
        queues_column=queues_column,
        error_column=error_column,
    )


def _definitions(
    topology: Topology | Mapping[str, Any] | str | Path, rabbitmq: str | None
) -> dict[str, Any]:
    # The profile travels with the definitions to the workers (xroute.sources.definitions.PROFILE_KEY).
    if isinstance(topology, Topology):
        return dict(with_profile(topology.to_definitions(), rabbitmq or topology.profile.name))
    return dict(with_profile(read_definitions(topology), rabbitmq))


def _check_columns(
    schema: Any, key: str, exchange_column: str, headers: str, exchange: str | None
) -> None:
    from pyspark.sql.types import BinaryType, MapType, StringType, StructType

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
        if not isinstance(kind, (StringType, MapType, StructType, BinaryType)):
            raise DatasetError(
                f"column {headers!r} must be a map, a struct, a JSON object as text or an "
                "AMQP field table (binary), not "
                f"{kind.simpleString()}",
                headers,
            )


def register(spark: Any, password: str | None = None) -> None:
    """Register xroute's Spark data sources with ``spark`` (classic or Connect): the
    ``rabbitmq-stream`` format (`xroute.spark.rabbitmq_stream`), so that
    ``spark.read.format("rabbitmq-stream")`` and ``spark.readStream.format(...)`` read
    RabbitMQ streams. The stream password is ``password``, else ``RABBITMQ_PASSWORD`` as it is
    here and now (the source runs in Spark's workers, which do not see this environment); a
    source's ``password`` option wins over both."""
    import os

    from xroute.spark.rabbitmq_stream import with_password

    secret = password if password is not None else os.environ.get("RABBITMQ_PASSWORD")
    spark.dataSource.register(with_password(secret))
