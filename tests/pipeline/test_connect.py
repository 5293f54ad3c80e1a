"""The pipeline and ``xroute diff -m`` on a Spark Connect session (a real server from the
pyspark package, on loopback) give exactly what they give on a classic session: the same
outputs, row for row, and the same summary; ``--remote`` and ``SPARK_REMOTE`` reach it."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import diff_planted as planted
from tests.pipeline import data
from tests.services.cluster import driver_env
from xroute.spark.diff import DiffOptions, run_diff
from xroute.spark.job import PipelineOptions, run_pipeline

pytestmark = pytest.mark.spark
COUNT = 2000
OUTPUTS = ("deliveries", "unroutable", "rejected")
# What a summary holds that depends on the session or the clock, not on the messages.
# The pyarrow reader: its splits are read through spark.range on Connect (Spark's own reader
# is a plain mapInArrow, which the route() tests run on Connect).
READERS = ("pyarrow",)
RUN_FIELDS = ("wall_time_s", "messages_per_s", "session_start_s", "master", "phases_s", "task_seconds", "partitions")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("connect")
    (folder / "defs.json").write_text(json.dumps(data.definitions()))
    records = data.messages(COUNT, seed=23)
    pq.write_table(data.table(records), folder / "messages.parquet", row_group_size=400)
    rng = random.Random("e2e-3")  # a seed whose renamed queue gets traffic
    export = planted.random_export(rng)
    (folder / "old.json").write_text(json.dumps(export))
    (folder / "new.json").write_text(json.dumps(planted.plant(export, "rename-queue", rng)))
    msgs = planted.messages(rng, 300)
    table = pa.table(
        {
            "exchange": [e for _, e, _, _ in msgs],
            "routing_key": [k for _, _, k, _ in msgs],
            "headers": [None if h is None else json.dumps(h) for *_, h in msgs],
        }
    )
    pq.write_table(table, folder / "log.parquet")
    return folder


def job(session, dataset: Path, out: Path, reader: str) -> dict:
    options = PipelineOptions(
        definitions=str(dataset / "defs.json"),
        messages=str(dataset / "messages.parquet"),
        out=str(out),
        keep_columns=("size",),
        reader=reader,
    )
    return run_pipeline(session, options)


def diff(session, dataset: Path, out: Path) -> dict:
    options = DiffOptions(
        old=str(dataset / "old.json"),
        new=str(dataset / "new.json"),
        messages=str(dataset / "log.parquet"),
        out=str(out),
    )
    return run_diff(session, options).to_dict()


@pytest.fixture(scope="module")
def classic(spark, dataset, tmp_path_factory) -> tuple[Path, dict]:
    """The classic session's runs, made before any test switches pyspark to Connect mode
    (pyspark.sql picks one mode per process: see the ``spark_connect`` fixture)."""
    folder = tmp_path_factory.mktemp("classic")
    results = {reader: job(spark, dataset, folder / reader, reader) for reader in READERS}
    results["diff"] = diff(spark, dataset, folder / "diff")
    return folder, results


def rows(out: Path, name: str) -> list[tuple]:
    """An output's rows, sorted, as tuples of every column."""
    table = pq.read_table(out / name)
    return sorted(tuple(row.values()) for row in table.to_pylist())


def comparable(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in RUN_FIELDS}


@pytest.mark.parametrize("reader", READERS)
def test_the_job_on_connect_equals_the_classic_run(classic, spark_connect, dataset, tmp_path, reader):
    folder, results = classic
    summary = job(spark_connect, dataset, tmp_path / "out", reader)

    assert summary["master"].startswith("sc://127.0.0.1:")
    assert comparable(summary) == comparable(results[reader])
    assert summary["counts"]["input"] == COUNT
    for name in OUTPUTS:
        assert rows(tmp_path / "out", name) == rows(folder / reader, name), name
    assert (tmp_path / "out" / "_SUCCESS").exists()


def test_diff_on_connect_equals_the_classic_run(classic, spark_connect, dataset, tmp_path):
    folder, results = classic
    traffic = diff(spark_connect, dataset, tmp_path / "out")
    assert traffic == results["diff"] and traffic["counts"]["changed"] > 0
    assert rows(tmp_path / "out", "changes") == rows(folder / "diff", "changes")


