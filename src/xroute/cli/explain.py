"""``xroute explain``: where does a message go, and why?"""

from __future__ import annotations

import json
import sys

import click

from xroute._show import console as user_console
from xroute.cli.app import EXIT_OK, EXIT_UNROUTABLE, cli
from xroute.cli.options import headers_from, load_topology, message_options
from xroute.tools.explain import explain as explain_route
from xroute.tools.explain import render_tree


@cli.command()
@message_options
def explain(
    definitions: str,
    vhost: str | None,
    exchange: str,
    key: str,
    header_pairs: tuple[str, ...],
    as_json: bool,
    rabbitmq: str | None,
) -> None:
    """Show the whole path of one message: exchanges, matching bindings and why (exit 3 if it
    reaches no queue).

    The routing rules it applies, and where they follow RabbitMQ 4.x, are xroute's contract:
    docs/semantics.md in the xroute repository."""
    topology = load_topology(definitions, vhost, rabbitmq=rabbitmq)
    explanation = explain_route(topology, exchange, key, headers_from(header_pairs))
    if as_json:
        click.echo(json.dumps(explanation.to_dict(), default=str, indent=2))
    else:
        user_console(soft_wrap=False).print(render_tree(explanation))
    sys.exit(EXIT_OK if explanation.routed else EXIT_UNROUTABLE)
