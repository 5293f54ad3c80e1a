"""`xroute.bench.owned`: no service outlives the run that started it. A pytest run killed with
SIGKILL or SIGTERM while its SeaweedFS runs leaves nothing; the registry stops the services of
dead owners only (at each pytest session start too), by their tag, never a pid that was reused;
an epmd in use is spared."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.services.cluster import REPO, driver_env
from tests.services.hold_service import alive, kill_held
from xroute.bench import owned
from xroute.bench.owned import Owned, reap_orphans, start_time

READY_S = 240  # a SeaweedFS starts in 3-10 s, much longer on a loaded machine


def test_a_sigkilled_run_leaves_no_store(tmp_path: Path) -> None:
    held = kill_held("test_hold_store", signal.SIGKILL, tmp_path, READY_S)
    assert held["pids"], held["log"]
    assert held["survivors"] == [], f"SeaweedFS outlived its killed run: {held}"
    assert not Path(held["workdir"]).exists()  # the watchdog deletes its folder too
    assert held["registry"] == []


def test_a_sigtermed_run_stops_its_store_through_the_fixture(tmp_path: Path) -> None:
    held = kill_held("test_hold_store", signal.SIGTERM, tmp_path, READY_S)
    assert held["survivors"] == [], f"SeaweedFS outlived its terminated run: {held}"
    # pytest ended the run as on Ctrl-C, which runs the fixtures' finalizers (the default
    # action of SIGTERM ends the process at once: -15).
    assert held["returncode"] == pytest.ExitCode.INTERRUPTED, held["log"]
    assert not Path(held["workdir"]).exists(), held["log"]
    assert held["registry"] == []


def _sleeper(token: str | None = None, seconds: int = 120) -> tuple[subprocess.Popen, int]:
    env = dict(os.environ)
    if token is not None:
        env[owned.VARIABLE] = token
    process = subprocess.Popen(["sleep", str(seconds)], env=env, start_new_session=True)
    started = start_time(process.pid)
    assert started is not None
    return process, started


def _gone(process: subprocess.Popen, deadline: float = 30) -> bool:
    try:
        process.wait(timeout=deadline)
        return True
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False


def _dead_owner() -> list[int]:
    """The pid and start time of a process that has exited."""
    process, started = _sleeper()
    process.kill()
    process.wait()
    return [process.pid, started]


def _record(folder: Path, token: str, owner: list[int], pids=()) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{token}.json"
    record = {"token": token, "kind": "test", "workdir": None, "owner": owner, "pids": list(pids)}
    path.write_text(json.dumps(record))
    return path


def test_a_dead_owners_service_is_reaped(tmp_path: Path) -> None:
    service, started = _sleeper("test-dead-owner")
    entry = _record(tmp_path, "test-dead-owner", _dead_owner(), [[service.pid, started]])
    reaped = reap_orphans(tmp_path)
    assert [record["token"] for record in reaped] == ["test-dead-owner"]
    assert _gone(service)
    assert not entry.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_live_owners_service_is_left_alone(tmp_path: Path) -> None:
    service, started = _sleeper("test-live-owner")
    try:
        me = [os.getpid(), start_time(os.getpid())]
        entry = _record(tmp_path, "test-live-owner", me, [[service.pid, started]])
        assert reap_orphans(tmp_path) == []
        assert entry.exists()
        assert service.poll() is None
    finally:
        service.kill()
        service.wait()


def test_a_reused_pid_is_never_killed(tmp_path: Path) -> None:
    # A process that carries no tag, at a recorded pid whose start time differs: the pid was
    # reused by a process that is not ours.
    stranger, started = _sleeper()
    try:
        _record(tmp_path, "test-reused", _dead_owner(), [[stranger.pid, started - 1]])
        assert len(reap_orphans(tmp_path)) == 1
        time.sleep(0.5)
        assert stranger.poll() is None
        assert alive(stranger.pid, started)
    finally:
        stranger.kill()
        stranger.wait()


def test_a_pytest_run_reaps_at_its_start(tmp_path: Path) -> None:
    # tests/conftest.py reaps the registry when a session starts (collecting only, here).
    service, started = _sleeper("test-reaped-by-pytest")
    _record(tmp_path, "test-reaped-by-pytest", _dead_owner(), [[service.pid, started]])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/services/hold_service.py"],
        cwd=REPO, env=driver_env({"XROUTE_OWNED_DIR": str(tmp_path)}), capture_output=True,
        text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert _gone(service)
    assert list(tmp_path.iterdir()) == []


_OWNER = """
import os, sys, time
from xroute.bench.owned import Owned
if os.fork() == 0:  # a forked child outlives the owner: it must not hold the watchdog's pipe
    time.sleep(60)
    os._exit(0)
service = Owned("sleep").popen(["sleep", "120"])
print(service.pid, flush=True)
time.sleep(120)
"""


def test_a_sigkilled_owners_service_stops_though_a_forked_child_lives(tmp_path: Path) -> None:
    env = {**os.environ, "XROUTE_OWNED_DIR": str(tmp_path)}
    owner = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, text=True,
                             env=env, start_new_session=True)
    try:
        pid = int(owner.stdout.readline())
        started = start_time(pid)
        assert started is not None and len(list(tmp_path.glob("*.json"))) == 1
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 30
        while alive(pid, started) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid, started)
    finally:
        os.killpg(owner.pid, signal.SIGKILL)  # the forked child
        if started is not None and alive(pid, started):
            os.kill(pid, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _register(port: int, name: bytes) -> socket.socket:
    """Register a node ``name`` with the epmd on ``port`` (ALIVE2_REQ), as a node does; it stays
    registered while the socket is open."""
    body = struct.pack(">BHBBHHH", 120, 9999, 77, 0, 6, 5, len(name)) + name + b"\0\0"
    connection = socket.create_connection(("127.0.0.1", port), timeout=5)
    connection.sendall(struct.pack(">H", len(body)) + body)
    assert connection.recv(2) in (b"\x79\x00", b"\x76\x00")  # ALIVE2_(X_)RESP, result 0
    return connection


@pytest.mark.skipif(not os.path.exists("/usr/bin/epmd"), reason="no epmd (Erlang) here")
def test_an_epmd_we_started_is_stopped_only_when_unused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XROUTE_OWNED_DIR", str(tmp_path))
    port = _free_port()
    service = Owned("epmd")
    epmd = service.popen(["/usr/bin/epmd", "-port", str(port), "-address", "127.0.0.1"],
                         env={**os.environ, "ERL_EPMD_PORT": str(port)})
    try:
        deadline = time.monotonic() + 30
        while owned._epmd_names(port) is None:
            assert time.monotonic() < deadline and epmd.poll() is None
            time.sleep(0.1)
        node = _register(port, b"someone_else")
        service.stop()  # another node uses it: spared
        assert epmd.poll() is None
        node.close()
        assert epmd.pid in owned.stop_processes([service.token])
        assert _gone(epmd)
    finally:
        if epmd.poll() is None:
            epmd.kill()
            epmd.wait()
