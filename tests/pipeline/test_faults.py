"""Faults survived, and said plainly: a Python worker killed (SIGKILL) in the middle of a task
is retried by the local master (``local[2,3]``, as ``local[*,3]`` by default) and the run ends
with exact counts, no row counted twice; a task that dies on every try fails the run with a
sentence naming the partition, and leaves no output."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.pipeline import data
from xroute import Topology
from xroute.core.errors import PipelineFailed
from xroute.spark import job
from xroute.spark.job import PipelineOptions, run_pipeline

pytestmark = pytest.mark.spark
COUNT = 4000
VICTIM = 1  # the partition whose worker is killed


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, list[dict]]:
    folder = tmp_path_factory.mktemp("faults")
    (folder / "defs.json").write_text(json.dumps(data.definitions()))
    records = data.messages(COUNT, seed=33)
    pq.write_table(data.table(records), folder / "messages.parquet", row_group_size=500)
    return folder, records


def killing_after_writing(real, tries: int):
    """``partition_function`` whose worker kills itself (SIGKILL) in partition `VICTIM`'s
    first ``tries`` attempts, after its parts are written and before its manifest is returned:
    the worst moment, when a retry writes the same rows again under other names."""

    def partition_function(task, definitions):
        route = real(task, definitions)

        def route_partition(batches):
            import os
            import signal

            from pyspark import TaskContext

            context = TaskContext.get()
            for manifest in route(batches):
                if context.partitionId() == VICTIM and context.attemptNumber() < tries:
                    os.kill(os.getpid(), signal.SIGKILL)
                yield manifest

        return route_partition

    return partition_function


def options(folder: Path, out: Path) -> PipelineOptions:
    return PipelineOptions(
        definitions=str(folder / "defs.json"), messages=str(folder / "messages.parquet"), out=str(out)
    )


def test_a_killed_worker_is_retried_and_nothing_counts_twice(spark, dataset, tmp_path, monkeypatch):
    folder, records = dataset
    monkeypatch.setattr(job, "partition_function", killing_after_writing(job.partition_function, 1))
    out = tmp_path / "out"
    summary = run_pipeline(spark, options(folder, out))

    expected = data.expected(Topology.from_definitions(str(folder / "defs.json")), records)
    assert summary["counts"] == expected.counts(COUNT)
    deliveries = pq.read_table(out / "deliveries").to_pylist()
    pairs = [(r["message_id"], r["queue"]) for r in deliveries]
    assert len(pairs) == len(set(pairs)), "a delivery was written twice"
    assert set(pairs) == expected.deliveries
    unroutable = [r["message_id"] for r in pq.read_table(out / "unroutable").to_pylist()]
    assert sorted(unroutable) == sorted(expected.unroutable)
    rejected = [r["message_id"] for r in pq.read_table(out / "rejected").to_pylist()]
    assert sorted(rejected) == sorted(expected.rejected)


def test_a_worker_dying_on_every_try_fails_the_run_in_a_sentence(
    spark, dataset, tmp_path, monkeypatch
):
    folder, _ = dataset
    monkeypatch.setattr(job, "partition_function", killing_after_writing(job.partition_function, 99))
    out = tmp_path / "out"
    with pytest.raises(PipelineFailed) as failure:
        run_pipeline(spark, options(folder, out))
    message = str(failure.value)
    assert f"a Python worker died while routing partition {VICTIM} (tried 3 times)" in message
    assert "killed, or out of memory" in message
    assert "EOFException" not in message and "\tat " not in message
    assert list(tmp_path.iterdir()) == []  # no OUT, no staging
