"""``xroute bench amqp``: end-to-end messages/s through xroute serve and RabbitMQ with the
same clients; writes results.json and a PNG."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from xroute.cli.bench import bench

EXIT_CHECK_FAILED = 1


@bench.command("amqp")
@click.option("--rabbitmq", "rabbitmq_url", default="amqp://guest:guest@127.0.0.1:5672/",
              show_default=True, help="The RabbitMQ to compare with ('' for none).")
@click.option("--clients", default="pika,aiormq,raw", show_default=True, metavar="NAME,...")
@click.option("--bindings", default="1,10000", show_default=True, metavar="N,...",
              help="Topic binding counts.")
@click.option("--messages", type=click.IntRange(min=100), default=5000, show_default=True,
              help="Messages per cell for pika and aiormq (the raw client sends 10x).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("bench-results/amqp"), show_default=True)
def amqp(rabbitmq_url: str, clients: str, bindings: str, messages: int, out: Path) -> None:
    """Publish, route, deliver and ack through `xroute serve` and RabbitMQ: pika, aiormq and a
    pipelined raw client; confirms on and off; 1 and 10k topic bindings; start-up time."""
    from xroute.bench.amqp import CLIENTS, CheckFailed, run
    from xroute.bench.amqp_plots import write_plot

    chosen = [name.strip() for name in clients.split(",") if name.strip()]
    if not chosen or set(chosen) - set(CLIENTS):
        raise click.BadParameter(f"clients must be among {', '.join(CLIENTS)}")
    try:
        counts = [int(part.replace("_", "")) for part in bindings.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise click.BadParameter(f"{bindings!r} is not a list of binding counts like 1,10000")
    per_client = {name: messages * (10 if name == "raw" else 1) for name in chosen}
    began = time.perf_counter()

    def report(line: str) -> None:
        click.echo(f"[{time.perf_counter() - began:7.1f} s] {line}", err=True)

    try:
        results = run(rabbitmq_url or None, chosen, counts, per_client, report)
    except CheckFailed as error:
        click.echo(f"xroute: a check failed (a bug, not a result): {error}", err=True)
        sys.exit(EXIT_CHECK_FAILED)
    results["meta"]["seconds"] = round(time.perf_counter() - began, 1)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    plot = write_plot(results, out)
    startup = results["startup"]
    click.echo(f"start-up: Broker().start() {startup['broker_start_in_process_s'] * 1000:.1f} ms;"
               f" xroute serve process {startup['xroute_serve_process_s'] * 1000:.0f} ms")
    click.echo(f"wrote {out / 'results.json'} and {plot}")
