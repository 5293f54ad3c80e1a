"""``xroute lint``: what in a topology is wrong, redundant or expensive."""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from xroute._show import console as user_console
from xroute.cli.app import EXIT_LINT_FINDINGS, EXIT_OK, cli
from xroute.cli.options import (
    definitions_option,
    json_option,
    rabbitmq_option,
    resolve_definitions,
    vhost_option,
)
from xroute.tools.cost import read_keys
from xroute.tools.findings import SEVERITIES, LintReport, describe_binding
from xroute.tools.lint import LARGE_EXCHANGE, lint_definitions

_STYLE = {"error": {"fg": "red", "bold": True}, "warning": {"fg": "yellow"}, "info": {"fg": "cyan"}}
# Findings whose related bindings are more of the same (the others name theirs in the message).
_LISTS_RELATED = {"client-addressing", "leading-hash"}


@cli.command()
@definitions_option
@vhost_option
@json_option
@click.option("--strict", is_flag=True,
              help="Exit 1 on warnings too (errors always exit 1).")
@click.option(
    "--keys",
    "keys_file",
    type=click.Path(dir_okay=False),
    help="Real routing keys to measure cost on: one a line, or EXCHANGE<TAB>KEY.",
)
@click.option(
    "--summary",
    "summary_file",
    type=click.Path(dir_okay=False),
    help="The pipeline's summary.json: its bindings with no hits are listed.",
)
@click.option(
    "--large-exchange",
    type=click.IntRange(min=1),
    default=LARGE_EXCHANGE,
    show_default=True,
    help="Bindings from which a topic exchange counts as large (leading '#' finding).",
)
@rabbitmq_option
def lint(
    definitions: str,
    vhost: str | None,
    as_json: bool,
    strict: bool,
    keys_file: str | None,
    summary_file: str | None,
    large_exchange: int,
    rabbitmq: str | None,
) -> None:
    """Report duplicate, redundant, expensive and broken bindings and exchanges, and rank the
    topic exchanges by routing cost."""
    report = lint_definitions(
        resolve_definitions(definitions, vhost),
        vhost,
        keys=read_keys(keys_file) if keys_file else None,
        summary=summary_file,
        large_exchange=large_exchange,
        rabbitmq=rabbitmq,
    )
    if as_json:
        click.echo(json.dumps(report.to_dict(), default=str, indent=2))
    else:
        _print(report, user_console(soft_wrap=True))
    # Errors fail a gate by default (RabbitMQ would refuse them, or messages are lost);
    # --strict fails on warnings too.
    failing = report.count("error") > 0 or (strict and report.failing)
    sys.exit(EXIT_LINT_FINDINGS if failing else EXIT_OK)


def _print(report: LintReport, console: Console) -> None:
    # Plain click output for the findings: there can be thousands, and rich markup is slow.
    for finding in report.findings:
        head = click.style(finding.severity, **_STYLE[finding.severity])
        click.echo(f"{head} {click.style(finding.code, bold=True)}: {finding.where()}")
        click.echo(f"  {finding.message}")
        if finding.related and finding.code in _LISTS_RELATED:
            shown = [_related(r) for r in finding.related[:5]]
            more = f" and {len(finding.related) - 5} more" if len(finding.related) > 5 else ""
            click.echo(f"  also: {', '.join(shown)}{more}")
        click.echo(f"  why: {finding.why}")
        click.echo(f"  instead: {finding.fix}")
    if report.costs:
        table = Table(title="Topic exchanges, costliest first (trie nodes visited per key)")
        widest = min(40, max(len(c.exchange) for c in report.costs))
        table.add_column("exchange", min_width=widest)
        for column in ("bindings", "nodes", "keys", "from", "visits/key", "max", "lead #"):
            table.add_column(column, justify="left" if column == "from" else "right")
        for cost in report.costs:
            table.add_row(
                escape(cost.exchange),
                str(cost.bindings),
                str(cost.nodes),
                str(cost.keys),
                cost.keys_from,
                f"{cost.mean_visits:.1f}",
                str(cost.max_visits),
                str(cost.leading_hash),
            )
        console.print(table)
    click.echo(", ".join(f"{report.count(s)} {_plural(s, report.count(s))}" for s in SEVERITIES))


def _plural(severity: str, count: int) -> str:
    return severity if severity == "info" or count == 1 else severity + "s"


def _related(ref: dict) -> str:
    return repr(ref["exchange"]) if set(ref) == {"exchange"} else describe_binding(ref)
