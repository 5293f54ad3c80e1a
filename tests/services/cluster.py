"""A Spark standalone cluster on 127.0.0.1, started from the classes the pyspark package ships:
one master and one worker, stopped with all they started whatever happens, even if the test
process is killed (`xroute.bench.owned`).

Split (``split=True``), the worker runs in its own mount namespace with a private tmpfs over
/tmp (where pytest's ``tmp_path`` lives), over the checkout's ``src`` and the folder the venv
imports xroute from, and over the driver's ``~/.cache/xroute`` (where the package zip is built).
Its executors then share nothing with the driver but the venv, the network and what the driver
ships: they must import the xroute that ``addPyFile`` sent, as on a real cluster, and reach data
through a storage URI (the S3 store), not a path. This needs ``unshare --mount`` (util-linux) and
the right to make a mount namespace (root or CAP_SYS_ADMIN).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

from xroute.bench.owned import Owned

START_TIMEOUT_S = 90  # the master to listen and the worker to register (JVMs, a loaded machine)
REPO = Path(__file__).resolve().parents[2]
# Inside the worker's namespace: its private /tmp holds all it writes.
PRIVATE_WORK_DIR = "/tmp/spark-worker"
PRIVATE_NUMBA_DIR = "/tmp/numba"
# An empty folder outside /tmp where, inside the namespace only, a venv under /tmp is parked.
VENV_PARKING = "/mnt"
# Variables of the test process the worker must not inherit: a relative PYTHONPATH=src would
# let executors import the checkout, and a gateway port belongs to the driver's JVM.
NOT_INHERITED = ("PYTHONPATH", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")


def _under(path: Path, folder: Path) -> bool:
    return path.resolve() == folder or folder in path.resolve().parents


class ClusterFailed(RuntimeError):
    """The cluster could not start; the message says why and quotes its log."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def spark_class() -> str:
    """The ``bin/spark-class`` launcher of the installed pyspark."""
    from pyspark.find_spark_home import _find_spark_home

    return str(Path(_find_spark_home()) / "bin" / "spark-class")


