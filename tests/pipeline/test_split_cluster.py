"""The pipeline, `xroute diff` and `xroute.spark.route` on a split cluster: a standalone master
and a worker in its own mount namespace (fixture ``split_cluster``), which shares no disk with
the driver, only the S3 store. Input, definitions and output are ``s3://`` URIs; the executors
import the package the driver ships. The three run in one driver process (`split_driver`, the
fixture ``split_runs``): each step is what the command line or a user's script does, on the
session the first step started, which saves two driver and executor starts. A first step
proves the cluster itself (what its executors see), a third one saved."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import diff_planted as planted
from tests.pipeline import data
from tests.pipeline.test_object_store import OUTPUTS, objects, read_object, rows, upload
from tests.pipeline.test_spark_route import expected_row
from xroute import Topology
from xroute.cli import EXIT_DIFF_CHANGED
from xroute.spark.job import PipelineOptions, run_pipeline

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.cluster]
XDIST_GROUP = "jvm-drivers"  # drivers and clusters of its own: beside the shared session (tests/conftest.py)
REPO = Path(__file__).resolve().parents[2]
ROUTED = (1500, 7)  # records routed by `xroute.spark.route`: count and seed


def driver_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


@dataclass
class SplitRuns:
    """The inputs the steps read and what each step of the one driver gave."""

    workdir: Path  # the pipeline's local input (``in/``) and definitions (``defs.json``)
    probe_bucket: str  # where the probe's tasks wrote
    hidden: list[str]  # the folders the worker must not see into
    pipeline_out: str
    diff_out: str
    diff_expected: dict[str, Any]
    results: dict[str, dict[str, Any]]
    context: str  # the driver's stderr and the executors' logs, for a failing assertion

    def step(self, name: str) -> dict[str, Any]:
        """A step's result, its traceback (if any) in the message of a failed assertion."""
        result = self.results[name]
        assert result["error"] is None, f"{result['error']}\n{self.context}"
        return result


@pytest.fixture(scope="module")
def split_runs(split_cluster, s3_store, tmp_path_factory) -> SplitRuns:
    workdir = tmp_path_factory.mktemp("split")
    bucket = s3_store.new_bucket("split")
    messages, definitions, _ = upload(s3_store, bucket, workdir)
    pipeline_out, diff_out = f"{bucket}/routed", f"{bucket}/diff"
    diff_log, diff_expected = _upload_diff_inputs(s3_store, bucket)
    driver_file = workdir / "only-on-the-driver.txt"
    driver_file.write_text("the executors must not see this")
    probe_bucket = s3_store.new_bucket("split-probe")
    hidden = [str(folder) for folder in split_cluster.hidden]
    steps = {
        # First: the executors as they start, before any other step has run on them.
        "probe": {"probe": [str(driver_file), probe_bucket, hidden]},
        "route": {"route": [definitions, *ROUTED]},
        "pipeline": {"cli": [
            "pipeline", "--master", split_cluster.master_url, "-d", definitions, "-m", messages,
            "-o", pipeline_out, "--engine", "trie", "--no-progress",
        ]},
        "diff": {"cli": [
            "diff", f"{bucket}/old.json", f"{bucket}/new.json", "-m", diff_log, "-o", diff_out,
            "--master", split_cluster.master_url, "--engine", "trie", "--json",
        ]},
    }  # fmt: skip
    # The trie engine: the namespaced worker has a fresh numba cache, and compiling the batch
    # kernels there is not what this tests.
    steps_file, results_file = workdir / "steps.json", workdir / "results.json"
    steps_file.write_text(json.dumps(steps))
    driver = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("split_driver.py")),
         split_cluster.master_url, str(steps_file), str(results_file)],
        capture_output=True, text=True, timeout=900, check=False, env=driver_env(),
    )  # fmt: skip
    context = f"driver stderr:\n{driver.stderr[-3000:]}\n{split_cluster.failure_context()}"
    assert driver.returncode == 0 and results_file.exists(), context
    results = json.loads(results_file.read_text())
    return SplitRuns(
        workdir, probe_bucket, hidden, pipeline_out, diff_out, diff_expected, results, context
    )


def _upload_diff_inputs(s3_store, bucket: str) -> tuple[str, dict[str, Any]]:
    """A planted change and a log of 600 messages in ``bucket``; the log's URI and what a
    message-by-message comparison of the two topologies gives on it."""
    rng = random.Random("split-diff")
    export = planted.random_export(rng)
    new_export = planted.plant(export, "widen-pattern", rng)
    msgs = planted.messages(rng, 600)
    table = pa.table({
        "message_id": [m for m, *_ in msgs],
        "exchange": [e for _, e, _, _ in msgs],
        "routing_key": [k for _, _, k, _ in msgs],
        "headers": [None if h is None else json.dumps(h) for *_, h in msgs],
    })  # fmt: skip
    filesystem, root = s3_store.filesystem(), bucket.removeprefix("s3://")
    for name, part in (("a", table.slice(0, 250)), ("b", table.slice(250))):
        with filesystem.open_output_stream(f"{root}/log/{name}.parquet") as sink:
            pq.write_table(part, sink, row_group_size=100)
    for name, value in (("old", export), ("new", new_export)):
        with filesystem.open_output_stream(f"{root}/{name}.json") as sink:
            sink.write(json.dumps(value).encode())
    expected = planted.oracle(Topology.from_definitions(export), Topology.from_definitions(new_export), msgs)
    assert expected["counts"]["changed"] > 0  # the planted change shows in this traffic
    return f"{bucket}/log", expected


