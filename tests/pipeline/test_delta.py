"""``--table-format delta``: the job's and the stream's outputs as Delta Lake tables, read back
by readers that know nothing of xroute (delta-rs's pandas and pyarrow readers): every message
exactly once, equal to `Topology.route_message`; a failed run commits nothing; a replayed
stream batch is recognised by its app transaction, table by table; on a local disk and on S3."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.pipeline import data
from tests.pipeline.streams import forget_commit, landed_files
from tests.pipeline.streams import options as stream_options
from xroute import Topology
from xroute.core.errors import PipelineFailed
from xroute.pipeline.delta import DELTA_LOG, DeltaBatchCommit, storage_options
from xroute.pipeline.stream_commit import committed_batches
from xroute.sources.storage import locate
from xroute.spark import job
from xroute.spark.job import PipelineOptions, run_pipeline
from xroute.spark.stream import run_stream
from xroute.spark.worker import OUTPUTS

deltalake = pytest.importorskip("deltalake", reason="the delta extra (deltalake) is not installed")
pytestmark = pytest.mark.spark
COUNT = 3000


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, list[dict]]:
    folder = tmp_path_factory.mktemp("delta")
    (folder / "defs.json").write_text(json.dumps(data.definitions()))
    records = data.messages(COUNT, seed=27)
    pq.write_table(data.table(records), folder / "messages.parquet", row_group_size=400)
    return folder, records


def options(folder: Path, out: str, **changes) -> PipelineOptions:
    return PipelineOptions(
        definitions=str(folder / "defs.json"),
        messages=str(folder / "messages.parquet"),
        out=out,
        table_format="delta",
        **changes,
    )


def table_rows(out: str, output: str) -> list[dict]:
    """A table's rows as a reader without xroute sees them: delta-rs's pandas reader."""
    table = locate(out).child(output)
    uri = table.path if table.local else table.uri
    frame = deltalake.DeltaTable(uri, storage_options=storage_options(table)).to_pandas()
    return frame.to_dict("records")


def assert_exactly_once(out: str, expected: data.Expected, count: int) -> None:
    deliveries = table_rows(out, "deliveries")
    pairs = Counter((r["message_id"], r["queue"]) for r in deliveries)
    assert max(pairs.values()) == 1, "a delivery was committed twice"
    assert set(pairs) == expected.deliveries
    unroutable = [r["message_id"] for r in table_rows(out, "unroutable")]
    assert Counter(unroutable) == Counter(expected.unroutable)
    rejected = table_rows(out, "rejected")
    assert {r["message_id"]: r["reason"].split(":")[0] for r in rejected} == expected.rejected
    assert len(rejected) == len(expected.rejected)
    assert len({m for m, _ in pairs} | set(unroutable) | {r["message_id"] for r in rejected}) == count


@pytest.mark.parametrize("storage", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_the_job_commits_three_delta_tables_that_readers_see_exactly_once(
    spark, dataset, tmp_path, request, storage
):
    folder, records = dataset
    if storage == "s3":
        out = f"{request.getfixturevalue('s3_store').new_bucket('delta')}/out"
    else:
        out = str(tmp_path / "out")
    summary = run_pipeline(spark, options(folder, out, keep_columns=("size",)))

    expected = data.expected(Topology.from_definitions(data.definitions()), records)
    assert summary["counts"] == expected.counts(COUNT)
    assert summary["table_format"] == "delta"
    assert_exactly_once(out, expected, COUNT)
    for output in OUTPUTS:
        table = locate(out).child(output)
        uri = table.path if table.local else table.uri
        delta = deltalake.DeltaTable(uri, storage_options=storage_options(table))
        assert delta.version() == 0, "one transaction per table"
        # pyarrow's dataset reader, through the table's log.
        assert delta.to_pyarrow_dataset().count_rows() == summary["counts"][output]
    assert locate(out).child("_SUCCESS").exists()
    assert not locate(out).child("_temporary").exists()

    # --overwrite replaces each table: the rows are there once, not twice.
    run_pipeline(spark, options(folder, out, overwrite=True))
    assert_exactly_once(out, expected, COUNT)


def test_a_run_whose_counts_do_not_add_up_commits_no_table(spark, dataset, tmp_path, monkeypatch):
    folder, _ = dataset
    monkeypatch.setattr(job, "_count_input", lambda dataset, broker_range=None: COUNT + 1)  # one record lost
    out = tmp_path / "out"
    with pytest.raises(PipelineFailed, match="cannot prove that no message was lost"):
        run_pipeline(spark, options(folder, str(out)))
    assert not out.exists(), "a failed run leaves no table behind"
    assert not list(tmp_path.rglob(DELTA_LOG))


def test_stream_batches_are_app_transactions_and_a_replay_commits_nothing_twice(spark, tmp_path):
    records = landed_files(tmp_path)
    settings = stream_options(tmp_path, table_format="delta")
    run_stream(spark, settings, say=lambda _: None)
    out = str(tmp_path / "out")
    expected = data.expected(Topology.from_definitions(data.definitions()), records)
    assert list(committed_batches(out)) == [0, 1, 2]
    assert_exactly_once(out, expected, len(records))
    deliveries = deltalake.DeltaTable(str(tmp_path / "out" / "deliveries"))
    (app_id,) = {t for t in _app_ids(deliveries)}
    assert deliveries.transaction_version(app_id) == 2

    # Killed after the deliveries table took batch 2, before the others and the marker:
    # the replay commits unroutable and rejected, and leaves deliveries alone.
    unroutable = tmp_path / "out" / "unroutable"
    before = deltalake.DeltaTable(str(unroutable)).version()
    forget_commit(tmp_path / "checkpoint", 2)
    (tmp_path / "out" / "_batches" / "2.json").unlink()
    _forget_last_commit(unroutable)
    _forget_last_commit(tmp_path / "out" / "rejected")
    assert deltalake.DeltaTable(str(unroutable)).transaction_version(app_id) == 1
    version = deliveries.version()
    run_stream(spark, settings, say=lambda _: None)
    assert deltalake.DeltaTable(str(tmp_path / "out" / "deliveries")).version() == version
    assert deltalake.DeltaTable(str(unroutable)).version() == before
    assert deltalake.DeltaTable(str(unroutable)).transaction_version(app_id) == 2
    assert_exactly_once(out, expected, len(records))
    assert DeltaBatchCommit(out, OUTPUTS, 2, app_id).holds_batch("rejected")


def _app_ids(table) -> set[str]:
    """The app ids of a table's transactions, from its log."""
    ids = set()
    for entry in sorted((Path(table.table_uri.removeprefix("file://")) / DELTA_LOG).glob("*.json")):
        for line in entry.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                ids.add(action["txn"]["appId"])
    return ids


