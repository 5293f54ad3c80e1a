"""``xroute serve``: an in-memory AMQP 0-9-1 broker whose routing is RabbitMQ's."""

from __future__ import annotations

import asyncio
import gc
import signal

import click

from xroute.cli import cli
from xroute.cli.options import DEFINITIONS_HELP, load_topology, rabbitmq_option
from xroute.errors import XRouteError


def _user(text: str) -> tuple[str, str]:
    user, sep, password = text.partition(":")
    if not sep or not user:
        raise click.BadParameter(f"{text!r} is not user:password", param_hint="--user")
    return user, password


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=5673, show_default=True, type=click.IntRange(0, 65535),
    help="Port to listen on (0: any free port, printed at start).",
)
@click.option("--definitions", "-d", default=None, type=click.Path(dir_okay=False),
              help=DEFINITIONS_HELP + " Declared at start.")
@click.option("--vhost", default=None,
              help="Virtual host of the definitions to load; also the broker's (default /).")
@click.option("--user", "users", multiple=True, metavar="USER:PASSWORD",
              help="A user clients may log in as (default guest:guest). Repeat for more.")
@rabbitmq_option
@click.option("--heartbeat", default=60, show_default=True, type=click.IntRange(0, 65535),
              help="Heartbeat interval offered to clients, seconds (0: none).")
def serve(
    host: str,
    port: int,
    definitions: str | None,
    vhost: str | None,
    users: tuple[str, ...],
    rabbitmq: str | None,
    heartbeat: int,
) -> None:
    """Run an AMQP 0-9-1 broker in memory (nothing is persisted) until interrupted.

    Real clients (pika, aio-pika, aiormq, kombu, Celery) connect to it; exchanges of every
    type xroute has route exactly as RabbitMQ's do."""
    try:
        from xroute.amqp import Broker
    except ImportError as error:  # pamqp is the amqp extra's
        raise XRouteError(f"xroute serve needs pamqp: pip install 'xroute[amqp]' ({error})")

    topology = load_topology(definitions, vhost, rabbitmq=rabbitmq) if definitions else None
    broker = Broker(
        host,
        port,
        topology=topology,
        vhost=vhost or "/",
        users=dict(_user(u) for u in users) or None,
        heartbeat=heartbeat,
        record=False,
        rabbitmq=rabbitmq,
    )

    async def run() -> None:
        await broker.start_async()
        # What is loaded now (the definitions, the engines' tries and indexes) lives as long
        # as the broker: kept out of the collector's full passes, which would otherwise scan
        # it all every time (0.8 s a pass over the 970k objects of 100k seed bindings; see
        # docs/engines.md). Bindings declared later are collected as usual.
        gc.freeze()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        click.echo(f"xroute: AMQP 0-9-1 broker on {broker.url} (in memory)", err=True)
        try:
            await stop.wait()
        finally:
            gc.unfreeze()
            await broker.stop_async()

    asyncio.run(run())
