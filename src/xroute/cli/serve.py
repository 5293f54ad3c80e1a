"""``xroute serve``: an in-memory AMQP 0-9-1 broker whose routing is RabbitMQ's."""

from __future__ import annotations

import asyncio
import gc
import signal

import click

from xroute.cli.app import cli
from xroute.cli.options import DEFINITIONS_HELP, load_topology, rabbitmq_option
from xroute.core.errors import XRouteError


def _user(text: str) -> tuple[str, str]:
    user, sep, password = text.partition(":")
    if not sep or not user:
        raise click.BadParameter(f"{user or text!r}... is not user:password", param_hint="--user")
    if not password:
        # RabbitMQ's internal backend refuses to log in a user with a blank password.
        raise click.BadParameter(f"user {user!r} has a blank password, which RabbitMQ "
                                 "refuses at login: give one", param_hint="--user")
    return user, password


def _size(text: str | None) -> int | None:
    if text is None:
        return None
    from xroute.amqp.memory import parse_size

    try:
        return parse_size(text)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--memory-limit") from None


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=5673, show_default=True, type=click.IntRange(0, 65535),
    help="Port to listen on (0: any free port, printed at start).",
)
@click.option("--definitions", "-d", default=None, metavar="FILE|URL",
              help=DEFINITIONS_HELP + " Declared at start.")
@click.option("--vhost", default=None,
              help="Virtual host of the definitions to load; also the broker's (default /).")
@click.option("--user", "users", multiple=True, metavar="USER:PASSWORD",
              help="A user clients may log in as (default guest:guest). Repeat for more.")
@rabbitmq_option
@click.option("--heartbeat", default=60, show_default=True, type=click.IntRange(0, 65535),
              help="Heartbeat interval offered to clients, seconds (0: none).")
@click.option("--memory-limit", default=None, metavar="SIZE",
              help="Block publishers (connection.blocked) while queued and unacked messages "
              "hold more than SIZE (bytes, or e.g. 150MB, 1GiB), as RabbitMQ's memory alarm.")
@click.option("--handshake-timeout", default=10.0, show_default=True,
              type=click.FloatRange(0, min_open=True),
              help="Seconds a client has to log in and open its virtual host.")
@click.option("--loopback-user", "loopback_users", multiple=True, default=("guest",),
              show_default=True, metavar="USER",
              help="A user who may log in only from this machine, as RabbitMQ's "
              "loopback_users. Repeat for more; --loopback-user '' for none.")
def serve(
    host: str,
    port: int,
    definitions: str | None,
    vhost: str | None,
    users: tuple[str, ...],
    rabbitmq: str | None,
    heartbeat: int,
    memory_limit: str | None,
    handshake_timeout: float,
    loopback_users: tuple[str, ...],
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
        memory_limit=_size(memory_limit),
        handshake_timeout=handshake_timeout,
        loopback_users=[user for user in loopback_users if user],
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
        # The address only: credentials are not for logs.
        click.echo(f"xroute: AMQP 0-9-1 broker on amqp://{_host(host)}:{broker.port}/ "
                   "(in memory)", err=True)
        if not _loopback_only(host):
            click.echo(
                f"xroute: warning: listening on {host}, beyond this machine: anyone who can "
                f"reach port {broker.port} may connect (users "
                f"{', '.join(sorted(broker.users))}; loopback-only: "
                f"{', '.join(sorted(broker.loopback_users)) or 'none'})", err=True,
            )
        try:
            await stop.wait()
        finally:
            gc.unfreeze()
            await broker.stop_async()

    asyncio.run(run())


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _loopback_only(host: str) -> bool:
    """True if ``host`` (an address or a name) listens on loopback addresses only."""
    import ipaddress
    import socket

    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    try:
        return all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)
    except ValueError:
        return False
