"""Run by name only, by tests/test_owned.py and tests/pipeline/test_owned_connect.py: a pytest
run that starts a service through the suite's own fixture, writes which processes it is to
``$XROUTE_HOLD_FILE``, and waits to be killed. (Not a ``test_*.py`` module: never collected.)"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

HOLD_S = 300  # the killing test's own deadlines are shorter: this never ends on its own


def session_processes(leader: int) -> list[list[int]]:
    """``[pid, start time]`` of each process in the session of ``leader`` (a service started in a
    session of its own), read from /proc: what a killed run would leave."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == leader and fields[0] != "Z":
            found.append([int(entry.name), int(fields[19])])
    return found


def hold(leader: int, workdir: Path) -> None:
    """Say which processes the service is, then wait to be killed."""
    record = {"pids": session_processes(leader), "workdir": str(workdir)}
    path = Path(os.environ["XROUTE_HOLD_FILE"])
    path.with_suffix(".part").write_text(json.dumps(record))
    path.with_suffix(".part").rename(path)
    time.sleep(HOLD_S)


def test_hold_store(s3_store) -> None:
    hold(s3_store._process.pid, s3_store.workdir)


def test_hold_connect(connect_server) -> None:
    hold(connect_server._process.pid, connect_server.workdir)


# ------------------------------------------------------------- the killing side


def alive(pid: int, started: int) -> bool:
    """True if the process ``pid`` that started at ``started`` still runs (not a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and int(fields[19]) == started


def kill_held(test: str, signum: int, folder: Path, ready_timeout: float) -> dict:
    """Run ``hold_service.py::test`` in a pytest of its own (this checkout, a registry of its
    own under ``folder``), send it ``signum`` once its service runs, and return
    ``{"pids", "workdir"}`` of the service, ``"survivors"``: those still running after a generous
    deadline, ``"seconds"`` until they were gone, ``"returncode"`` and ``"log"`` of the run, and ``"registry"``: what is left in
    its registry. Whatever survived is killed afterwards (on the base, everything does)."""
    import signal
    import subprocess
    import sys

    from tests.services.cluster import REPO, driver_env

    hold_file = folder / "held.json"
    log = folder / "run.log"
    env = driver_env({"XROUTE_OWNED_DIR": str(folder / "owned"), "XROUTE_HOLD_FILE": str(hold_file)})
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYTEST_XDIST_WORKER"):
        env.pop(name, None)
    command = [sys.executable, "-m", "pytest", f"tests/services/hold_service.py::{test}",
               "-p", "no:cacheprovider", f"--basetemp={folder / 'basetemp'}", "-q"]
    with log.open("wb") as sink:
        run = subprocess.Popen(command, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    held: dict = {"pids": []}
    try:
        deadline = time.monotonic() + ready_timeout
        while not hold_file.exists():
            assert run.poll() is None, f"the held run ended first:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no service in time:\n{log.read_text()[-3000:]}"
            time.sleep(0.2)
        held = json.loads(hold_file.read_text())
        os.kill(run.pid, signum)
        killed = time.monotonic()
        deadline = killed + 90  # generous: SIGTERM stops a JVM through its hooks
        while time.monotonic() < deadline:
            if not any(alive(*p) for p in held["pids"]):
                break
            time.sleep(0.1)
        held["seconds"] = time.monotonic() - killed  # reported, never asserted
        held["survivors"] = [p for p in held["pids"] if alive(*p)]
        try:
            held["returncode"] = run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            held["returncode"] = None
        registry = folder / "owned"
        deadline = time.monotonic() + 30  # the watchdog forgets a service once it is stopped
        while True:
            held["registry"] = sorted(p.name for p in registry.glob("*.json*"))
            if not held["registry"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        held["log"] = log.read_text(errors="replace")[-3000:]
        return held
    finally:
        for pid, started in held["pids"]:
            if alive(pid, started):
                os.kill(pid, signal.SIGKILL)
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
