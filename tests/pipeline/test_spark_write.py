"""`xroute.spark.write` after `xroute.spark.route`: the job as DataFrame steps.

``write(route(read_messages(spark, path), defs), out)`` publishes exactly what ``xroute
pipeline`` publishes (the three outputs row for row, the counts, the per-queue deliveries and
per-binding hits), with the job's commit; on any DataFrame `route` made too; and refuses a
frame that `route` did not make."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pipeline import data
from xroute import DatasetError
from xroute.spark import read_messages, route, write
from xroute.spark.job import PipelineOptions, run_pipeline

pytestmark = pytest.mark.spark
COUNT = 1500
OUTPUTS = ("deliveries", "unroutable", "rejected")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("write")
    (folder / "defs.json").write_text(json.dumps(data.definitions()))
    pq.write_table(
        data.table(data.messages(COUNT, seed=41)), folder / "messages.parquet", row_group_size=300
    )
    return folder


def rows(out: Path, name: str) -> list[tuple]:
    return sorted(tuple(row.values()) for row in pq.read_table(out / name).to_pylist())


def same_run(summary: dict) -> dict:
    """What a summary says of the messages, not of the run."""
    return {k: summary[k] for k in ("counts", "queues", "bindings", "rejected_by_error", "top_unroutable_keys")}


def test_read_route_write_is_the_job(spark, dataset, tmp_path):
    job = run_pipeline(
        spark,
        PipelineOptions(
            definitions=str(dataset / "defs.json"),
            messages=str(dataset / "messages.parquet"),
            out=str(tmp_path / "job"),
            keep_columns=("size",),
        ),
    )
    messages = read_messages(spark, str(dataset / "messages.parquet"))
    summary = write(
        route(messages, str(dataset / "defs.json")), str(tmp_path / "steps"), keep_columns=("size",)
    )

    assert same_run(summary) == same_run(job)
    assert summary["counts"]["input"] == COUNT and summary["counts"]["rejected"] > 0
    for name in OUTPUTS:
        assert rows(tmp_path / "steps", name) == rows(tmp_path / "job", name), name
    marker = json.loads((tmp_path / "steps" / "_SUCCESS").read_text())
    assert marker["counts"] == summary["counts"]
    assert json.loads((tmp_path / "steps" / "summary.json").read_text())["counts"] == job["counts"]


def test_any_frame_route_made_is_written_with_its_records_named(spark, tmp_path):
    defs = tmp_path / "defs.json"
    defs.write_text(json.dumps(data.definitions()))
    frame = spark.createDataFrame(
        [("a.b", "topic"), ("nowhere.at.all", "topic"), ("x", "missing")],
        "routing_key string, exchange string",
    ).coalesce(1)
    summary = write(route(frame, str(defs)), str(tmp_path / "out"))

    assert summary["counts"]["input"] == 3
    assert summary["counts"]["input"] == (
        summary["counts"]["delivered"] + summary["counts"]["unroutable"] + summary["counts"]["rejected"]
    )
    rejected = pq.read_table(tmp_path / "out" / "rejected").to_pylist()
    assert [(r["message_id"], r["reason"].split(":")[0]) for r in rejected] == [
        ("part-00000:2", "UnknownExchange")
    ]
    for name in OUTPUTS:  # every output reads, with its schema, even when empty
        assert isinstance(pq.read_table(tmp_path / "out" / name), pa.Table)


def test_write_refuses_a_frame_route_did_not_make(spark, tmp_path):
    frame = spark.createDataFrame([("a", ["q"], None)], "routing_key string, queues array<string>, error string")
    with pytest.raises(DatasetError, match="xroute.spark.route made"):
        write(frame, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_the_public_functions_stay_functions_once_every_module_is_imported():
    """A submodule named like a function of `xroute.spark` would replace it on import."""
    import importlib
    import pkgutil

    import xroute.spark as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"xroute.spark.{module.name}")
    for name in package.__all__:
        assert callable(getattr(package, name)) and not isinstance(getattr(package, name), type(package)), name


def test_an_output_inside_the_messages_read_is_refused(spark, dataset, tmp_path):
    """A later read of the folder would take the outputs for messages: refused, nothing
    written, as `xroute pipeline` refuses it."""
    from xroute.core.errors import OutputOverlapsInput

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "messages.parquet").write_bytes((dataset / "messages.parquet").read_bytes())
    routed = route(read_messages(spark, str(folder)), str(dataset / "defs.json"))
    with pytest.raises(OutputOverlapsInput):
        write(routed, str(folder / "out"))
    assert sorted(p.name for p in folder.iterdir()) == ["messages.parquet"]
