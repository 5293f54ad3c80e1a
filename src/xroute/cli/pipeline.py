"""``xroute pipeline``: route a message dataset on Spark and account for every message."""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext

import click

from xroute._show import console as user_console
from xroute.cli.app import cli, quiet_interrupts
from xroute.cli.options import (
    check_session_options,
    column_options,
    definitions_option,
    rabbitmq_option,
    remote_option,
    resolve_definitions,
    table_format_option,
    vhost_option,
)
from xroute.engines import ENGINES
from xroute.extras import require
from xroute.pipeline.engine import PIPELINE_ENGINE
from xroute.sources.definitions import with_profile
from xroute.spark.pyarrow_reader import READERS


def _columns(text: str | None) -> tuple[str, ...]:
    return tuple(name.strip() for name in (text or "").split(",") if name.strip())


@cli.command()
@definitions_option
@vhost_option
@click.option(
    "--messages",
    "-m",
    required=True,
    help="The message dataset: a Parquet, JSON Lines or CSV file, or a folder of them; a local "
    "path or a URI (s3://bucket/prefix/, gs://, hdfs://, abfs://, file://); or a range of "
    "RabbitMQ streams: rabbitmq-stream://user@host:5552/vhost?stream=NAME&start=first&end=latest "
    "(or ?pattern=REGEX[&management=http://host:15672] for the streams it matches now) "
    "(password from RABBITMQ_PASSWORD).",
)
@click.option(
    "--out",
    "-o",
    required=True,
    help="Output folder: a local path or a URI. Complete when OUT/_SUCCESS exists.",
)
@click.option("--exchange", "-e", default=None, help="Exchange for records with no 'exchange'.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "parquet", "json", "csv", "firehose", "rabbitmq-tracing"]),
    default="auto",
    show_default=True,
    help="Dataset format. firehose: xroute capture's files; rabbitmq-tracing: the tracing "
    "plugin's json or text logs (publish records are routed, deliveries and events counted "
    "apart; docs/traces.md). auto: a trace when the first file certainly is one, else from "
    "the file suffixes.",
)
@click.option(
    "--master",
    default=None,
    help="Spark master URL (default: local[*,3], every core and 3 tries per task; or "
    "spark-submit's).",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace an earlier xroute output in OUT (only the files its _SUCCESS names; any "
    "other file stays, and a folder that holds no xroute output is never written).",
)
@click.option(
    "--keep-columns", default=None, metavar="A,B", help="Input columns to copy into deliveries."
)
@click.option(
    "--engine",
    type=click.Choice(sorted(ENGINES)),
    default=PIPELINE_ENGINE,
    show_default=True,
    help="Topic matching engine (the batch kernel suits a pipeline: many keys, fixed bindings).",
)
@click.option(
    "--reader",
    type=click.Choice(READERS),
    default="auto",
    show_default=True,
    help="Who reads Parquet input: each task with pyarrow (any storage pyarrow reads), or "
    "Spark's JVM reader (any storage Spark's Hadoop connectors read). auto: "
    "pyarrow where it reads the dataset as Spark would (not key=value folders, mixed schemas "
    "or types Spark reads by rules of its own), Spark otherwise.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar (default: when stderr is a terminal).",
)
@rabbitmq_option
@column_options
@remote_option
@table_format_option
def pipeline(
    definitions: str,
    vhost: str | None,
    messages: str,
    out: str,
    exchange: str | None,
    fmt: str,
    master: str | None,
    remote: str | None,
    table_format: str,
    overwrite: bool,
    keep_columns: str | None,
    engine: str,
    reader: str,
    progress: bool | None,
    rabbitmq: str | None,
    key_column: str,
    exchange_column: str,
    headers_column: str,
) -> None:
    """Route every message of a dataset through a topology, on Spark.

    Writes OUT/deliveries (message_id, queue), OUT/unroutable, OUT/rejected (with a reason),
    OUT/summary.json, OUT/summary.png and, last, OUT/_SUCCESS; and prints the summary. The run
    fails, leaving no output, unless input = delivered + unroutable + rejected. Storage
    credentials come from the environment (for S3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    AWS_ENDPOINT_URL, AWS_REGION), on the driver and on every executor.
    """
    check_session_options(master, remote)
    require("pyspark", "pandas", "matplotlib", what="xroute pipeline")
    from xroute.pipeline.summary import summary_tables
    from xroute.spark.io import Columns
    from xroute.spark.job import PipelineOptions, run_pipeline
    from xroute.spark.preflight import check_pipeline
    from xroute.spark.session import start_spark

    console = user_console()
    options = PipelineOptions(
        definitions=with_profile(resolve_definitions(definitions, vhost), rabbitmq),
        messages=messages,
        out=out,
        exchange=exchange,
        format=fmt,
        overwrite=overwrite,
        keep_columns=_columns(keep_columns),
        engine=engine,
        table_format=table_format,
        vhost=vhost,
        reader=reader,
        progress=sys.stderr.isatty() if progress is None else progress,
        columns=Columns(key_column, exchange_column, headers_column),
    )
    options = check_pipeline(options)  # before Spark starts: a mistake costs a second
    if options.broker_range is not None:
        from xroute.spark.broker_input import describe

        console.print(describe(options.broker_range), highlight=False, soft_wrap=True)
    started = time.perf_counter()
    with console.status("starting Spark", spinner="dots") if options.progress else nullcontext():
        spark = start_spark(master, remote=remote)
    quiet_interrupts()
    session_start = time.perf_counter() - started
    summary = run_pipeline(spark, options, session_start_s=session_start)
    for table in summary_tables(summary):
        console.print(table)
    console.print(
        f"outputs in {out.rstrip('/')}/: deliveries/ unroutable/ rejected/ summary.json "
        "summary.png _SUCCESS"
    )