def tail(path: Path, chars: int = 3000) -> str:
    """The end of a log file, or a note that there is none."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return f"(no log at {path})"


def wait_for(
    check: Callable[[], bool],
    what: str,
    processes: list[subprocess.Popen[bytes]],
    log: Path,
    timeout: float = START_TIMEOUT_S,
) -> None:
    """Poll ``check`` until it is true; `ClusterFailed` with the log's tail if one of
    ``processes`` exits first or ``timeout`` passes (connection errors count as not yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in processes:
            if process.poll() is not None:
                raise ClusterFailed(
                    f"{process.args[1]} exited with {process.returncode} while waiting for "
                    f"{what}: {tail(log)}"
                )
        with contextlib.suppress(OSError):
            if check():
                return
        time.sleep(0.5)
    raise ClusterFailed(f"timed out after {timeout:.0f} s waiting for {what}: {tail(log)}")


def driver_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a Spark driver run in a subprocess (a test's own SparkContext holds
    this process): this one's, without the running JVM's gateway, with this checkout's ``src``
    on ``PYTHONPATH`` (absolute, so any working folder will do), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    env["PYTHONPATH"] = str(REPO / "src")
    env.update(extra or {})
    return env


def xroute_import_folders(python: str = sys.executable) -> list[Path]:
    """Folders from which ``python`` could import xroute without the shipped zip: this
    checkout's ``src`` and the folder the venv's own install points at (an editable install's
    ``src``; for a plain install, the package folder itself, not all of site-packages)."""
    folders = [REPO / "src"]
    env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    found = subprocess.run(
        [python, "-c", "import xroute; print(xroute.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=60,
        check=False,
    )
    if found.returncode == 0 and found.stdout.strip():
        package = Path(found.stdout.strip()).resolve().parent
        installed = package.parent
        in_site_packages = installed.name in ("site-packages", "dist-packages")
        folders.append(package if in_site_packages else installed)
    unique: list[Path] = []
    for folder in folders:
        if folder.is_dir() and folder not in unique:
            unique.append(folder)
    return unique


def check_unshare() -> None:
    """`ClusterFailed` saying what to do unless this process may run ``unshare --mount``."""
    if shutil.which("unshare") is None:
        raise ClusterFailed(
            "the split cluster needs 'unshare' (util-linux) to give its worker a private "
            "mount namespace: apt-get install util-linux"
        )
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if probe.returncode != 0:
        raise ClusterFailed(
            "the split cluster needs the right to make a mount namespace ('unshare --mount' "
            f"failed: {probe.stderr.strip() or probe.returncode}); run the tests as root (as CI "
            "does) or with CAP_SYS_ADMIN"
        )


class StandaloneCluster:
    """A master and one worker on loopback: `start`, use `master_url`, `stop` (or use it as a
    context manager). ``split=True`` puts the worker in its own mount namespace (module
    docstring); ``env`` is added to the worker's environment (for example the S3 store's
    ``AWS_*`` variables)."""

    def __init__(
        self,
        workdir: Path,
        split: bool = False,
        env: Mapping[str, str] | None = None,
        cores: int = 2,
        memory: str = "2g",
    ) -> None:
        """Prepare (not start) a cluster whose logs go to ``workdir`` (on the driver's side)."""
        self.workdir = Path(workdir)
        self.split = split
        self.extra_env = dict(env or {})
        self.cores = cores
        self.memory = memory
        self.port, self.ui_port, self.worker_ui_port = free_port(), free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.master_log = self.workdir / "master.log"
        self.worker_log = self.workdir / "worker.log"
        self.hidden: list[Path] = []
        self.startup_seconds: float | None = None
        self._started: list[subprocess.Popen[bytes]] = []
        self._owned = Owned("spark-cluster", self.workdir)

    def _worker_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
        env.update(
            {
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_NO_DAEMONIZE": "1",
                "PYSPARK_PYTHON": sys.executable,
                "SPARK_WORKER_DIR": PRIVATE_WORK_DIR if self.split else str(self.work_dir),
            }
        )
        if self.split:
            env["NUMBA_CACHE_DIR"] = PRIVATE_NUMBA_DIR
        env.update(self.extra_env)
        return env

    @property
    def work_dir(self) -> Path:
        """The worker's folder as the driver's side sees it (executor logs, shipped files)."""
        if self.split:
            # The worker's private /tmp, seen through its own root in /proc while it runs.
            worker = self._started[1].pid if len(self._started) > 1 else 0
            return Path(f"/proc/{worker}/root{PRIVATE_WORK_DIR}")
        return self.workdir / "work"

    def _worker_command(self) -> list[str]:
        worker = [
            spark_class(),
            "org.apache.spark.deploy.worker.Worker",
            self.master_url,
            "--host",
            "127.0.0.1",
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--webui-port",
            str(self.worker_ui_port),
            "--work-dir",
            PRIVATE_WORK_DIR if self.split else str(self.work_dir),
        ]
        if not self.split:
            return worker
        # The driver builds its package zip here: made now, or it would appear in the worker's
        # view when the driver creates it later (only a mount hides a folder).
        cache = Path.home() / ".cache" / "xroute"
        cache.mkdir(parents=True, exist_ok=True)
        self.hidden = [cache, *xroute_import_folders()]
        venv = Path(sys.prefix)
        keep_venv = _under(venv, Path("/tmp"))  # a checkout in /tmp (a CI clone, say)
        lines = ["set -e"]
        if keep_venv:
            # The venv is the cluster's installed software, not the driver's data: it stays
            # visible through a bind mount parked outside /tmp while the tmpfs goes on.
            lines.append(f"mount --bind {shlex.quote(str(venv))} {VENV_PARKING}")
        lines.append("mount -t tmpfs -o mode=1777 tmpfs /tmp")
        if keep_venv:
            lines += [
                f"mkdir -p {shlex.quote(str(venv))}",
                f"mount --bind {VENV_PARKING} {shlex.quote(str(venv))}",
            ]
        lines += [
            f"mount -t tmpfs -o mode=755 tmpfs {shlex.quote(str(folder))}"
            for folder in self.hidden
            if not _under(folder, Path("/tmp"))  # the private /tmp hides it already
        ]
        lines += [f"mkdir -p {PRIVATE_WORK_DIR} {PRIVATE_NUMBA_DIR}", f"exec {shlex.join(worker)}"]
        # sh execs spark-class, which execs java: the Popen's PID is the worker's JVM.
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(lines)]

    def start(self) -> StandaloneCluster:
        """Start the master, then the worker, and wait until the worker has registered."""
        if self.split:
            check_unshare()
        self.workdir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        env = self._worker_env()
        try:
            with self.master_log.open("wb") as sink:
                master = [
                    spark_class(),
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--webui-port",
                    str(self.ui_port),
                ]
                self._started.append(self._owned.popen(master, env=env, stdout=sink, stderr=sink))
            wait_for(
                lambda: socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                is None,
                "the master",
                self._started,
                self.master_log,
            )
            with self.worker_log.open("wb") as sink:
                self._started.append(
                    self._owned.popen(
                        self._worker_command(),
                        env=env,
                        stdout=sink,
                        stderr=sink,
                        stdin=subprocess.DEVNULL,
                    )
                )
            wait_for(self._registered, "the worker to register", self._started, self.worker_log)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _registered(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as page:
            return json.load(page).get("aliveworkers", 0) >= 1

    def executor_logs(self, chars: int = 3000) -> str:
        """The tail of every executor's stderr (for failure messages), read while the worker
        runs (a split worker's files exist only in its namespace)."""
        parts = []
        with contextlib.suppress(OSError):
            for path in sorted(self.work_dir.glob("app-*/*/stderr")):
                parts.append(f"--- {path.relative_to(self.work_dir)}\n{tail(path, chars)}")
        return "\n".join(parts) or "(no executor logs)"

    def failure_context(self) -> str:
        """The worker's log and the executors' stderr, to append to an assertion message."""
        return (
            f"worker log ({self.worker_log}):\n{tail(self.worker_log, 2000)}\n"
            f"executors:\n{self.executor_logs()}"
        )

    def stop(self) -> None:
        """Stop the worker, its executors and the master (SIGTERM, SIGKILL after a grace)."""
        self._owned.stop(grace=20)
        while self._started:
            self._started.pop().wait(timeout=20)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
