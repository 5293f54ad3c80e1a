"""The same job on a Spark standalone cluster: a master and one worker on 127.0.0.1, started
from the classes the pyspark package ships, the job run against ``spark://127.0.0.1:PORT`` by
the command line (its own SparkContext, in its own process), its output equal to the local
run's. Both processes are stopped by their PIDs, whatever happens."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.pipeline import data
from xroute.pipeline.job import PipelineOptions, run_pipeline

pytestmark = pytest.mark.spark
START_TIMEOUT = 90  # seconds for the master to listen and the worker to register


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return str(Path(_find_spark_home()) / "bin" / "spark-class")


def wait_for(check, what: str, processes: list[subprocess.Popen], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for process in processes:
            if process.poll() is not None:
                pytest.fail(
                    f"{process.args[1]} exited with {process.returncode}: {log.read_text()[-2000:]}"
                )
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}: {log.read_text()[-2000:]}")


def stop(process: subprocess.Popen) -> None:
    """Stop a process we started, by its PID (and the executors it started, in its group)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)


@pytest.fixture
def standalone(tmp_path) -> Iterator[str]:
    """A master and one worker on loopback; yields the master URL."""
    port, ui, worker_ui = free_port(), free_port(), free_port()
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
        "PYSPARK_PYTHON": sys.executable,
    }
    log = tmp_path / "cluster.log"
    started: list[subprocess.Popen] = []
    with log.open("wb") as sink:
        try:
            started.append(
                subprocess.Popen(
                    [
                        spark_class(),
                        "org.apache.spark.deploy.master.Master",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--webui-port",
                        str(ui),
                    ],
                    env=env,
                    stdout=sink,
                    stderr=sink,
                    start_new_session=True,
                )
            )
            wait_for(
                lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() is None,
                "the master",
                started,
                log,
            )
            url = f"spark://127.0.0.1:{port}"
            started.append(
                subprocess.Popen(
                    [
                        spark_class(),
                        "org.apache.spark.deploy.worker.Worker",
                        url,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "2",
                        "--memory",
                        "2g",
                        "--webui-port",
                        str(worker_ui),
                        "--work-dir",
                        str(tmp_path / "work"),
                    ],
                    env=env,
                    stdout=sink,
                    stderr=sink,
                    start_new_session=True,
                )
            )

            def registered() -> bool:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as page:
                    return json.load(page).get("aliveworkers", 0) >= 1

            wait_for(registered, "the worker to register", started, log)
            yield url
        finally:
            for process in reversed(started):
                stop(process)


def test_cluster_run_equals_local_run(spark, standalone, tmp_path):
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    records = data.messages(1500, seed=33)
    source = tmp_path / "in"
    source.mkdir()
    # No message_id column: the generated ids must not depend on where the job ran.
    table = data.table(records).drop_columns(["message_id"])
    pq.write_table(table.slice(0, 800), source / "a.parquet", row_group_size=200)
    pq.write_table(table.slice(800), source / "b.parquet", row_group_size=200)
    # The trie engine: executors import the shipped zip, and numba would compile the batch
    # kernels for it first (once per version of the source), which is not what this tests.
    local = tmp_path / "local"
    run_pipeline(
        spark,
        PipelineOptions(
            definitions=str(tmp_path / "defs.json"),
            messages=str(source),
            out=str(local),
            engine="trie",
        ),
    )
    remote = tmp_path / "remote"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from xroute.cli import main; main()",
            "pipeline",
            "--master",
            standalone,
            "-d",
            str(tmp_path / "defs.json"),
            "-m",
            str(source),
            "-o",
            str(remote),
            "--no-progress",
            "--engine",
            "trie",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("deliveries", "unroutable", "rejected"):
        ours = pq.read_table(local / name).to_pylist()
        theirs = pq.read_table(remote / name).to_pylist()
        key = lambda row: json.dumps(row, sort_keys=True, default=str)  # noqa: E731
        assert sorted(map(key, theirs)) == sorted(map(key, ours)), name
    summaries = [json.loads((folder / "summary.json").read_text()) for folder in (local, remote)]
    assert summaries[1]["master"] == standalone
    for field in ("counts", "queues", "bindings", "top_unroutable_keys", "rejected_by_error"):
        assert summaries[1][field] == summaries[0][field], field
