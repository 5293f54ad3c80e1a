"""Services that never outlive the process that started them, however it ends (SIGKILL too).

The test fixtures and ``xroute bench`` start services in sessions of their own: SeaweedFS, a
Spark Connect server, a standalone cluster, private RabbitMQ and Redis nodes, ``xroute serve``.
A run killed by a timeout or SIGKILL never reached their ``stop`` and left them running (JVMs
for hours). Every starter goes through `Owned.popen`, which adds:

- **A tag.** Each process of a service carries ``XROUTE_OWNED=<token>`` in its environment,
  a random token per service, inherited by whatever the service starts (the JVM behind a
  launcher script, Spark's Python workers and executors, a RabbitMQ node behind ``su``). The
  processes of a service are those that carry its token: a reused pid never does, and nothing
  we did not start does (the machine's broker, Redis, another run's services).
- **A watchdog.** One small process per owner (this file run as a script, stdlib only, in a
  session of its own so that a signal to the owner's group spares it) reads a pipe whose write
  end only the owner holds (not inherited: non-inheritable, closed in forked children). EOF
  means the owner is gone, however it went: the watchdog stops every service it was told of
  (SIGTERM, SIGKILL after a grace) and exits. ``PR_SET_PDEATHSIG`` would not do: it reaches one
  child, not what that child daemonized.
- **A registry as a backstop** (should a watchdog die too): one file per service in a per-user
  folder (`registry`), naming the owner by pid and start time. `reap_orphans`, called at each
  pytest session start and by ``xroute bench``, stops the services whose owner is gone.

An epmd that a private RabbitMQ node started carries the token too, but other nodes (the
machine's broker, restarted) may have registered with it since: it is stopped only when no
node is registered with it. An epmd that was running before carries no token and is never
touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

VARIABLE = "XROUTE_OWNED"  # the environment variable that tags a service's processes
REGISTRY_VARIABLE = "XROUTE_OWNED_DIR"  # where the registry is, if not the default
STOP_GRACE_S = 5.0  # SIGTERM first: a JVM's shutdown hooks or an Erlang VM's stop get this long
STOP_ROUNDS = 3  # look again: a service may start a process while it is being stopped
EPMD_WAIT_S = 3.0  # a killed node's name leaves epmd when epmd sees its socket close
EPMD_DEFAULT_PORT = 4369


def registry() -> Path:
    """The per-user folder of the registry: ``$XROUTE_OWNED_DIR``, else
    ``~/.cache/xroute/owned``."""
    folder = os.environ.get(REGISTRY_VARIABLE)
    return Path(folder) if folder else Path.home() / ".cache" / "xroute" / "owned"


# ----------------------------------------------------------------------- processes


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, /proc/PID/stat field 22), or None if it is
    gone or a zombie; with the pid, it names one process (pids are reused, this never is)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold anything: the fields follow the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])


def alive(pid: int, started: int | None) -> bool:
    """True if the process ``pid`` that started at ``started`` still runs."""
    return started is not None and start_time(pid) == started


def members(tokens: Iterable[str]) -> dict[int, str]:
    """The processes that carry one of ``tokens`` in their environment: pid -> command name
    (zombies left out). Processes whose environment we may not read are not found."""
    marks = {f"{VARIABLE}={token}".encode() for token in tokens}
    found: dict[int, str] = {}
    if not marks:
        return found
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if marks.isdisjoint(environ.split(b"\0")):
            continue
        pid = int(entry.name)
        if pid != os.getpid() and start_time(pid) is not None:
            found[pid] = _name(pid)
    return found


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _signal(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def stop_processes(
    tokens: Iterable[str], known: Iterable[tuple[int, int]] = (), grace: float = STOP_GRACE_S
) -> list[int]:
    """Stop every process that carries one of ``tokens``, and each ``(pid, start time)`` of
    ``known`` that still runs (found even where its environment cannot be read): SIGTERM, then
    SIGKILL after ``grace`` seconds for those still there, then an epmd of theirs if no node is
    registered with it. The pids signalled."""
    tokens, known = set(tokens), list(known)
    stopped: list[int] = []
    epmds: dict[int, int | None] = {}
    for _ in range(STOP_ROUNDS):
        found = members(tokens)
        found.update((pid, _name(pid)) for pid, started in known if alive(pid, started))
        # Each by pid and start time: a pid freed meanwhile and reused is not signalled.
        targets = {pid: start_time(pid) for pid, name in found.items() if name != "epmd"}
        epmds.update((pid, start_time(pid)) for pid, name in found.items() if name == "epmd")
        if not targets:
            break
        _signal(targets, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(alive(*p) for p in targets.items()):
            time.sleep(0.05)
        _signal([pid for pid, started in targets.items() if alive(pid, started)], signal.SIGKILL)
        stopped += sorted(targets)
    for pid, started in epmds.items():
        if alive(pid, started) and _epmd_unused(pid):
            _signal([pid], signal.SIGKILL)
            stopped.append(pid)
    return stopped


def _epmd_unused(pid: int) -> bool:
    """True if the epmd ``pid`` answers and has no node registered (a killed node's name goes
    when epmd sees its connection close: wait a little for that)."""
    try:
        environ = dict(
            item.split(b"=", 1)
            for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            if b"=" in item
        )
    except OSError:
        return False
    port = int(environ.get(b"ERL_EPMD_PORT", b"") or EPMD_DEFAULT_PORT)
    deadline = time.monotonic() + EPMD_WAIT_S
    while True:
        names = _epmd_names(port)
        if names is None or names:  # no answer, or in use: leave it be
            if names is None or time.monotonic() > deadline:
                return False
            time.sleep(0.2)
            continue
        return True


def _epmd_names(port: int) -> list[str] | None:
    """The nodes registered with the epmd on 127.0.0.1:``port`` (its NAMES_REQ), or None."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as connection:
            connection.sendall(struct.pack(">Hc", 1, b"n"))
            reply = b""
            while chunk := connection.recv(4096):
                reply += chunk
    except OSError:
        return None
    return [line for line in reply[4:].decode(errors="replace").splitlines() if line.strip()]


