"""The Spark job end to end (shared local[2] session): deliveries equal `Topology.route`, the
invariant, reasons, --keep-columns, the three input formats, refusal to overwrite, and no
half-written output after a failure."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.pipeline import data
from xroute import Topology
from xroute.core.errors import DatasetError, OutputExists, OutputNotOurs, PipelineFailed
from xroute.pipeline.commit import Commit
from xroute.pipeline.output import LeftInOutput
from xroute.spark import job
from xroute.spark.job import PipelineOptions, run_pipeline

pytestmark = pytest.mark.spark
COUNT = 3000


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, list[dict]]:
    folder = tmp_path_factory.mktemp("dataset")
    (folder / "defs.json").write_text(json.dumps(data.definitions()))
    records = data.messages(COUNT, seed=21)
    # Small row groups: the file is read as several tasks.
    pq.write_table(data.table(records), folder / "messages.parquet", row_group_size=400)
    return folder, records


@pytest.fixture(scope="module")
def expected(dataset) -> data.Expected:
    folder, records = dataset
    return data.expected(Topology.from_definitions(str(folder / "defs.json")), records)


@pytest.fixture(scope="module")
def parquet_run(spark, dataset) -> tuple[Path, dict]:
    folder, _ = dataset
    out = folder / "out"
    summary = run_pipeline(
        spark,
        PipelineOptions(
            definitions=str(folder / "defs.json"),
            messages=str(folder / "messages.parquet"),
            out=str(out),
            keep_columns=("size",),
        ),
    )
    return out, summary


def read(out: Path, name: str) -> list[dict]:
    return pq.read_table(out / name).to_pylist()


def delivered(out: Path) -> set[tuple[str, str]]:
    return {(r["message_id"], r["queue"]) for r in read(out, "deliveries")}


def test_deliveries_equal_topology_route(parquet_run, expected):
    out, summary = parquet_run
    assert delivered(out) == expected.deliveries
    assert len(read(out, "deliveries")) == len(expected.deliveries)  # one row per message per queue
    assert {r["message_id"] for r in read(out, "unroutable")} == expected.unroutable
    rejected = {r["message_id"]: r["reason"].split(":")[0] for r in read(out, "rejected")}
    assert rejected == expected.rejected
    assert summary["counts"] == expected.counts(COUNT)
    assert summary["partitions"] > 1
    assert summary["reader"] == "pyarrow"  # auto's choice for Parquet


def test_invariant_and_summary(parquet_run, expected, dataset):
    out, summary = parquet_run
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk == summary
    c = summary["counts"]
    assert c["input"] == c["delivered"] + c["unroutable"] + c["rejected"] == COUNT
    assert sum(summary["queues"].values()) == c["deliveries"]
    assert (
        summary["messages_per_s"] > 0 and "Spark session start" in summary["messages_per_s_basis"]
    )
    # every binding is listed, those that never matched too
    bindings = Topology.from_definitions(str(dataset[0] / "defs.json")).bindings()
    assert len(summary["bindings"]) == len(bindings)
    hits = {
        (
            b["source"],
            b["destination"],
            b["routing_key"],
            json.dumps(b["arguments"], sort_keys=True),
        ): b["hits"]
        for b in summary["bindings"]
    }
    assert {k: v for k, v in hits.items() if v} == dict(expected.hits)
    assert summary["unused_bindings"] == sum(1 for v in hits.values() if v == 0) > 0
    keys = Counter(r["routing_key"] for r in read(out, "unroutable"))
    top = sorted(keys.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    assert summary["top_unroutable_keys"] == [list(kv) for kv in top]
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "_temporary").exists()  # the staging folder was published and removed
    success = json.loads((out / "_SUCCESS").read_text())  # written last, naming every file
    assert success["counts"] == summary["counts"]
    assert sorted(success["files"]["deliveries"]) == sorted(
        f"deliveries/{p.name}" for p in (out / "deliveries").iterdir()
    )


def test_keep_columns_are_carried_to_deliveries(parquet_run, dataset):
    out, _ = parquet_run
    sizes = {r["message_id"]: r["size"] for r in dataset[1]}
    rows = read(out, "deliveries")
    assert rows and all(r["size"] == sizes[r["message_id"]] for r in rows)


def test_json_lines_and_csv_route_as_parquet(spark, dataset, parquet_run, tmp_path):
    folder, records = dataset
    jsonl = tmp_path / "jsonl"
    jsonl.mkdir()
    with (jsonl / "part-a.jsonl").open("w") as sink:
        for r in records:
            row = dict(r)
            if row["headers"] is not None:
                try:
                    row["headers"] = json.loads(row["headers"])  # an object, as people write it
                except ValueError:
                    pass  # malformed: stays text
            sink.write(json.dumps(row) + "\n")
    (jsonl / "part-b.jsonl").write_text("this line is not JSON\n")  # rejected, whole

    def field(value) -> str:
        # RFC 4180, with a missing value as an empty unquoted field ("" is an empty string)
        if value is None:
            return ""
        if isinstance(value, int):
            return str(value)
        return '"' + value.replace('"', '""') + '"'

    with (tmp_path / "messages.csv").open("w") as sink:
        sink.write("message_id,exchange,routing_key,headers,size\n")
        for r in records:
            names = ("message_id", "exchange", "routing_key", "headers", "size")
            sink.write(",".join(field(r[n]) for n in names) + "\n")
    want = delivered(parquet_run[0])
    for source in (jsonl, tmp_path / "messages.csv"):
        out = tmp_path / f"out-{source.name}"
        summary = run_pipeline(
            spark,
            PipelineOptions(
                definitions=str(folder / "defs.json"), messages=str(source), out=str(out)
            ),
        )
        assert summary["format"] == ("json" if source == jsonl else "csv")
        assert delivered(out) == want, source
        counts = dict(parquet_run[1]["counts"])
        if source == jsonl:
            counts["input"] += 1
            counts["rejected"] += 1
            reasons = {r["message_id"]: r["reason"] for r in read(out, "rejected")}
            assert (
                reasons["part-b.jsonl:0"]
                == "DatasetError: the record is not valid JSON: 'this line is not JSON'"
            )
        assert summary["counts"] == counts, source


def test_generated_ids_name_file_and_row_and_are_stable(spark, dataset, tmp_path):
    folder, records = dataset
    table = data.table(records).drop_columns(["message_id"])
    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(table.slice(0, 1000), source / "one.parquet", row_group_size=300)
    pq.write_table(table.slice(1000), source / "two.parquet", row_group_size=300)
    runs = []
    for name in ("first", "second"):
        out = tmp_path / name
        run_pipeline(
            spark,
            PipelineOptions(
                definitions=str(folder / "defs.json"), messages=str(source), out=str(out)
            ),
        )
        runs.append((delivered(out), {r["message_id"] for r in read(out, "rejected")}))
    assert runs[0] == runs[1]
    named = {m for m, _ in runs[0][0]} | runs[0][1]
    assert "one.parquet:0" in named or "one.parquet:1" in named
    assert all(m.split(":")[0] in ("one.parquet", "two.parquet") for m in named)
    # the ids number the rows: the same routes as the Parquet run, with ids renamed
    position = {r["message_id"]: i for i, r in enumerate(records)}

    def rename(m: str) -> str:
        file, row = m.split(":")
        return f"m{int(row) + (1000 if file == 'two.parquet' else 0)}"

    assert {(rename(m), q) for m, q in runs[0][0]} == {
        (m, q)
        for m, q in data.expected(
            Topology.from_definitions(str(folder / "defs.json")), records
        ).deliveries
        if position[m] >= 0
    }


def test_existing_output_is_refused_then_replaced_with_overwrite(spark, dataset, tmp_path):
    folder, _ = dataset
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("keep me")
    options = PipelineOptions(
        definitions=str(folder / "defs.json"),
        messages=str(folder / "messages.parquet"),
        out=str(out),
    )
    for overwrite in (False, True):  # a folder of the user's: never written, never emptied
        with pytest.raises(OutputNotOurs, match="old.txt"):
            run_pipeline(spark, PipelineOptions(**{**options.__dict__, "overwrite": overwrite}))
    assert os.listdir(out) == ["old.txt"]
    (out / "old.txt").unlink()
    first = run_pipeline(spark, options)
    (out / "old.txt").write_text("keep me")
    with pytest.raises(OutputExists, match="--overwrite"):
        run_pipeline(spark, options)
    with pytest.warns(LeftInOutput, match="old.txt"):
        again = run_pipeline(spark, PipelineOptions(**{**options.__dict__, "overwrite": True}))
    assert again["counts"] == first["counts"]
    assert (out / "old.txt").read_text() == "keep me" and (out / "summary.json").exists()


def test_a_failed_run_leaves_no_output(spark, dataset, tmp_path, monkeypatch):
    folder, _ = dataset
    real = job.partition_function

    def failing(task, definitions):
        route = real(task, definitions)

        def route_partition(batches):
            yield from route(batches)  # the parts are written...
            raise RuntimeError("disk full, say")  # ...and then the task fails

        return route_partition

    monkeypatch.setattr(job, "partition_function", failing)
    out = tmp_path / "out"
    with pytest.raises(PipelineFailed, match="disk full"):
        run_pipeline(
            spark,
            PipelineOptions(
                definitions=str(folder / "defs.json"),
                messages=str(folder / "messages.parquet"),
                out=str(out),
            ),
        )
    assert list(tmp_path.iterdir()) == []  # no DIR, no temporary folder


def test_a_dataset_without_routing_key_is_refused(spark, dataset, tmp_path):
    folder, records = dataset
    pq.write_table(data.table(records).drop_columns(["routing_key"]), tmp_path / "bad.parquet")
    out = tmp_path / "out"
    with pytest.raises(DatasetError, match="no 'routing_key' column"):
        run_pipeline(
            spark,
            PipelineOptions(
                definitions=str(folder / "defs.json"),
                messages=str(tmp_path / "bad.parquet"),
                out=str(out),
            ),
        )
    assert not out.exists()


def test_parts_of_failed_attempts_are_dropped(tmp_path):
    commit = Commit(str(tmp_path / "out"), job.OUTPUTS)
    commit.begin()
    staged = Path(commit.staging.path)
    for name in job.OUTPUTS:
        (staged / name).mkdir()
    table = data.table(data.messages(5))
    pq.write_table(table, staged / "deliveries" / "part-00000-0-aaa.parquet")
    pq.write_table(table, staged / "deliveries" / "part-00000-1-bbb.parquet")  # a retry's twin
    rows = commit.keep_listed(
        {"deliveries": ["part-00000-1-bbb.parquet"], "unroutable": [], "rejected": []}
    )
    assert rows == {"deliveries": 5, "unroutable": 0, "rejected": 0}
    assert [p.name for p in (staged / "deliveries").iterdir()] == ["part-00000-1-bbb.parquet"]