def _forget_last_commit(table: Path) -> None:
    """Remove a table's last log entry, as if the writer had died just before making it."""
    entries = sorted((table / DELTA_LOG).glob("*.json"))
    entries[-1].unlink()


@pytest.mark.s3
def test_the_s3_store_refuses_a_conditional_put_over_an_existing_object(s3_store):
    """What delta-rs's ``aws_conditional_put=etag`` relies on for safe concurrent commits:
    ``If-None-Match: *`` fails with 412 when the key exists (SeaweedFS does honour it)."""
    from tests.services.s3_put import put_object

    bucket = s3_store.new_bucket("conditional").removeprefix("s3://")
    create = {"If-None-Match": "*"}
    assert put_object(s3_store.env, bucket, "_delta_log/0.json", b"first", create) == 200
    assert put_object(s3_store.env, bucket, "_delta_log/0.json", b"second", create) == 412
    assert put_object(s3_store.env, bucket, "_delta_log/0.json", b"third") == 200  # unconditional


@pytest.mark.s3
def test_a_writer_with_a_stale_view_of_an_s3_table_loses_no_commit(s3_store):
    """Two writers of one table on S3: the second commits from a snapshot the first has
    already moved past, so its log entry's name is taken. With the conditional put the store
    refuses the overwrite and delta-rs commits it as the next version: both appends stay."""
    import pyarrow as pa

    uri = f"{s3_store.new_bucket('stale')}/table"
    options = storage_options(locate(uri))
    assert options is not None and options["aws_conditional_put"] == "etag"
    deltalake.write_deltalake(uri, pa.table({"n": [0]}), storage_options=options)
    stale = deltalake.DeltaTable(uri, storage_options=options)  # at version 0
    deltalake.write_deltalake(uri, pa.table({"n": [1]}), mode="append", storage_options=options)
    deltalake.write_deltalake(stale, pa.table({"n": [2]}), mode="append")
    table = deltalake.DeltaTable(uri, storage_options=options)
    assert sorted(table.to_pandas()["n"]) == [0, 1, 2]
    assert table.version() == 2