# ----------------------------------------------------------------------- registry


def _write(path: Path, record: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(record))
    os.replace(partial, path)  # readers never see half a record


def _remove(paths: Iterable[str]) -> None:
    """Delete what a service leaves behind (its temporary folder, sockets)."""
    for path in paths:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _me() -> tuple[int, int]:
    pid = os.getpid()
    started = start_time(pid)
    assert started is not None
    return pid, started


def reap_orphans(folder: Path | None = None) -> list[dict[str, Any]]:
    """Stop the services of the registry whose owner is gone, and forget them; the records of
    those reaped. Safe to race (each record is claimed by renaming it); services of owners
    still alive are left alone."""
    folder = folder or registry()
    reaped: list[dict[str, Any]] = []
    try:
        paths = sorted(folder.iterdir())
    except OSError:
        return reaped
    me = _me()
    for path in paths:
        name = path.name
        if name.endswith(".json") and not name.startswith("."):
            claimable = True
        elif ".json.reaping-" in name:  # claimed by a reaper: reclaim it if that reaper died
            reaper_pid, _, reaper_start = name.rpartition(".json.reaping-")[2].partition("-")
            claimable = not alive(int(reaper_pid), int(reaper_start))
        else:
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        owner_pid, owner_start = record["owner"]
        if not claimable or alive(owner_pid, owner_start):
            continue
        base = name.split(".json", 1)[0]
        claimed = path.with_name(f"{base}.json.reaping-{me[0]}-{me[1]}")
        try:
            path.rename(claimed)  # one reaper wins; the others find it gone
        except OSError:
            continue
        stop_processes([record["token"]], [tuple(p) for p in record.get("pids", ())])
        _remove(record.get("remove", ()))
        claimed.unlink(missing_ok=True)
        reaped.append(record)
    return reaped


# ----------------------------------------------------------------------- watchdog