def test_pipeline_on_a_split_cluster_equals_the_local_run(spark, split_runs, split_cluster, s3_store):
    result = split_runs.step("pipeline")
    assert result["exit"] == 0, f"{result['stdout'][-3000:]}\n{split_runs.context}"
    local_out = split_runs.workdir / "local"
    local = run_pipeline(
        spark,
        PipelineOptions(
            definitions=str(split_runs.workdir / "defs.json"),
            messages=str(split_runs.workdir / "in"),
            out=str(local_out),
            engine="trie",
        ),
    )
    out = split_runs.pipeline_out
    for name in OUTPUTS:
        assert rows(f"{out}/{name}") == rows(str(local_out / name)), name
    remote = json.loads(read_object(s3_store, f"{out}/summary.json"))
    assert remote["master"] == split_cluster.master_url
    for field in ("counts", "queues", "bindings", "top_unroutable_keys", "rejected_by_error"):
        assert remote[field] == local[field], field
    assert json.loads(read_object(s3_store, f"{out}/_SUCCESS"))["counts"] == local["counts"]


def test_route_on_a_split_cluster_equals_the_library(split_runs):
    result = split_runs.step("route")
    routed = {r["id"]: r for r in map(json.loads, result["stdout"].splitlines())}
    records = data.messages(*ROUTED)
    assert sorted(routed) == sorted(r["message_id"] for r in records), "one row per record"
    topology = Topology.from_definitions(data.definitions())
    for record in records:
        row = routed[record["message_id"]]
        wanted = expected_row(topology, record["exchange"], record["routing_key"], record["headers"])
        assert (row["queues"], row["error"]) == wanted, record


def test_diff_on_a_split_cluster_equals_the_library(split_runs, s3_store):
    """``xroute diff`` with the log, both topologies and OUT in S3: its counts, per-queue
    gains and losses and changes/ rows equal a message-by-message comparison."""
    result = split_runs.step("diff")
    assert result["exit"] == EXIT_DIFF_CHANGED, f"{result['stdout'][-3000:]}\n{split_runs.context}"
    out, expected = split_runs.diff_out, split_runs.diff_expected
    report = json.loads(read_object(s3_store, f"{out}/diff.json"))
    assert json.loads(result["stdout"]) == report
    counts = report["traffic"]["counts"]
    for name in ("messages", "changed", "gained_a_queue", "lost_a_queue", "became_unroutable", "became_routable", "refused_before", "refused_after"):
        assert counts[name] == expected["counts"][name], name
    per_queue = {r["queue"]: (r["gained"], r["lost"]) for r in report["traffic"]["per_queue"]}
    assert per_queue == expected["per_queue"]
    changes = pq.read_table(f"{out}/changes").to_pylist()
    assert {r["message_id"]: (r["queues_before"], r["queues_after"]) for r in changes} == expected["changes"]
    published = objects(s3_store, out)
    assert "_SUCCESS" in published and "diff.png" in published
    assert not [key for key in published if key.startswith("_temporary")]


def test_split_cluster_shares_nothing_but_the_store(split_runs, s3_store):
    """The executors see neither the driver's files nor the checkout nor xroute's cache, import
    the xroute the driver shipped, and write to the store, where the driver reads it back."""
    hidden = split_runs.hidden
    assert str(REPO / "src") in hidden
    # The control: on the driver's side every hidden folder has entries (the cache has the zip).
    assert [folder for folder in hidden if not os.listdir(folder)] == []
    result = split_runs.step("probe")
    report = json.loads(result["stdout"].strip().splitlines()[-1])
    tasks = report["tasks"]
    assert sorted(task["index"] for task in tasks) == [0, 1], split_runs.context
    for task in tasks:
        assert task["driver_folder_exists"] is False, task
        assert task["driver_file_exists"] is False, task
        assert task["visible_hidden"] == [], task
        # xroute comes from the zip the driver shipped with addPyFile, nowhere else.
        assert task["xroute_file"] is not None, task
        assert ".zip/xroute/" in task["xroute_file"], task
        assert not task["xroute_file"].startswith(str(REPO)), task
        assert task["wrote"] == f"task-{task['index']}.txt", task
    store = s3_store.filesystem()
    name = split_runs.probe_bucket.removeprefix("s3://")
    for task in tasks:
        key = f"task-{task['index']}.txt"
        expected = f"written by task {task['index']} in pid {task['pid']}"
        assert report["read_back"][key] == expected
        with store.open_input_stream(f"{name}/{key}") as source:
            assert source.read().decode() == expected
