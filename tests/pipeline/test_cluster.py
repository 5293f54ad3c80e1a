"""The same job on a Spark standalone cluster: a master and one worker on 127.0.0.1, started
from the classes the pyspark package ships, the job run against ``spark://127.0.0.1:PORT`` by
the command line (its own SparkContext, in its own process), its output equal to the local
run's. Both processes are stopped by their PIDs, whatever happens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pyarrow.parquet as pq
import pytest

from tests.pipeline import data
from tests.services.cluster import ClusterFailed, StandaloneCluster
from xroute.spark.job import PipelineOptions, run_pipeline

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


@pytest.fixture
def standalone(tmp_path) -> Iterator[str]:
    """A master and one worker on loopback (sharing this machine's disk); yields the master URL."""
    cluster = StandaloneCluster(tmp_path / "cluster")
    try:
        cluster.start()
    except ClusterFailed as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield cluster.master_url
    finally:
        cluster.stop()


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
