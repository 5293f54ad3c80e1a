"""The ``xroute`` command line: parse, call the library, format. The group and its exit
codes are in `xroute.cli.app`; each command lives in its own module and registers itself on
`cli` when imported here."""

from xroute.cli import (  # noqa: F401  (each module registers its command)
    bench,
    bench_amqp,
    bench_engines,
    bench_kombu,
    bench_pipeline,
    bench_seeds,
    bench_stream,
    bench_verify,
    definitions,
    demo,
    diff,
    explain,
    lint,
    pipeline,
    route,
    serve,
    stream,
    traces,
)
from xroute.cli.app import (
    EXIT_BAD_INPUT,
    EXIT_DIFF_CHANGED,
    EXIT_INTERRUPTED,
    EXIT_LINT_FINDINGS,
    EXIT_OK,
    EXIT_UNROUTABLE,
    XRouteGroup,
    cli,
    main,
    quiet_interrupts,
)

__all__ = [
    "EXIT_BAD_INPUT", "EXIT_DIFF_CHANGED", "EXIT_INTERRUPTED", "EXIT_LINT_FINDINGS", "EXIT_OK",
    "EXIT_UNROUTABLE", "XRouteGroup", "cli", "main", "quiet_interrupts",
]
