"""``xroute capture`` and ``xroute verify``: RabbitMQ's own traces in, and checked."""

from __future__ import annotations

import json
import signal
import sys

import click

from xroute.cli.app import EXIT_OK, cli, quiet_interrupts
from xroute.cli.options import definitions_option, resolve_definitions, vhost_option
from xroute.extras import require

EXIT_DISAGREE = 1  # xroute verify: some message did not go where the broker put it


@cli.command()
@click.argument("url", metavar="AMQP_URL")
@click.option("--out", "-o", required=True,
              help="Folder for the Parquet files (a local path or a storage URI).")
@click.option("--events/--no-events", default=True, show_default=True,
              help="Capture the event exchange's topology changes too (rabbitmq_event_exchange).")
@click.option("--deliveries", is_flag=True, help="Capture deliver.# records too.")
@click.option("--queue", default=None,
              help="A named durable queue: what a capture that dies leaves unacknowledged waits "
              "there for the next one (default: a queue of the connection's own).")
@click.option("--roll-records", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Records per file at most.")
@click.option("--roll-seconds", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="Seconds a file stays open at most.")
@click.option("--roll-mb", type=click.FloatRange(min=0.001), default=64.0, show_default=True,
              help="Megabytes of records (payloads and about 256 bytes each) per file at most.")
@click.option("--max-records", type=click.IntRange(min=1), default=None,
              help="Stop after this many records.")
@click.option("--seconds", type=click.FloatRange(min=0), default=None, help="Stop after this long.")
@click.option("--idle-seconds", type=click.FloatRange(min=0), default=None,
              help="Stop when nothing has arrived for this long.")
def capture(
    url: str, out: str, events: bool, deliveries: bool, queue: str | None, roll_records: int,
    roll_seconds: float, roll_mb: float, max_records: int | None, seconds: float | None,
    idle_seconds: float | None,
) -> None:
    """Capture a live broker's firehose (amq.rabbitmq.trace) into Parquet files in OUT.

    Switch the firehose on first: rabbitmqctl trace_on -p VHOST. Ctrl-C or SIGTERM stops the
    capture after writing and acknowledging what has arrived.
    """
    require("amqp", what="xroute capture")
    from xroute.traces.capture import Capture

    running = Capture(url, out, events=events, deliveries=deliveries, queue=queue,
                      roll_records=roll_records, roll_seconds=roll_seconds,
                      roll_bytes=int(roll_mb * (1 << 20)))

    def stop(signum: int, frame: object) -> None:
        running.stop()

    where = url.split("@")[-1]  # never the password
    click.echo(f"capturing the firehose of {where} into {out} (stop with Ctrl-C)", err=True)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        stats = running.run(max_records, seconds, idle_seconds)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        running.close()
    click.echo(f"captured {stats.records:,} records in {len(stats.files)} files to {out}")
    for reason in stats.skipped[:5]:
        click.echo(f"skipped: {reason}", err=True)


@cli.command()
@definitions_option
@vhost_option
@click.option("--messages", "-m", "traces", required=True,
              help="The trace: an xroute capture (Parquet or JSON Lines) or tracing-plugin "
              "log files (json or text), a file or a folder, local or a storage URI.")
@click.option("--out", "-o", required=True,
              help="Output folder: messages/ (a verdict per message), verify.json, verify.png, "
              "_SUCCESS last.")
@click.option("--format", "fmt", type=click.Choice(["firehose", "rabbitmq-tracing"]),
              default=None, help="The trace's format (default: detected).")
@click.option("--events", default=None,
              help="A capture holding the topology's changes (default: the trace's own events).")
@click.option("--base-at", type=click.Choice(["end", "start"]), default="end", show_default=True,
              help="Where the definitions export stands: taken after the capture, or before.")
@click.option("--samples", type=click.IntRange(min=0), default=5, show_default=True,
              help="Disagreeing messages explained exchange by exchange.")
@click.option("--master", default=None, help="Spark master URL (default: local[*]).")
@click.option("--overwrite", is_flag=True, help="Replace an earlier verify output in OUT.")
@click.option("--json", "as_json", is_flag=True, help="Print verify.json.")
def verify(
    definitions: str, vhost: str | None, traces: str, out: str, fmt: str | None,
    events: str | None, base_at: str, samples: int, master: str | None, overwrite: bool,
    as_json: bool,
) -> None:
    """Route every published message of a RabbitMQ trace with the definitions, on Spark, and
    compare with the queues the broker chose.

    Exit 0 when every message agrees, 1 when any disagrees (or routes to a missing or
    unsupported exchange), 2 on bad input.
    """
    require("pyspark", "pandas", "matplotlib", what="xroute verify")
    from xroute.spark.session import start_spark
    from xroute.spark.verify import VerifyOptions, prepare_verify, run_verify

    options = VerifyOptions(
        definitions=resolve_definitions(definitions, vhost), traces=traces, out=out,
        events=events, base_at=base_at, format=fmt, vhost=vhost, overwrite=overwrite,
        samples=samples,
    )
    prepared = prepare_verify(options)  # before Spark starts: a mistake costs a second
    spark = start_spark(master)
    quiet_interrupts()
    result = run_verify(spark, options, prepared)
    report = result.to_dict()
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
    else:
        counts = report["counts"]
        click.echo(
            f"{counts['agree']:,} of {counts['published']:,} published messages agree with the "
            f"broker; {counts['disagree']:,} disagree, {counts['missing_exchange']:,} to a "
            f"missing exchange, {counts['unsupported_exchange']:,} unsupported, "
            f"{counts['invalid']:,} invalid ({counts['deliveries']:,} deliveries and "
            f"{counts['events']:,} events not routed)"
        )
        for row in report["per_binding"][:10]:
            click.echo(f"  {row['messages']:>8,}  {row['binding']}")
        click.echo(f"written to {out}")
    sys.exit(EXIT_OK if result.agrees else EXIT_DISAGREE)
