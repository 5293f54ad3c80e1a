"""``xroute diff``: what a topology change would do, statically and to a log's real traffic."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from xroute._show import console as user_console
from xroute.cli.app import EXIT_DIFF_CHANGED, EXIT_OK, cli, quiet_interrupts
from xroute.cli.options import (
    check_session_options,
    column_options,
    rabbitmq_option,
    remote_option,
    resolve_definitions,
    vhost_option,
)
from xroute.core.topology import Topology
from xroute.engines import ENGINES
from xroute.extras import require
from xroute.pipeline.engine import PIPELINE_ENGINE
from xroute.sources.definitions import with_profile
from xroute.tools.diff import StaticDiff, static_diff

SHOWN_LINES = 40  # static differences printed; diff.json has them all


@cli.command()
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@vhost_option
@click.option(
    "--messages",
    "-m",
    default=None,
    help="A message log (Parquet, JSON Lines or CSV file or folder; a local path or a storage "
    "URI) to route through both, on Spark.",
)
@click.option(
    "--out", "-o", default=None,
    help="Output folder, a local path or a storage URI (s3://, gs://, ...): diff.json, and "
    "with -m changes/ (Parquet) and diff.png; _SUCCESS last.",
)
@click.option("--exchange", "-e", default=None, help="Exchange for records with no 'exchange'.")
@click.option(
    "--format", "fmt",
    type=click.Choice(["auto", "parquet", "json", "csv", "firehose", "rabbitmq-tracing"]),
    default="auto", show_default=True,
    help="Message log format; firehose and rabbitmq-tracing read RabbitMQ's own traces (publish "
    "records; deliveries and events counted apart). auto: a trace when the first file "
    "certainly is one, else from the file suffixes.",
)
@click.option(
    "--fail-on", type=click.Choice(["change", "lost"]), default="change", show_default=True,
    help="Exit 1 on any change, or only when some message loses a queue (without -m: when a "
    "change could lose one).",
)
@click.option("--samples", type=click.IntRange(min=0), default=5, show_default=True,
              help="Changed messages explained binding by binding.")
@click.option("--master", default=None, help="Spark master URL (default: local[*]).")
@click.option(
    "--overwrite", is_flag=True,
    help="Replace an earlier xroute output in OUT (only the files its _SUCCESS names).",
)
@click.option(
    "--engine", type=click.Choice(sorted(ENGINES)), default=PIPELINE_ENGINE, show_default=True,
    help="Topic matching engine on Spark.",
)
@click.option("--json", "as_json", is_flag=True, help="Print diff.json instead of tables.")
@rabbitmq_option
@column_options
@remote_option
def diff(
    old: str,
    new: str,
    vhost: str | None,
    messages: str | None,
    out: str | None,
    exchange: str | None,
    fmt: str,
    fail_on: str,
    samples: int,
    master: str | None,
    remote: str | None,
    overwrite: bool,
    engine: str,
    as_json: bool,
    rabbitmq: str | None,
    key_column: str,
    exchange_column: str,
    headers_column: str,
) -> None:
    """Compare topology OLD with NEW and, with -m, every message of a log routed through both.

    OLD and NEW are RabbitMQ definitions exports (JSON), or a live broker's management API
    http(s)://user@host:15672 (password from RABBITMQ_PASSWORD, else asked).

    Exit 0 when nothing changes, 1 when something does (--fail-on lost: only when some message
    loses a queue), 2 on bad input.
    """
    check_session_options(master, remote)
    if messages is not None and out is None:
        raise click.UsageError("--messages needs --out: the changed messages are written there")
    if messages is not None:
        require("pyspark", "pandas", "matplotlib", what="xroute diff -m")
    old_defs = with_profile(resolve_definitions(old, vhost), rabbitmq)
    new_defs = with_profile(resolve_definitions(new, vhost), rabbitmq)
    before = Topology.from_definitions(old_defs, vhost=vhost)
    after = Topology.from_definitions(new_defs, vhost=vhost)
    static = static_diff(before, after)
    if messages is not None:
        from xroute.spark.io import Columns
        from xroute.spark.preflight import check_diff

        columns = Columns(key_column, exchange_column, headers_column)
        # Before Spark starts; a broker's streams: the range pinned, and said.
        broker_range = check_diff(messages, fmt, out, overwrite, (old, new), columns)
        if broker_range is not None:
            from xroute.spark.broker_input import describe

            click.echo(describe(broker_range), err=as_json)
    # URLs are safe to record: they never hold a password (parse_management_url refuses one).
    report: dict[str, Any] = {"old": old, "new": new, "static": static.to_dict()}
    traffic = None
    if messages is not None:
        from xroute.spark.diff import DiffOptions, run_diff
        from xroute.spark.session import start_spark

        options = DiffOptions(
            old=old_defs,
            new=new_defs,
            messages=messages, out=out, exchange=exchange, format=fmt, vhost=vhost,
            engine=engine, overwrite=overwrite, samples=samples, columns=columns,
            broker_range=broker_range,
        )
        report["messages"] = messages
        spark = start_spark(master, remote=remote)
        quiet_interrupts()
        traffic = run_diff(spark, options, report)
        report["traffic"] = traffic.to_dict()
    elif out is not None:
        from xroute.spark.diff import publish_report

        publish_report(report, out, overwrite, inputs=(old, new))
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
    else:
        _print(static, report.get("traffic"), user_console(soft_wrap=True))
    if traffic is not None:
        failing = traffic.lost_messages > 0 if fail_on == "lost" else traffic.changed > 0
    else:
        failing = static.may_lose if fail_on == "lost" else static.changed
    sys.exit(EXIT_DIFF_CHANGED if failing else EXIT_OK)


def _print(static: StaticDiff, traffic: dict[str, Any] | None, console: Console) -> None:
    lines = list(static.lines())
    console.print(f"[bold]topology[/]: {len(lines)} difference{'s' if len(lines) != 1 else ''}")
    for line in lines[:SHOWN_LINES]:
        console.print("  " + escape(line))
    if len(lines) > SHOWN_LINES:
        console.print(f"  ... and {len(lines) - SHOWN_LINES} more (diff.json has them all)")
    if traffic is None:
        return
    counts = traffic["counts"]
    table = Table(title=f"traffic: {counts['messages']:,} messages")
    table.add_column("outcome")
    table.add_column("messages", justify="right")
    for name in ("changed", "unchanged", "gained_a_queue", "lost_a_queue", "became_unroutable",
                 "became_routable", "refused_before", "refused_after"):
        table.add_row(name.replace("_", " "), f"{counts[name]:,}")
    for kind, n in traffic.get("trace_records_skipped", {}).items():
        table.add_row(f"trace {kind} records (not routed)", f"{n:,}")
    console.print(table)
    if traffic["per_queue"]:
        queues = Table(title="per queue (largest change first)")
        for column in ("queue", "gained", "lost"):
            queues.add_column(column, justify="left" if column == "queue" else "right")
        for row in traffic["per_queue"][:15]:
            queues.add_row(escape(row["queue"]), f"+{row['gained']:,}", f"-{row['lost']:,}")
        console.print(queues)
    if traffic["top_changed_keys"]:
        keys = Table(title="top changed routing keys")
        for column in ("exchange", "routing key", "messages"):
            keys.add_column(column, justify="right" if column == "messages" else "left")
        for row in traffic["top_changed_keys"]:
            keys.add_row(escape(repr(row["exchange"])), escape(repr(row["routing_key"])), f"{row['messages']:,}")
        console.print(keys)
    for sample in traffic["samples"]:
        console.print(
            f"[bold]message {escape(str(sample['message_id']))}[/]: "
            f"{escape(repr(sample['exchange']))} {escape(repr(sample['routing_key']))}"
        )
        if "error" in sample:
            console.print(f"  {escape(sample['error'])}")
            continue
        for how, colour in (("lost", "red"), ("gained", "green")):
            for queue, reasons in sample[how].items():
                console.print(f"  [{colour}]{how}[/] {escape(repr(queue))}")
                for reason in reasons:
                    console.print(f"    {escape(reason)}")
