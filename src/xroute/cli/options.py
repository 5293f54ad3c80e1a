"""Options that several commands share."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from xroute.core.errors import ManagementURLError
from xroute.core.profiles import NAMES
from xroute.core.topology import Topology
from xroute.sources.management import (
    PASSWORD_VARIABLE,
    fetch_definitions,
    is_management_url,
    parse_management_url,
    password_from_env,
)


def parse_header(text: str) -> tuple[str, Any]:
    """``name=value``: the value is read as JSON when it parses (``n=1``, ``CC=["a.b"]``,
    ``flag=true``, ``x=null``), else taken as a string."""
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise click.BadParameter(f"{text!r} is not name=value", param_hint="--header")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return name, value


def headers_from(pairs: tuple[str, ...]) -> dict[str, Any] | None:
    """The headers table given by repeated ``--header name=value`` options."""
    return dict(parse_header(p) for p in pairs) or None


DEFINITIONS_HELP = (
    "A RabbitMQ definitions export (JSON): a local path or a URI (s3://, gs://, hdfs://...); "
    "or a live broker's management API http(s)://user@host:15672 (password from "
    "RABBITMQ_PASSWORD, else asked)."
)
definitions_option = click.option(
    "--definitions",
    "-d",
    required=True,
    # Not click.Path(dir_okay=False): its three-line usage error for a folder; the loader
    # refuses one in a line, as it does every other file that is not an export.
    metavar="FILE|URL",
    help=DEFINITIONS_HELP,
)
vhost_option = click.option("--vhost", default=None, help="Virtual host to read (default: the only one).")
header_option = click.option(
    "--header",
    "-H",
    "header_pairs",
    multiple=True,
    metavar="NAME=VALUE",
    help="A message header; VALUE is JSON if it parses, else text. Repeat for more.",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
exchange_option = click.option(
    "--exchange", "-e", required=True, help="The exchange the message is published to."
)
key_option = click.option(
    "--key",
    "-k",
    required=True,
    help="The routing key (required; -k '' routes the empty key, as fanout and headers "
    "exchanges are often published to).",
)


def column_options(command):
    """``--routing-key-column``, ``--exchange-column``, ``--headers-column``: which of a
    dataset's columns hold each record's routing key, exchange and headers."""
    for name, default, what in reversed(
        [
            ("--routing-key-column", "routing_key", "routing key"),
            ("--exchange-column", "exchange", "exchange (else --exchange)"),
            ("--headers-column", "headers", "headers (a map, a struct or a JSON object as text)"),
        ]
    ):
        dest = name[2:].replace("routing-", "").replace("-", "_")
        command = click.option(
            name, dest, default=default, show_default=True, metavar="NAME",
            help=f"The column that holds each record's {what}.",
        )(command)
    return command
rabbitmq_option = click.option(
    "--rabbitmq",
    type=click.Choice(NAMES),
    default=None,
    help="Route as this RabbitMQ version does where versions differ (default: 4.3, with any "
    "number of '#' in a topic binding); docs/semantics.md lists the differences.",
)


def message_options(command):
    """The options that describe one message to route: definitions, vhost, exchange, key,
    headers, --json and --rabbitmq."""
    for option in reversed(
        [
            definitions_option,
            vhost_option,
            exchange_option,
            key_option,
            header_option,
            json_option,
            rabbitmq_option,
        ]
    ):
        command = option(command)
    return command


def resolve_definitions(definitions: str, vhost: str | None) -> str | dict[str, Any]:
    """A file path as it is; a management API URL fetched now, the password taken from
    ``RABBITMQ_PASSWORD`` or asked for (hidden) when the variable is not set."""
    if not is_management_url(definitions):
        return definitions
    password = password_from_env()
    if password is None:
        endpoint = parse_management_url(definitions)  # a bad URL fails before the prompt
        if not can_ask():
            raise ManagementURLError(
                f"no password for {endpoint.user!r} at {endpoint.base}, and no terminal to ask "
                f"for one on: set {PASSWORD_VARIABLE} in the environment",
                definitions,
            )
        password = click.prompt(
            f"RabbitMQ password for {endpoint.user!r} at {endpoint.base}",
            hide_input=True,
            err=True,
        )
    return fetch_definitions(definitions, vhost, password=password)


def can_ask() -> bool:
    """Whether a person can be asked for a password: stdin is a terminal (not cron, not CI)."""
    return sys.stdin.isatty()


def load_topology(
    definitions: str, vhost: str | None, engine: str | None = None, rabbitmq: str | None = None
) -> Topology:
    """The topology of a definitions file or live broker, for a command (``rabbitmq``: the
    version profile)."""
    source = resolve_definitions(definitions, vhost)
    if engine is None:
        return Topology.from_definitions(source, vhost=vhost, rabbitmq=rabbitmq)
    return Topology.from_definitions(source, vhost=vhost, engine=engine, rabbitmq=rabbitmq)


remote_option = click.option(
    "--remote",
    default=None,
    metavar="sc://HOST:PORT",
    help="Run on a Spark Connect server instead of starting Spark here (default: "
    "$SPARK_REMOTE when set and no --master is given). Its Python workers need xroute.",
)


def check_session_options(master: str | None, remote: str | None) -> None:
    """A run goes to a master or to a Connect server, not both."""
    if master is not None and remote is not None:
        raise click.UsageError("--master and --remote exclude each other")


table_format_option = click.option(
    "--table-format",
    type=click.Choice(["parquet", "delta"]),
    default="parquet",
    show_default=True,
    help="How deliveries, unroutable and rejected are published: Parquet folders (complete "
    "when _SUCCESS is there), or Delta Lake tables, each committed in one transaction "
    "(needs xroute[delta]).",
)
