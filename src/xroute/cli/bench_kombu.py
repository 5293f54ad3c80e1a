"""``xroute bench kombu``: publishing through kombu's memory and Redis transports with and
without xroute; writes results.json and PNG plots."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import click

from xroute.cli.bench import bench

EXIT_CHECK_FAILED = 1


@bench.command("kombu")
@click.option("--sizes", default="100,1000,10000", show_default=True, metavar="N,...",
              help="Topic binding counts.")
@click.option("--transports", default="memory,redis", show_default=True, metavar="NAME,...",
              help="kombu transports: memory, redis.")
@click.option("--max-messages", type=click.IntRange(min=10), default=3000, show_default=True,
              help="Messages per side, transport and size (fewer if --max-seconds ends first).")
@click.option("--max-seconds", type=click.FloatRange(min=0.1), default=6.0, show_default=True,
              help="Publishing time per side, transport and size.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("bench-results/kombu"), show_default=True,
              help="Folder for results.json and the PNG plots.")
def kombu(sizes: str, transports: str, max_messages: int, max_seconds: float, out: Path) -> None:
    """Publish through kombu's topic exchange with and without xroute.kombu.

    Redis is the one on 127.0.0.1:6379 (or XROUTE_REDIS_URL), else a private redis-server.
    Reports messages/s, the routing and table-read shares of publish time, and wrong routes
    (checked against Topology.route). Writes OUT/results.json and OUT/*.png.
    """
    from xroute.bench.kombu import TRANSPORTS, CheckFailed, Settings, run
    from xroute.bench.kombu_plots import write_plots
    from xroute.bench.redis import redis_server

    try:
        counts = [int(part.replace("_", "")) for part in sizes.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise click.BadParameter(f"{sizes!r} is not a list of binding counts like 100,1000")
    chosen = [name.strip() for name in transports.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(TRANSPORTS))
    if unknown or not chosen:
        raise click.BadParameter(f"unknown transport(s) {unknown}; known: {', '.join(TRANSPORTS)}")
    settings = Settings(sizes=counts, transports=chosen, max_messages=max_messages,
                        max_seconds=max_seconds)
    command = " ".join(["xroute bench kombu", f"--sizes {sizes}", f"--transports {transports}",
                        f"--max-messages {max_messages}", f"--max-seconds {max_seconds}",
                        f"--out {shlex.quote(str(out))}"])
    began = time.perf_counter()

    def report(line: str) -> None:
        click.echo(f"[{time.perf_counter() - began:7.1f} s] {line}", err=True)

    try:
        if "redis" in chosen:
            with redis_server() as url:
                results = run(settings, report, url, command)
        else:
            results = run(settings, report, None, command)
    except CheckFailed as error:
        click.echo(f"xroute: a check failed (a bug, not a result): {error}", err=True)
        sys.exit(EXIT_CHECK_FAILED)
    results["meta"]["seconds"] = round(time.perf_counter() - began, 1)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    plots = write_plots(results, out)
    for transport, by_size in results["ratios"].items():
        shown = ", ".join(f"{size}: {ratio:,.2f}x" for size, ratio in by_size.items())
        click.echo(f"{transport}: xroute / kombu messages/s  {shown}")
    click.echo(f"({results['meta']['note']})")
    click.echo(f"wrote {out / 'results.json'} and {len(plots)} plots")
