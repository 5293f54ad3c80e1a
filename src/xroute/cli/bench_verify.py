"""``xroute bench verify``: verify on a trace beside the pipeline on the same messages."""

from __future__ import annotations

from pathlib import Path

import click

from xroute.cli.bench import bench


@bench.command("verify")
@click.option("--messages", "count", type=click.IntRange(min=1), default=2_000_000,
              show_default=True, help="Messages in the workload.")
@click.option("--bindings", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Binding keys of the seed mix.")
@click.option("--queues", type=click.IntRange(min=1), default=10, show_default=True,
              help="Queues the bindings are spread over.")
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option("--data", type=click.Path(file_okay=False, path_type=Path),
              default=Path("data/bench-pipeline"), show_default=True,
              help="Where the generated workload and its trace are cached.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("bench-results/verify"), show_default=True,
              help="Folder for results.json and verify.png.")
def bench_verify(count: int, bindings: int, queues: int, master: str, data: Path, out: Path) -> None:
    """Measure `xroute verify` against `xroute pipeline` on the same messages (local[2])."""
    from xroute.bench.pipeline import Workload
    from xroute.bench.verify import run_benchmark

    results = run_benchmark(Workload(count, bindings, queues), master, data, out, click.echo)
    click.echo(
        f"pipeline {results['pipeline']['messages_per_s']:,} msg/s, verify "
        f"{results['verify']['messages_per_s']:,} msg/s: verify costs "
        f"{results['verify_over_pipeline']}x the pipeline (goal: at most 1.3x); {out}/results.json"
    )
