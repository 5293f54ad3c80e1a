"""The ``xroute`` command group, its exit codes, and how a command ends: an `XRouteError` in
one line, Ctrl-C in one line, the processes it started stopped. Each command lives in its own
module of `xroute.cli` and registers itself on `cli`."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import warnings
from typing import Any

import click

from xroute.cli.processes import adopt_orphans, descendants, stop_descendants
from xroute.core.errors import SparkConnectUnavailable, XRouteError
from xroute.extras import missing

EXIT_OK = 0
EXIT_BAD_INPUT = 2  # also click's own code for a usage error
EXIT_UNROUTABLE = 3
EXIT_LINT_FINDINGS = 1  # xroute lint: an error was found (with --strict: or a warning)
EXIT_DIFF_CHANGED = 1  # xroute diff: something changes (--fail-on lost: some message loses a queue)
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as shells report it
REDELIVER_AFTER_S = 0.05  # a Ctrl-C a finalizer swallowed is sent again this much later


class XRouteGroup(click.Group):
    """Turns every `XRouteError` into a one-line message and exit code 2, Ctrl-C into one line
    and exit code 130, and xroute's own warnings into one line each."""

    owns_process = False  # set by `main`: the command line, not a caller's process

    def invoke(self, ctx: click.Context) -> Any:
        # What ran before the command (a test session's JVM, a caller's servers) is not ours
        # to stop when it fails.
        before = set(descendants()) if self.owns_process else set()
        # py4j logs each call an interrupt or a lost JVM cuts short, with its traceback; the
        # command says what happened in its one line instead.
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            try:
                return super().invoke(ctx)
            except XRouteError as error:
                if isinstance(error, SparkConnectUnavailable):
                    from xroute.spark.session import abandon_lost_server

                    abandon_lost_server()
                self._stop_started(before)
                click.echo(f"xroute: error: {error}", err=True)
                sys.exit(EXIT_BAD_INPUT)
            except ModuleNotFoundError as error:
                needed = missing(error)  # a command whose extra is not installed
                if needed is None:
                    raise
                click.echo(f"xroute: error: {needed}", err=True)
                sys.exit(EXIT_BAD_INPUT)
            except KeyboardInterrupt:
                self._interrupted(before)
            except Exception as error:
                # Ctrl-C during a py4j call: py4j's own handling of it fails in turn ("Gateway
                # must be connected to send cancel cmd."), with the interrupt as its context.
                if not _during_interrupt(error):
                    raise
                self._interrupted(before)

    def _interrupted(self, before: set[int]) -> None:
        """Ctrl-C: one line, the processes this command started stopped, exit 130."""
        if self.owns_process:  # a caller's process (a test, a notebook) keeps its own
            logging.disable(logging.CRITICAL)  # the run has cleaned up on its way out
            # A second Ctrl-C while the processes stop must not print a traceback.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            sys.unraisablehook = lambda unraisable: None  # py4j's finalizers, at exit
        self._stop_started(before)
        click.echo("xroute: stopped (Ctrl-C)", err=True)
        _forget_unhandled_interrupt()
        sys.exit(EXIT_INTERRUPTED)

    def _stop_started(self, before: set[int]) -> None:
        """Stop the processes this command started (Spark's JVM, its workers, a local Connect
        server), if it owns its process and Spark was imported: none is left running when the
        command ends early. Called in-process (a test, a notebook), it stops nothing."""
        if self.owns_process and "pyspark" in sys.modules:
            stop_descendants(keep=before)


class _NotFromPy4J(logging.Filter):
    """Drops what py4j logs through the root logger (`logging.exception` on each call that
    an interrupt cuts short, with a traceback); the command says what happened in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


def _log_like_python_without_py4j() -> None:
    """Give the root logger the handler Python would use anyway (warnings and worse, the bare
    message, to stderr), minus py4j's records: with a handler in place, py4j's
    `logging.exception` no longer configures one of its own."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.addFilter(_NotFromPy4J())
    logging.getLogger().addHandler(handler)


def quiet_interrupts() -> None:
    """Make Ctrl-C during a Spark job one line: Spark's own handler cancels the jobs while a
    call to the JVM is under way, and py4j logs each call it interrupts with a traceback.
    Called once Spark has started (it installs its handler then)."""
    spark_handler = signal.getsignal(signal.SIGINT)

    def interrupted(signum: int, frame: Any) -> None:
        logging.disable(logging.CRITICAL)
        if callable(spark_handler):
            spark_handler(signum, frame)  # cancels the jobs, raises KeyboardInterrupt
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)


def interrupts_not_swallowed(previous: Any) -> Any:
    """An unraisable-exception hook that delivers again a Ctrl-C Python swallowed: one that
    lands while a finalizer (``__del__``, a weakref callback) runs is printed as "Exception
    ignored" and lost, and the command would run on to the end with Spark's JVM outliving it
    (seen once in CI, 1 s into `xroute pipeline`). Every other unraisable goes to ``previous``."""

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            threading.Thread(target=_interrupt_main_again, daemon=True).start()
            return
        previous(unraisable)

    return hook


def _interrupt_main_again() -> None:
    # From another thread, a moment later: sent at once, the handler would raise inside the
    # hook or the finalizer and be swallowed again. A real signal, as a blocking call must
    # wake for it; should it land in a finalizer once more, the hook sends it again.
    time.sleep(REDELIVER_AFTER_S)
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def _forget_unhandled_interrupt() -> None:
    """Clear CPython's record of an unhandled KeyboardInterrupt, as this one was handled.

    CPython (3.11, 3.12) records one whenever a Ctrl-C ends a string `exec` or `eval`, even if
    a caller then catches it: dataclasses and namedtuple build their methods so, hundreds of
    times while xroute, pyspark and pandas import. Under ``python -m`` the interpreter then
    ends by SIGINT once the command has exited (status -2, not 130, seen in CI). Each string
    `exec` clears the record first, so a trivial one does."""
    exec("pass", {})


_python_show_warning = warnings.showwarning


def _during_interrupt(error: BaseException) -> bool:
    """Whether ``error`` was raised while a Ctrl-C was being handled (a KeyboardInterrupt in
    its chain of causes and contexts)."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _show_warning(message: Any, category: type, *args: Any, **kwargs: Any) -> None:
    """xroute's warnings as one line, without the source line Python shows."""
    if category.__module__.startswith("xroute."):
        click.echo(f"xroute: warning: {message}", err=True)
    else:
        _python_show_warning(message, category, *args, **kwargs)


@click.group(cls=XRouteGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="xroute")
def cli() -> None:
    """Route messages exactly as RabbitMQ does: library, Spark pipeline and operator tools."""


def main() -> None:
    """The console entry point: the command owns this process, so it stops what it started
    when it ends early, and keeps py4j's tracebacks out of its output."""
    if not cli.owns_process:
        cli.owns_process = True
        _log_like_python_without_py4j()
        sys.unraisablehook = interrupts_not_swallowed(sys.unraisablehook)
        adopt_orphans()
    cli(prog_name="xroute")
