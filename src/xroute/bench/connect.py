"""A private Spark Connect server for tests and benchmarks: the script the pyspark package
ships (``sbin/start-connect-server.sh``), on a free loopback port, with private pid, log and
scratch folders, run in the foreground as a child of this process and stopped with every process
it started whatever happens (never through a pid file), even if this process is killed
(`xroute.bench.owned`).

Its Python workers run the client's functions: they use this Python and import the xroute this
process imports (its ``sys.path`` is their ``PYTHONPATH``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from xroute.bench.owned import Owned
from xroute.bench.seaweedfs import free_ports

# A JVM, Spark's jars and the Connect service on a shared, loaded 2-core machine: 10-25 s
# when idle, several times that under load.
START_TIMEOUT_S = 240
STOP_GRACE_S = 30  # the JVM's shutdown hooks


class ConnectUnavailable(RuntimeError):
    """The server did not start; the message says why and quotes its log."""


def spark_home() -> Path:
    """The installed pyspark folder, which holds Spark's jars and ``sbin/``."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


class ConnectServer:
    """`start`, use `url` (``sc://127.0.0.1:PORT``) with ``SparkSession.builder.remote`` or
    ``xroute ... --remote``, `stop` (or use it as a context manager). ``workdir`` holds its log
    (`log`), pid folder and Spark's scratch space."""

    def __init__(self, workdir: Path, master: str = "local[2,3]") -> None:
        self.workdir = Path(workdir)
        self.master = master
        (self.port,) = free_ports(1)
        self.url = f"sc://127.0.0.1:{self.port}"
        self.log = self.workdir / "connect-server.log"
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._owned = Owned("spark-connect", self.workdir)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
        env.pop("SPARK_REMOTE", None)  # the server is not a client
        env.update(
            {
                "SPARK_HOME": str(spark_home()),
                "SPARK_PID_DIR": str(self.workdir / "pid"),
                "SPARK_LOG_DIR": str(self.workdir / "logs"),
                "SPARK_LOCAL_DIRS": str(self.workdir / "local"),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable,
                "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and Path(p).is_dir()),
                "NUMBA_CACHE_DIR": str(Path.home() / ".cache" / "xroute" / "numba"),
            }
        )
        return env

    def start(self) -> ConnectServer:
        """Start the server and wait until its gRPC port accepts connections."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        settings = {
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
        }
        command = [str(spark_home() / "sbin" / "start-connect-server.sh"), "--wait"]
        command += ["--master", self.master]
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        with self.log.open("wb") as sink:
            self._process = self._owned.popen(
                command, env=self._env(), stdout=sink, stderr=sink, stdin=subprocess.DEVNULL
            )
        try:
            self._wait_for_port()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _wait_for_port(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ConnectUnavailable(
                    f"the Spark Connect server exited with {self._process.returncode}: "
                    f"{self.log_tail()}"
                )
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            time.sleep(0.5)
        raise ConnectUnavailable(
            f"the Spark Connect server did not listen on port {self.port} within "
            f"{START_TIMEOUT_S} s: {self.log_tail()}"
        )

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the server's log (for failure messages)."""
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return f"(no log at {self.log})"

    def stop(self) -> None:
        """Stop the server: its JVM and Python workers, every process it started (SIGTERM,
        SIGKILL after a grace)."""
        process, self._process = self._process, None
        self._owned.stop(STOP_GRACE_S)
        if process is not None:
            process.wait(timeout=30)

    def kill(self) -> None:
        """SIGKILL every process of the server at once, as a crash would (for tests that kill
        the driver); `stop` then only reaps it."""
        if self._process is not None:
            self._owned.kill()

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@contextlib.contextmanager
def connect_server(master: str = "local[2,3]") -> Iterator[ConnectServer]:
    """A started private server in a temporary folder, stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="xroute-connect-") as folder:
        with ConnectServer(Path(folder), master) as server:
            yield server
