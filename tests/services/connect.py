"""A Spark Connect server on 127.0.0.1, started from the script the pyspark package ships
(``sbin/start-connect-server.sh``), on a free port, with private pid and log folders; stopped
by its process group whatever happens.

It runs in the foreground (``--wait``) as a child of the test process, so that stopping it
never depends on a pid file, and its log is quoted when it fails to start.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.services.cluster import ClusterFailed, free_port, stop, tail, wait_for

# A JVM, Spark's jars and the Connect service on a shared, loaded 2-core machine: 10-25 s
# when idle, several times that under load.
START_TIMEOUT_S = 240


def spark_home() -> Path:
    """The installed pyspark folder, which holds Spark's jars and ``sbin/``."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


class ConnectServer:
    """`start`, use `url` (``sc://127.0.0.1:PORT``) with ``SparkSession.builder.remote``,
    `stop`. ``workdir`` holds its log, pid folder and Spark's scratch space."""

    def __init__(self, workdir: Path, master: str = "local[2,3]") -> None:
        self.workdir = Path(workdir)
        self.master = master
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.log = self.workdir / "connect-server.log"
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
        env.update(
            {
                "SPARK_HOME": str(spark_home()),
                "SPARK_PID_DIR": str(self.workdir / "pid"),
                "SPARK_LOG_DIR": str(self.workdir / "logs"),
                "SPARK_LOCAL_DIRS": str(self.workdir / "local"),
                "SPARK_LOCAL_IP": "127.0.0.1",
                # The server's Python workers run the client's functions: the venv's Python,
                # importing the xroute the tests import (this checkout's first).
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
        command = [
            str(spark_home() / "sbin" / "start-connect-server.sh"),
            "--wait",  # in the foreground: this process is the server's parent
            "--master",
            self.master,
            "--conf",
            f"spark.connect.grpc.binding.port={self.port}",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.execution.arrow.maxRecordsPerBatch=65536",
        ]
        with self.log.open("wb") as sink:
            self._process = subprocess.Popen(
                command,
                env=self._env(),
                stdout=sink,
                stderr=sink,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            wait_for(
                lambda: socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                is None,
                "the Spark Connect server's port",
                [self._process],
                self.log,
                timeout=START_TIMEOUT_S,
            )
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the server's log (for failure messages)."""
        return tail(self.log, chars)

    def stop(self) -> None:
        """Stop the server (its JVM and Python workers: its whole process group)."""
        if self._process is not None:
            stop(self._process)
            self._process = None


__all__ = ["ClusterFailed", "ConnectServer", "spark_home"]
