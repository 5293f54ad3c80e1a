"""``xroute bench``: the benchmark suites; each subcommand lives in its own module."""

from __future__ import annotations

from xroute.cli.app import cli


@cli.group()
def bench() -> None:
    """Benchmarks that write JSON results and PNG plots (never timed tests)."""
    from xroute.bench.owned import reap_orphans

    reap_orphans()  # services that killed runs left would skew this one (xroute.bench.owned)
