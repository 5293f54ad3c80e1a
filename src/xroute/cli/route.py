"""``xroute route``: which queues does a message reach?"""

from __future__ import annotations

import json
import sys

import click

from xroute.cli.app import EXIT_OK, EXIT_UNROUTABLE, cli
from xroute.cli.options import headers_from, load_topology, message_options


@cli.command()
@message_options
def route(
    definitions: str,
    vhost: str | None,
    exchange: str,
    key: str,
    header_pairs: tuple[str, ...],
    as_json: bool,
    rabbitmq: str | None,
) -> None:
    """Print the queues a message reaches, one a line (exit 3 if none)."""
    topology = load_topology(definitions, vhost, rabbitmq=rabbitmq)
    queues = sorted(topology.route(exchange, key, headers_from(header_pairs)))
    if as_json:
        click.echo(json.dumps({"exchange": exchange, "routing_key": key, "queues": queues, "routed": bool(queues)}))
    else:
        for queue in queues:
            click.echo(queue)
        if not queues:
            click.echo("unroutable: no queue", err=True)
    sys.exit(EXIT_OK if queues else EXIT_UNROUTABLE)
