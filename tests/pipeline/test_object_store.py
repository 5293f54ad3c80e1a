"""The pipeline on a real object store (SeaweedFS, an S3 server): input, definitions and output
as ``s3://`` URIs, credentials from the standard AWS variables only. Its outputs equal the
local run's; a run whose driver is killed leaves no ``_SUCCESS`` and nothing a reader would take
for output; a rerun into the same OUT never double-counts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.pipeline import data
from tests.services.seaweedfs import share_with_spark
from xroute import OutputExists
from xroute.bench.owned import Owned
from xroute.spark.job import PipelineOptions, run_pipeline

pytestmark = [pytest.mark.spark, pytest.mark.s3]
COUNT = 2500
OUTPUTS = ("deliveries", "unroutable", "rejected")


def rows(uri: str) -> list[str]:
    """Every row of an output dataset (local path or URI), as sorted JSON text."""
    table = pq.read_table(uri)
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


def upload(store, bucket: str, tmp_path: Path) -> tuple[str, str, Path]:
    """The test dataset in two files (no message_id: generated ids name files by their path
    under the dataset, wherever it is), locally and in ``bucket``."""
    local = tmp_path / "in"
    local.mkdir()
    table = data.table(data.messages(COUNT, seed=44)).drop_columns(["message_id"])
    pq.write_table(table.slice(0, 1200), local / "a.parquet", row_group_size=300)
    pq.write_table(table.slice(1200), local / "b.parquet", row_group_size=300)
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    filesystem, root = store.filesystem(), bucket.removeprefix("s3://")
    for name in ("a.parquet", "b.parquet"):
        with filesystem.open_output_stream(f"{root}/in/{name}") as sink:
            sink.write((local / name).read_bytes())
    with filesystem.open_output_stream(f"{root}/defs.json") as sink:
        sink.write((tmp_path / "defs.json").read_bytes())
    return f"{bucket}/in/", f"{bucket}/defs.json", local


def objects(store, prefix: str) -> list[str]:
    """The keys under an ``s3://bucket/prefix``, relative to it."""
    from pyarrow.fs import FileSelector, FileType

    root = prefix.removeprefix("s3://").rstrip("/")
    infos = store.filesystem().get_file_info(FileSelector(root, recursive=True, allow_not_found=True))
    return sorted(i.path[len(root) + 1 :] for i in infos if i.type == FileType.File)


def read_object(store, uri: str) -> bytes:
    with store.filesystem().open_input_stream(uri.removeprefix("s3://")) as source:
        return source.read()


def test_s3_run_equals_local_run(spark, s3_store, tmp_path):
    bucket = s3_store.new_bucket("pipeline")
    messages, definitions, local_input = upload(s3_store, bucket, tmp_path)
    local_out = tmp_path / "local"
    local = run_pipeline(
        spark,
        PipelineOptions(
            definitions=str(tmp_path / "defs.json"), messages=str(local_input), out=str(local_out)
        ),
    )
    out = f"{bucket}/routed"
    with share_with_spark(s3_store.env):
        remote = run_pipeline(
            spark, PipelineOptions(definitions=definitions, messages=messages, out=out)
        )
    assert remote["reader"] == "pyarrow"
    for name in OUTPUTS:
        assert rows(f"{out}/{name}") == rows(str(local_out / name)), name
    for field in ("counts", "queues", "bindings", "top_unroutable_keys", "rejected_by_error"):
        assert remote[field] == local[field], field
    keys = objects(s3_store, out)
    assert "_SUCCESS" in keys and "summary.json" in keys and "summary.png" in keys
    assert not [k for k in keys if k.startswith("_temporary")]
    success = json.loads(read_object(s3_store, f"{out}/_SUCCESS"))
    assert success["counts"] == remote["counts"]
    listed = sorted(f for files in success["files"].values() for f in files)
    assert listed == sorted(k for k in keys if k.startswith(OUTPUTS))

    # Without --overwrite an existing output is refused, untouched; with it, replaced whole.
    with share_with_spark(s3_store.env):
        with pytest.raises(OutputExists):
            run_pipeline(spark, PipelineOptions(definitions=definitions, messages=messages, out=out))
        again = run_pipeline(
            spark,
            PipelineOptions(definitions=definitions, messages=messages, out=out, overwrite=True),
        )
    assert again["counts"] == remote["counts"]  # a rerun never double-counts
    for name in OUTPUTS:
        assert rows(f"{out}/{name}") == rows(str(local_out / name)), name


def test_a_killed_driver_leaves_nothing_a_reader_would_take_for_output(spark, s3_store, tmp_path):
    bucket = s3_store.new_bucket("killed")
    messages, definitions, _ = upload(s3_store, bucket, tmp_path)
    out = f"{bucket}/routed"
    command = ["pipeline", "-d", definitions, "-m", messages, "-o", out, "--no-progress"]
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    script = Path(__file__).with_name("die_before_publish.py")
    process = Owned("driver").popen(
        [sys.executable, str(script), *command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the driver's JVM, if it outlived it
            except ProcessLookupError:
                pass
    assert process.returncode == -signal.SIGKILL, stderr[-2000:]
    assert "killing the driver" in stderr
    keys = objects(s3_store, out)
    assert any(k.startswith("_temporary/") for k in keys), "the parts were staged"
    assert "_SUCCESS" not in keys
    visible = [k for k in keys if not k.startswith("_")]
    assert visible == [], f"a reader would take these for output: {visible}"

    # The next run into the same OUT needs no --overwrite, removes the dead run's staging,
    # and counts every message once. It runs in this process on the shared session (a new
    # driver, as a rerun is; a JVM start saved).
    with share_with_spark(s3_store.env):
        run_pipeline(spark, PipelineOptions(definitions=definitions, messages=messages, out=out))
    keys = objects(s3_store, out)
    assert "_SUCCESS" in keys and not [k for k in keys if k.startswith("_temporary")]
    summary = json.loads(read_object(s3_store, f"{out}/summary.json"))
    counts = summary["counts"]
    assert counts["input"] == COUNT
    assert counts["input"] == counts["delivered"] + counts["unroutable"] + counts["rejected"]
    assert pq.read_table(f"{out}/deliveries").num_rows == counts["deliveries"]