def test_the_cli_runs_on_the_server_named_by_spark_remote(connect_server, dataset, tmp_path):
    """A fresh process, as a user runs it: ``SPARK_REMOTE`` names the server, no Java here."""
    out = tmp_path / "out"
    env = driver_env({"SPARK_REMOTE": connect_server.url})
    result = subprocess.run(
        [str(Path(sys.executable).parent / "xroute"), "pipeline", "-d", str(dataset / "defs.json"),
         "-m", str(dataset / "messages.parquet"), "-o", str(out), "--no-progress"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\n{connect_server.log_tail()}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["master"].startswith(connect_server.url)
    assert summary["counts"]["input"] == COUNT


def test_master_and_remote_exclude_each_other(tmp_path):
    from click.testing import CliRunner

    from xroute.cli import cli

    result = CliRunner().invoke(
        cli, ["pipeline", "-d", "x.json", "-m", "m.parquet", "-o", str(tmp_path / "o"),
              "--master", "local[1]", "--remote", "sc://127.0.0.1:1"],
    )
    assert result.exit_code == 2 and "--master and --remote exclude each other" in result.output
    assert os.listdir(tmp_path) == []


def test_the_stream_on_connect_commits_every_message_exactly_once(spark_connect, tmp_path):
    """foreachBatch runs in the server's Python process: each batch is routed, proven and
    committed there, and this process reports the batches from their markers."""
    from tests.pipeline.streams import assert_exactly_once, landed_files, options
    from xroute import Topology
    from xroute.pipeline.stream_commit import committed_batches
    from xroute.spark.stream import run_stream

    records = landed_files(tmp_path)
    lines: list[str] = []
    summary = run_stream(spark_connect, options(tmp_path), say=lines.append)

    expected = data.expected(Topology.from_definitions(data.definitions()), records)
    assert list(committed_batches(str(tmp_path / "out"))) == [0, 1, 2]
    assert_exactly_once(str(tmp_path / "out"), expected, records)
    assert len(lines) == 3 and summary["master"].startswith("sc://")


def test_a_server_that_does_not_answer_is_named_in_one_line(dataset, tmp_path):
    """``--remote`` to a closed port: exit 2, one line naming the server, no output written."""
    from xroute.bench.seaweedfs import free_ports

    (port,) = free_ports(1)
    out = tmp_path / "out"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "xroute"), "pipeline", "-d", str(dataset / "defs.json"),
         "-m", str(dataset / "messages.parquet"), "-o", str(out), "--no-progress",
         "--remote", f"sc://127.0.0.1:{port}"],
        env=driver_env({}), capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 2, f"{result.stdout}\n{result.stderr}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"sc://127.0.0.1:{port}" in lines[0], result.stderr
    assert "Spark Connect" in lines[0]
    assert not out.exists() or not any(out.iterdir())


def test_a_lost_server_is_one_error_for_the_job_and_the_stream():
    """The gRPC error a Connect client raises when its server is gone becomes
    `SparkConnectUnavailable` in a line, whichever command ran; other failures do not."""
    from xroute.core.errors import PipelineFailed, SparkConnectUnavailable
    from xroute.spark.job import spark_failure

    class SparkConnectGrpcException(Exception):  # pyspark's, by name: what server_lost reads
        pass

    gone = SparkConnectGrpcException(
        "<_MultiThreadedRendezvous of RPC that terminated with:\n"
        "\tstatus = StatusCode.UNAVAILABLE\n"
        '\tdetails = "failed to connect to all addresses; Connection refused"\n>'
    )
    error = spark_failure(gone, "messages.parquet")
    assert isinstance(error, SparkConnectUnavailable)
    assert str(error) == (
        "lost the Spark Connect server (the driver): failed to connect to all addresses; "
        "Connection refused"
    )
    other = spark_failure(SparkConnectGrpcException("status = StatusCode.INTERNAL"), "m")
    assert isinstance(other, PipelineFailed)
