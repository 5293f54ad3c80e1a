"""``xroute definitions fetch``: save a snapshot of a live broker's definitions."""

from __future__ import annotations

import json
from pathlib import Path

import click

from xroute.cli.app import cli
from xroute.cli.options import resolve_definitions, vhost_option
from xroute.core.errors import ManagementURLError
from xroute.sources.management import is_management_url


@cli.group()
def definitions() -> None:
    """RabbitMQ definitions: snapshots of a live broker."""


@definitions.command()
@click.argument("url")
@vhost_option
@click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="The JSON file to write ('-': standard output).",
)
def fetch(url: str, vhost: str | None, out: str) -> None:
    """Save GET /api/definitions of the broker at URL (http(s)://user@host:15672; the password
    from RABBITMQ_PASSWORD, else asked) as a definitions file every command reads."""
    if not is_management_url(url):
        raise ManagementURLError(
            f"{url!r} is not a management API URL: expected http(s)://user@host:15672", url
        )
    export = resolve_definitions(url, vhost)
    text = json.dumps(export, indent=2, sort_keys=True) + "\n"
    if out == "-":
        click.echo(text, nl=False)
        return
    Path(out).write_text(text, encoding="utf-8")
    counts = ", ".join(
        f"{len(export.get(section) or [])} {section}"
        for section in ("vhosts", "exchanges", "queues", "bindings")
        if section in export
    )
    click.echo(f"wrote {out}: {counts}", err=True)
