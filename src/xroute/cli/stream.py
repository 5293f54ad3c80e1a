"""``xroute stream``: route files as they land in a folder, exactly once, on Spark."""

from __future__ import annotations

import re

import click

from xroute._show import console as user_console
from xroute.cli.app import cli
from xroute.cli.options import (
    check_session_options,
    column_options,
    rabbitmq_option,
    remote_option,
    table_format_option,
)
from xroute.cli.pipeline import _columns
from xroute.engines import ENGINES
from xroute.extras import require
from xroute.pipeline.engine import PIPELINE_ENGINE

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_interval(text: str) -> float:
    """``10s``, ``500ms``, ``2m``, ``1h`` (a bare number: seconds) as seconds."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", text)
    if not found or float(found.group(1)) <= 0:
        raise click.BadParameter(
            f"{text!r} is not a positive interval such as 10s, 500ms, 2m",
            param_hint="--trigger-interval",
        )
    return float(found.group(1)) * _UNITS[found.group(2) or "s"]


@cli.command()
@click.option(
    "--definitions", "-d", required=True, help="A RabbitMQ definitions export (JSON), path or URI."
)
@click.option("--vhost", default=None, help="Virtual host to read (default: the only one).")
@click.option(
    "--messages",
    "-m",
    "source",
    required=True,
    help="SOURCE: the folder where Parquet, JSON Lines or CSV files arrive (a local path or "
    "file://; Spark reads s3:// only with hadoop-aws on its classpath), or RabbitMQ streams: "
    "rabbitmq-stream://user@host:5552/vhost?stream=NAME[&start=first|next|OFFSET|TIME] "
    "or ?pattern=REGEX[&management=http://host:15672] (streams listed by the management API; "
    "new ones read from offset 0), [&reconnect=SECONDS] (how long to wait for a node that went "
    "away; 60) (password from RABBITMQ_PASSWORD).",
)
@click.option(
    "--out", "-o", required=True, help="Output folder: a local path or any URI (s3://, gs://...)."
)
@click.option(
    "--checkpoint", required=True, help="Spark's checkpoint folder (local path): keep it to resume."
)
@click.option("--exchange", "-e", default=None, help="Exchange for records with no 'exchange'.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "parquet", "json", "csv", "firehose", "rabbitmq-tracing"]),
    default="auto",
    show_default=True,
    help="File format. firehose: xroute capture's Parquet files (publish records routed, "
    "deliveries and events counted apart); rabbitmq-tracing is refused (its logs grow in "
    "place). auto: a capture when the first file present is one, else from the suffixes.",
)
@click.option(
    "--schema",
    default=None,
    metavar="DDL",
    help="The records' schema, e.g. 'routing_key string, exchange string, headers string' "
    "(default: taken from the files present at start).",
)
@click.option(
    "--max-files",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="At most this many new files per batch (maxFilesPerTrigger): a backlog is eaten in steps.",
)
@click.option(
    "--max-messages",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="From a broker's streams: at most this many messages per batch (maxRecordsPerTrigger; "
    "--available-now takes the whole backlog in one batch).",
)
@click.option(
    "--available-now",
    is_flag=True,
    help="Route every file present (every message stored, from a broker), then stop.",
)
@click.option(
    "--trigger-interval",
    default=None,
    metavar="10s",
    help="Start a batch at most this often (default: as soon as the last one ends).",
)
@click.option(
    "--reload-definitions",
    is_flag=True,
    help="Re-read the definitions file at each batch boundary; a change takes effect at the "
    "next batch and its batch id is recorded in the summary.",
)
@click.option(
    "--keep-columns", default=None, metavar="A,B", help="Input columns to copy into deliveries."
)
@click.option(
    "--engine",
    type=click.Choice(sorted(ENGINES)),
    default=PIPELINE_ENGINE,
    show_default=True,
    help="Topic matching engine.",
)
@click.option("--master", default=None, help="Spark master URL (default: local[*,3]).")
@rabbitmq_option
@column_options
@remote_option
@table_format_option
def stream(
    definitions: str,
    vhost: str | None,
    source: str,
    out: str,
    checkpoint: str,
    exchange: str | None,
    fmt: str,
    schema: str | None,
    max_files: int,
    max_messages: int,
    available_now: bool,
    trigger_interval: str | None,
    reload_definitions: bool,
    keep_columns: str | None,
    engine: str,
    master: str | None,
    rabbitmq: str | None,
    key_column: str,
    exchange_column: str,
    headers_column: str,
    remote: str | None,
    table_format: str,
) -> None:
    """Route files as they arrive in SOURCE (or messages as they are stored in RabbitMQ
    streams), each message exactly once through crashes.

    Each batch is written to OUT/<deliveries|unroutable|rejected>/batch_id=N/ and committed by
    OUT/_batches/N.json, written last; OUT/summary.json and summary.png are updated after each
    batch. Restart with the same --checkpoint to resume. Ctrl-C stops after the current batch.
    """
    check_session_options(master, remote)
    require("pyspark", "pandas", "matplotlib", what="xroute stream")
    from xroute.spark.io import Columns
    from xroute.spark.preflight import check_stream
    from xroute.spark.session import start_spark
    from xroute.spark.stream import StreamOptions, run_stream

    if available_now and trigger_interval is not None:
        raise click.UsageError("--available-now and --trigger-interval exclude each other")
    interval = parse_interval(trigger_interval) if trigger_interval is not None else None
    options = StreamOptions(
        definitions=definitions,
        source=source,
        out=out,
        checkpoint=checkpoint,
        exchange=exchange,
        format=fmt,
        schema=schema,
        max_files=max_files,
        max_messages=max_messages,
        available_now=available_now,
        trigger_seconds=interval,
        reload_definitions=reload_definitions,
        keep_columns=_columns(keep_columns),
        engine=engine,
        table_format=table_format,
        vhost=vhost,
        rabbitmq=rabbitmq,
        columns=Columns(key_column, exchange_column, headers_column),
    )
    found = check_stream(options)  # before Spark starts: a mistake costs a second
    console = user_console()
    if found is not None:
        console.print(found, highlight=False, soft_wrap=True)
    console.print(f"[dim]starting Spark; streaming {source} into {out}")
    spark = start_spark(master, remote=remote)
    summary = run_stream(
        spark, options, say=lambda line: console.print(line, highlight=False, soft_wrap=True)
    )
    counts = summary["counts"]
    console.print(
        f"[bold]{len(summary['batches'])} batches committed[/]: {counts['input']:,} messages, "
        f"{counts['deliveries']:,} deliveries, {counts['unroutable']:,} unroutable, "
        f"{counts['rejected']:,} rejected; summary in {out}/summary.json"
    )
    for kind, n in summary.get("trace_records_skipped", {}).items():
        console.print(f"trace {kind} records (not routed): {n:,}")
