"""``xroute bench stream``: sustained throughput with a backlog, latency at half of it."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from xroute._show import console as user_console
from xroute.cli.bench import bench


@bench.command("stream")
@click.option(
    "--source",
    type=click.Choice(["files", "rabbitmq-stream"]),
    default="files",
    show_default=True,
    help="files: Parquet files landing in a folder. rabbitmq-stream: a private RabbitMQ node "
    "with the stream plugin; msgs/s read and routed into Delta beside the bare rstream client, "
    "at 1 and 2 cores, and the lag over time.",
)
@click.option(
    "--messages",
    type=click.IntRange(min=10),
    default=50_000,
    show_default=True,
    help="rabbitmq-stream: messages published into the stream.",
)
@click.option(
    "--files", type=click.IntRange(min=3), default=12, show_default=True, help="Backlog files."
)
@click.option(
    "--per-file",
    type=click.IntRange(min=1),
    default=50_000,
    show_default=True,
    help="Messages per file.",
)
@click.option(
    "--max-files", type=click.IntRange(min=1), default=3, show_default=True, help="Files per batch."
)
@click.option(
    "--queues", type=click.IntRange(min=1), default=10, show_default=True, help="Queues (fan-out)."
)
@click.option(
    "--latency-seconds",
    type=click.FloatRange(min=5),
    default=40.0,
    show_default=True,
    help="How long files land in the latency run.",
)
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the results (default: bench-results/stream, or "
    "bench-results/rabbitmq-stream).",
)
def bench_stream(
    source: str,
    messages: int,
    files: int,
    per_file: int,
    max_files: int,
    queues: int,
    latency_seconds: float,
    master: str,
    out: Path | None,
) -> None:
    """Messages/s of `xroute stream` with a backlog, beside the batch job; latency p50/p99.
    With --source rabbitmq-stream: from RabbitMQ streams, beside the bare rstream client."""
    console = user_console()
    if source == "rabbitmq-stream":
        _from_broker(messages, out or Path("bench-results/rabbitmq-stream"), console)
        return
    out = out or Path("bench-results/stream")
    from xroute.bench.stream import StreamBench, run_benchmark

    results = run_benchmark(
        StreamBench(
            files=files,
            per_file=per_file,
            max_files=max_files,
            queues=queues,
            latency_seconds=latency_seconds,
            master=master,
        ),
        out,
        say=lambda text: console.print(f"[dim]{text}", highlight=False),
    )
    table = Table(title=f"xroute bench stream ({master}; {results['machine']})")
    table.add_column("measure")
    table.add_column("value", justify="right")
    backlog, lat = results["backlog"], results["latency"]
    table.add_row("stream, sustained messages/s", f"{backlog['messages_per_s']:,.0f}")
    table.add_row("stream, sustained delivery rows/s", f"{backlog['delivery_rows_per_s']:,.0f}")
    batch_rate = results["batch_job"]["messages_per_s"]
    table.add_row("batch job, same files, messages/s", f"{batch_rate:,.0f}")
    table.add_row("stream / batch job", f"{results['stream_vs_batch_job']:.2f}")
    table.add_row("deliveries per message (fan-out)", f"{results['deliveries_per_message']}")
    arrival = lat["arrival_messages_per_s"]
    table.add_row(f"latency p50 at {arrival:,.0f} msg/s", f"{lat['p50_s']:.2f} s")
    table.add_row(f"latency p99 ({lat['files']} files)", f"{lat['p99_s']:.2f} s")
    console.print(table)
    console.print(f"results in {out}/results.json and {out}/stream.png")


def _from_broker(messages: int, out: Path, console: object) -> None:
    """``--source rabbitmq-stream``: the measurements of `xroute.bench.rabbitmq_stream`."""
    from xroute.bench.rabbitmq_stream import run_benchmark
    from xroute.extras import require

    require("rstream", "pyspark", "deltalake", what="xroute bench stream --source rabbitmq-stream")
    results = run_benchmark(
        messages, [1, 2], out, say=lambda text: console.print(f"[dim]{text}", highlight=False)
    )
    table = Table(title=f"xroute bench stream --source rabbitmq-stream ({messages:,} messages)")
    table.add_column("measure")
    table.add_column("msgs/s", justify="right")
    table.add_row("bare rstream client (the ceiling)", f"{results['rstream_msgs_per_s']:,.0f}")
    table.add_row("xroute's reader, no Spark", f"{results['xroute_reader_msgs_per_s']:,.0f}")
    for cores in (1, 2):
        run = results[f"spark_local_{cores}"]
        table.add_row(f"Spark local[{cores}]: read", f"{run['read_msgs_per_s']:,.0f}")
        table.add_row(f"Spark local[{cores}]: read and route",
                      f"{run['read_and_route_msgs_per_s']:,.0f}")
        table.add_row(f"Spark local[{cores}]: xroute stream into Delta",
                      f"{run['into_delta']['msgs_per_s']:,.0f}")
    console.print(table)  # type: ignore[attr-defined]
    console.print(f"results in {out}/rabbitmq_stream.json and {out}/rabbitmq_stream.png")  # type: ignore[attr-defined]
