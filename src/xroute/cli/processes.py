"""The processes a command started (Spark's JVM and its Python workers, a local Spark Connect
server), found and stopped when the command ends early: Ctrl-C or an error must leave nothing
running. pyspark counts on its JVM noticing its closed stdin, which a JVM still starting, or
busy in its shutdown hooks, can miss (issue 38: 3 of 3 interrupted start-ups left one)."""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Collection
from pathlib import Path

STOP_GRACE_S = 3.0  # SIGTERM first: a JVM's shutdown hooks get this long before SIGKILL
STOP_ROUNDS = 3  # look again for processes started while the others stopped
PR_SET_CHILD_SUBREAPER = 36  # prctl(2)


def descendants(pid: int | None = None) -> list[int]:
    """Every process below ``pid`` (this process by default), children before grandchildren,
    read from /proc (Linux); an empty list where there is no /proc."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # The command name is in parentheses and may hold spaces: the fields follow the last ')'.
        fields = stat.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, frontier = [], [root]
    while frontier:
        below = [child for parent in frontier for child in children.get(parent, ())]
        found += below
        frontier = below
    return found


def stop_descendants(grace: float = STOP_GRACE_S, keep: Collection[int] = ()) -> list[int]:
    """Stop every process this one started, but those in ``keep`` and theirs (SIGTERM, then
    SIGKILL after ``grace`` seconds for those still there); the pids that were found. For the
    command line, which owns its process: a library call leaves its caller's processes be.

    It looks again after each round: a process may start one while it is being stopped (the
    JVM a Python worker), which `adopt_orphans` keeps below this one."""
    spared = set(keep)
    for pid in keep:
        spared.update(descendants(pid))
    stopped: list[int] = []
    for _ in range(STOP_ROUNDS):
        started = [pid for pid in descendants() if pid not in spared and _alive(pid)]
        if not started:
            break
        for pid in started:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(pid) for pid in started):
            time.sleep(0.05)
        for pid in started:
            if _alive(pid):
                _signal(pid, signal.SIGKILL)
        stopped += started
    return stopped


def adopt_orphans() -> None:
    """Make this process the parent of any orphan below it (Linux's child subreaper): a
    Python worker whose JVM was stopped first is then still found by `descendants`, not
    handed to init and left running. Nothing happens where the call does not exist."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    if state == "Z":  # exited; its parent (this process, or one we stopped) reaps it
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True
