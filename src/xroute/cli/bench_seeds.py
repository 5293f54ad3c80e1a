"""``xroute bench seeds``: run the seeds' experiments beside peers; write results.json, PNGs and
REPORT.md."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from xroute._show import console as user_console
from xroute.cli.bench import bench

EXIT_CHECK_FAILED = 1


class RichProgress:
    """The suite's `Progress` as two rich bars: experiments, and steps of the current one."""

    def __init__(self, progress: Progress, experiments: int) -> None:
        self._progress = progress
        self._all = progress.add_task("experiments", total=experiments)
        self._steps = progress.add_task("", total=1, visible=False)
        self._started = False

    def begin(self, title: str, steps: int) -> None:
        """A new experiment: advance the outer bar (after the first) and reset the inner one."""
        if self._started:
            self._progress.advance(self._all)
        self._started = True
        self._progress.update(self._all, description=title[:60])
        self._progress.reset(self._steps, total=steps, description="starting", visible=True)

    def step(self, what: str) -> None:
        """One step of the current experiment begins: name it."""
        task = self._progress.tasks[self._steps]
        if task.description != "starting":
            self._progress.advance(self._steps)
        self._progress.update(self._steps, description=f"  {what}"[:60])

    def finish(self) -> None:
        """Fill both bars."""
        self._progress.update(self._steps, completed=self._progress.tasks[self._steps].total)
        self._progress.update(self._all, completed=self._progress.tasks[self._all].total)


def _numbers(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    if not value:
        return None
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a list of experiment numbers like 1,3"
        ) from None


@bench.command("seeds")
@click.option(
    "--quick", is_flag=True, help="A reduced version of every experiment (under two minutes)."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-results/seeds"),
    show_default=True,
    help="Folder for results.json, the PNGs and REPORT.md.",
)
@click.option(
    "--with-rabbitmq", is_flag=True, help="Also measure a private RabbitMQ (experiment 6)."
)
@click.option(
    "--only", callback=_numbers, metavar="N,...", help="Run only these experiments (1-6)."
)
@click.option(
    "--scale",
    type=click.Choice(["full", "quick", "tiny"]),
    default=None,
    hidden=True,
    help="Size preset; 'tiny' is for the harness test.",
)
def seeds(
    quick: bool, out: Path, with_rabbitmq: bool, only: list[int] | None, scale: str | None
) -> None:
    """Reproduce the seeds' experiments beside peers (kombu, regex, paho-mqtt, RabbitMQ).

    \b
    1 trie anatomy (000/003)      4 topic vs direct at scale (000)
    2 trie vs DFA (002)           5 several keys per message (004)
    3 inverted bitmaps (001)      6 a real RabbitMQ (--with-rabbitmq)
    """
    from xroute.bench.experiments import (
        CheckFailed,
        run_suite,
        select,
        total_steps,
        write_outputs,
    )

    scale = scale or ("quick" if quick else "full")
    try:
        modules = select(only, with_rabbitmq)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--only") from None
    console = user_console(stderr=True)
    command = " ".join(
        ["xroute bench seeds"]
        + (["--quick"] if quick else [])
        + (["--with-rabbitmq"] if with_rabbitmq else [])
        + ([f"--only {','.join(map(str, only))}"] if only else [])
        + ([f"--scale {scale}"] if scale not in ("full", "quick") else [])
        + [f"--out {shlex.quote(str(out))}"]
    )
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    console.print(
        f"{len(modules)} experiments, scale {scale}, {total_steps(modules, scale)} steps -> {out}"
    )
    try:
        with Progress(*columns, console=console) as bar:
            tracker = RichProgress(bar, len(modules))
            results = run_suite(scale, only, with_rabbitmq, tracker, out=out, command=command)
            tracker.finish()
    except CheckFailed as error:
        console.print(
            f"[red]xroute: a check failed before timing (a bug, not a result):[/] {error}"
        )
        sys.exit(EXIT_CHECK_FAILED)
    written = write_outputs(results, out)
    failed = [e for e in results["experiments"] if e.get("error")]
    for entry in failed:
        console.print(f"[yellow]experiment {entry['number']} not run:[/] {entry['error']}")
    console.print(
        f"wrote {written['report']} and {len(written) - 2} plots in {results['seconds']} s"
    )
    if failed:
        sys.exit(EXIT_CHECK_FAILED)
