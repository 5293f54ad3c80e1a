"""The ``xroute`` command line: parse, call the library, format. Exit codes live here."""

from __future__ import annotations

import sys
from typing import Any

import click

from xroute.errors import XRouteError

EXIT_OK = 0
EXIT_BAD_INPUT = 2  # also click's own code for a usage error
EXIT_UNROUTABLE = 3
EXIT_LINT_FINDINGS = 1  # xroute lint --strict: a warning or an error was found
EXIT_DIFF_CHANGED = 1  # xroute diff: something changes (--fail-on lost: some message loses a queue)


class XRouteGroup(click.Group):
    """Turns every `XRouteError` into a one-line message and exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except XRouteError as error:
            click.echo(f"xroute: error: {error}", err=True)
            sys.exit(EXIT_BAD_INPUT)


@click.group(cls=XRouteGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="xroute")
def cli() -> None:
    """Route messages exactly as RabbitMQ does: library, Spark pipeline and operator tools."""


def main() -> None:
    """The console entry point."""
    cli(prog_name="xroute")


# Each command lives in its own module and registers itself on `cli`.
from xroute.cli import (  # noqa: F401
    bench,
    bench_amqp,
    bench_engines,
    bench_kombu,
    bench_pipeline,
    bench_seeds,
    bench_stream,
    definitions,
    demo,
    diff,
    explain,
    lint,
    pipeline,
    route,
    serve,
    stream,
)
