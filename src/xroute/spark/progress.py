"""A progress bar for Spark jobs: Spark's status tracker polled from a thread, drawn by rich."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from xroute._show import console as user_console

POLL_SECONDS = 0.25


def task_counts(context: Any, group: str) -> tuple[int, int]:
    """(tasks done, tasks known) over the stages of the jobs in ``group`` seen so far."""
    tracker = context.statusTracker()
    done = total = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        for stage_id in job.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                done += stage.numCompletedTasks
                total += stage.numTasks
    return done, total


@contextmanager
def spark_progress(
    context: Any, group: str, description: str, enabled: bool = True, console: Console | None = None
) -> Iterator[None]:
    """Show the tasks of the Spark jobs run in the block (tagged with job group ``group``)."""
    context.setJobGroup(group, description)
    if not enabled:
        yield
        return
    stop = threading.Event()
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console or user_console(stderr=True), transient=False) as bar:
        task = bar.add_task(description, total=None)

        def poll() -> None:
            while not stop.wait(POLL_SECONDS):
                try:
                    done, total = task_counts(context, group)
                except Exception:  # the context is going away: the block is ending
                    return
                bar.update(task, completed=done, total=total or None)

        thread = threading.Thread(target=poll, name="xroute-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            try:
                done, total = task_counts(context, group)
                bar.update(task, completed=done, total=total or done or 1)
            except Exception:
                pass