class _Watchdog:
    """This process's watchdog: started on first use, restarted if it died, told of each
    service as it starts (``+TOKEN<tab>RECORD``) and stops (``-TOKEN``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.write_end: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.tokens: dict[str, str] = {}  # token -> its record's path

    def _start(self) -> None:
        read_end, write_end = os.pipe()  # both non-inheritable: no service ever holds them
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", str(Path(__file__).resolve()), "--watch"],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a signal to the owner's group must not reach it
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self.write_end = write_end

    def _send(self, line: str) -> None:
        for _ in range(2):
            if self.write_end is None or self.process is None or self.process.poll() is not None:
                self._close()
                self._start()
                line = "".join(f"+{t}\t{path}\n" for t, path in self.tokens.items()) + line
            try:
                os.write(self.write_end, line.encode())  # type: ignore[arg-type]
                return
            except BrokenPipeError:
                self._close()
        raise RuntimeError("the services' watchdog could not be started")

    def _close(self) -> None:
        if self.write_end is not None:
            with contextlib.suppress(OSError):
                os.close(self.write_end)
        self.write_end = None

    def watch(self, token: str, record: Path) -> None:
        with self.lock:
            self.tokens[token] = str(record)
            self._send(f"+{token}\t{record}\n")

    def forget(self, token: str) -> None:
        with self.lock:
            if self.tokens.pop(token, None) is not None:
                self._send(f"-{token}\n")

    def after_fork(self) -> None:
        """In a forked child: not the owner. Drop the write end (or the watchdog would see EOF
        only when the child exits too) and start a watchdog of its own if it starts services."""
        self._close()
        self.lock = threading.Lock()
        self.process = None
        self.tokens = {}


_WATCHDOG = _Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WATCHDOG.after_fork)


def _watch() -> None:
    """The watchdog's loop (stdin is the pipe): on EOF, or SIGTERM, stop what it watches."""

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, terminate)
    tokens: dict[str, Path] = {}  # token -> its record's path
    pending = b""
    try:
        while chunk := os.read(0, 4096):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                token, _, path = line[1:].decode().partition("\t")
                if line.startswith(b"+"):
                    tokens[token] = Path(path)
                elif line.startswith(b"-"):
                    tokens.pop(token, None)
    except SystemExit:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # finish the job
    records = []
    for path in tokens.values():
        with contextlib.suppress(OSError, ValueError):
            records.append(json.loads(path.read_text()))
    stop_processes(tokens, [tuple(pid) for record in records for pid in record.get("pids", ())])
    for record in records:
        _remove(record.get("remove", ()))
    for path in tokens.values():
        path.unlink(missing_ok=True)


# ----------------------------------------------------------------------- services


class Owned:
    """One service this process starts: `popen` its processes (tagged, watched, recorded),
    `stop` it (every process of it, whatever its own stop left), or `kill` it as a crash
    would. ``kind`` and ``workdir`` go into its record, to tell what it was; ``remove`` are
    paths (its temporary folder, sockets) deleted once it is stopped, by `stop` or else by the
    watchdog or a reaper."""

    def __init__(
        self, kind: str, workdir: str | Path | None = None, remove: Iterable[str | Path] = ()
    ) -> None:
        self.kind = kind
        self.workdir = None if workdir is None else str(workdir)
        self.remove = [str(path) for path in remove]
        self.token = f"{kind}-{os.getpid()}-{secrets.token_hex(8)}"
        self.pids: list[tuple[int, int]] = []
        self._entry: Path | None = None

    def _record(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "kind": self.kind,
            "workdir": self.workdir,
            "remove": self.remove,
            "owner": list(_me()),
            "pids": [list(p) for p in self.pids],
        }

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (by default this process's environment) with the service's tag."""
        return {**(os.environ if base is None else base), VARIABLE: self.token}

    def popen(self, command: list[str], **options: Any) -> subprocess.Popen[Any]:
        """Start one process of the service: `subprocess.Popen` with the tag added to
        ``options['env']`` (this environment if absent) and, unless told otherwise, a session
        of its own. The watchdog and the registry know of it before it starts."""
        if self._entry is None:
            self._entry = registry() / f"{self.token}.json"
            _write(self._entry, self._record())
            _WATCHDOG.watch(self.token, self._entry)
        options["env"] = self.env(options.get("env"))
        options.setdefault("start_new_session", True)
        try:
            process = subprocess.Popen(command, **options)
        except BaseException:
            if not self.pids:
                self.stop()
            raise
        started = start_time(process.pid)
        if started is not None:
            self.pids.append((process.pid, started))
            _write(self._entry, self._record())
        return process

    def processes(self) -> list[int]:
        """The pids of the service's processes now running."""
        found = set(members([self.token]))
        found.update(pid for pid, started in self.pids if alive(pid, started))
        return sorted(found)

    def kill(self) -> None:
        """SIGKILL every process of the service at once, as a crash would; it stays recorded
        until `stop`."""
        _signal(self.processes(), signal.SIGKILL)

    def stop(self, grace: float = STOP_GRACE_S) -> list[int]:
        """Stop every process of the service still running (SIGTERM, SIGKILL after ``grace``
        seconds), delete its ``remove`` paths and forget it; the pids signalled. Safe to call
        twice."""
        stopped = stop_processes([self.token], self.pids, grace)
        _remove(self.remove)
        if self._entry is not None:
            _WATCHDOG.forget(self.token)
            self._entry.unlink(missing_ok=True)
            self._entry = None
        return stopped


if __name__ == "__main__" and sys.argv[1:2] == ["--watch"]:
    _watch()
