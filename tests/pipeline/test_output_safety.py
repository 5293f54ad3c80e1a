"""OUT is written only if it is new, empty or xroute's; --overwrite removes only what xroute
wrote; OUT never overlaps an input. Driven through `Commit` (what the pipeline and diff -m
publish with), on local disk and on S3 (SeaweedFS), without Spark."""

from __future__ import annotations

import json
import os
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from xroute.core.errors import OutputExists, OutputNotOurs, OutputOverlapsInput
from xroute.pipeline.commit import Commit
from xroute.pipeline.output import PUBLISHING, SUCCESS, LeftInOutput, check_stream_out
from xroute.sources.storage import locate

OUTPUTS = ("deliveries", "rejected")


def run(out: str, overwrite: bool = False, inputs: tuple[str, ...] = ()) -> list[str]:
    """One run's publish into OUT, as the job does it: a staged part per output, summary.json,
    then _SUCCESS; the warnings it gave."""
    commit = Commit(out, OUTPUTS, overwrite, inputs=inputs)
    commit.begin()
    for output in OUTPUTS:
        sink = pa.BufferOutputStream()
        pq.write_table(pa.table({"message_id": ["m"]}), sink)
        commit.folder(output).child(f"part-{commit.job}.parquet").write_bytes(
            sink.getvalue().to_pybytes()
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        commit.publish({"summary.json": b"{}"}, {"counts": {}})
    return [str(w.message) for w in caught if issubclass(w.category, LeftInOutput)]


def tree(root) -> dict[str, bytes]:
    return {
        os.path.relpath(os.path.join(folder, name), root): open(os.path.join(folder, name), "rb").read()
        for folder, _, names in os.walk(root)
        for name in names
    }


def test_a_folder_of_the_users_is_refused_with_or_without_overwrite(tmp_path):
    out = tmp_path / "project"
    out.mkdir()
    (out / "app.py").write_text("print('mine')")
    (out / "deliveries").mkdir()
    (out / "deliveries" / "notes.txt").write_text("mine too")
    before = tree(out)
    for overwrite in (False, True):
        with pytest.raises(OutputNotOurs, match=r"holds no xroute output.*app\.py"):
            run(str(out), overwrite)
    assert tree(out) == before


def test_the_current_folder_is_refused(tmp_path, monkeypatch):
    (tmp_path / "app.py").write_text("print('mine')")
    (tmp_path / "msgs.parquet").write_bytes(b"PAR1")
    monkeypatch.chdir(tmp_path)
    before = tree(tmp_path)
    with pytest.raises(OutputOverlapsInput, match="holds the input 'msgs.parquet'"):
        run(".", True, inputs=("msgs.parquet",))
    with pytest.raises(OutputNotOurs, match="'.'"):
        run(".", True)
    assert tree(tmp_path) == before


def test_out_may_not_hold_or_lie_inside_an_input(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "msgs.parquet").write_bytes(b"PAR1")
    for out, inputs, said in (
        (data, (str(data / "msgs.parquet"),), "holds the input"),
        (data, (str(data),), "holds the input"),
        (data / "routed", (str(data),), "lies inside the input"),
        (data, (f"file://{data}/msgs.parquet",), "holds the input"),
    ):
        with pytest.raises(OutputOverlapsInput, match=said):
            run(str(out), True, inputs=inputs)
    assert tree(data) == {"msgs.parquet": b"PAR1"}
    (tmp_path / "link").symlink_to(data)
    with pytest.raises(OutputOverlapsInput):
        run(str(tmp_path / "link"), True, inputs=(str(data / "msgs.parquet"),))


def test_overwrite_removes_only_what_xroute_wrote_and_names_the_rest(tmp_path):
    out = tmp_path / "out"
    assert run(str(out)) == []
    first = json.loads((out / SUCCESS).read_text())
    assert sorted(first["written"]) == sorted(
        [*(f for files in first["files"].values() for f in files), "summary.json"]
    )
    with pytest.raises(OutputExists, match=f"'{out}' exists; pass --overwrite"):
        run(str(out))
    (out / "README.txt").write_text("the user's")
    (out / "deliveries" / "keep.csv").write_text("the user's too")
    (out / "extra").mkdir()
    (out / "extra" / "x").write_text("x")
    warned = run(str(out), True)
    assert len(warned) == 1 and "3 files" in warned[0]
    for name in ("README.txt", "deliveries/keep.csv", "extra/x"):
        assert name in warned[0]
    after = tree(out)
    assert after["README.txt"] == b"the user's"
    assert after["deliveries/keep.csv"] == b"the user's too"
    assert after["extra/x"] == b"x"
    second = json.loads(after[SUCCESS])
    old_parts = {f for files in first["files"].values() for f in files}
    new_parts = {f for files in second["files"].values() for f in files}
    assert not old_parts & set(after) and new_parts <= set(after)
    assert PUBLISHING not in after and not (out / "rejected").joinpath("keep").exists()
    # An output the user emptied of its own files leaves no empty folder of xroute's behind.
    assert (out / "rejected").is_dir() and len(os.listdir(out / "rejected")) == 1


def test_a_spark_output_or_a_foreign_marker_is_not_ours(tmp_path):
    out = tmp_path / "spark-out"
    out.mkdir()
    (out / SUCCESS).write_bytes(b"")  # Hadoop's empty _SUCCESS
    (out / "part-00000.parquet").write_bytes(b"PAR1")
    with pytest.raises(OutputNotOurs):
        run(str(out), True)
    assert sorted(os.listdir(out)) == [SUCCESS, "part-00000.parquet"]
    (out / SUCCESS).write_text(json.dumps({"files": {}}))  # no job: not xroute's either
    with pytest.raises(OutputNotOurs):
        run(str(out), True)


def test_a_run_that_died_while_publishing_is_replaced_with_overwrite(tmp_path):
    out = tmp_path / "out"
    run(str(out))
    marker = json.loads((out / SUCCESS).read_text())
    # As the publish leaves it after deleting _SUCCESS and before writing the new one.
    (out / PUBLISHING).write_text(json.dumps({"job": "x", "files": {}, "written": marker["written"]}))
    (out / SUCCESS).unlink()
    (out / "mine.txt").write_text("the user's")
    with pytest.raises(OutputExists, match="--overwrite"):
        run(str(out))
    assert len(run(str(out), True)) == 1
    assert (out / "mine.txt").read_text() == "the user's" and (out / SUCCESS).exists()
    assert not (out / PUBLISHING).exists()


def test_a_legacy_success_without_a_written_list_is_ours(tmp_path):
    out = tmp_path / "out"
    run(str(out))
    marker = json.loads((out / SUCCESS).read_text())
    del marker["written"]
    (out / SUCCESS).write_text(json.dumps(marker))
    assert run(str(out), True) == []
    assert sorted(os.listdir(out)) == sorted([SUCCESS, *OUTPUTS, "summary.json"])


def test_a_file_the_user_put_where_a_new_output_goes_is_refused_untouched(tmp_path):
    out = tmp_path / "out"
    run(str(out))
    marker = json.loads((out / SUCCESS).read_text())
    marker["written"].remove("summary.json")  # as if the user had put summary.json there
    (out / SUCCESS).write_text(json.dumps(marker))
    (out / "summary.json").write_text("the user's")
    with pytest.raises(OutputNotOurs, match="summary.json"):
        run(str(out), True)
    assert (out / "summary.json").read_text() == "the user's" and (out / SUCCESS).exists()


def test_killed_staging_is_removed_but_not_a_foreign_temporary(tmp_path):
    out = tmp_path / "out"
    (out / "_temporary" / "0123456789ab" / "deliveries").mkdir(parents=True)
    run(str(out))
    assert not (out / "_temporary").exists() and (out / SUCCESS).exists()
    other = tmp_path / "other"
    (other / "_temporary" / "spark-attempt").mkdir(parents=True)
    with pytest.raises(OutputNotOurs, match="_temporary/spark-attempt"):
        run(str(other), True)


def test_a_stream_writes_only_a_new_empty_or_stream_output(tmp_path):
    out = tmp_path / "s"
    check_stream_out(locate(str(out)), str(out))
    out.mkdir()
    check_stream_out(locate(str(out)), str(out))
    (out / "app.py").write_text("x")
    with pytest.raises(OutputNotOurs, match="app.py"):
        check_stream_out(locate(str(out)), str(out))
    (out / "_stream.json").write_text("{}")
    check_stream_out(locate(str(out)), str(out))


@pytest.mark.s3
def test_on_s3_only_xroute_files_are_replaced_and_inputs_are_safe(s3_store):
    bucket = s3_store.new_bucket("safety")
    filesystem = s3_store.filesystem()
    root = bucket.removeprefix("s3://")

    def put(key: str, data: bytes) -> None:
        with filesystem.open_output_stream(f"{root}/{key}") as stream:
            stream.write(data)

    def keys(prefix: str) -> dict[str, bytes]:
        found = {}
        selector = pa.fs.FileSelector(f"{root}/{prefix}", recursive=True, allow_not_found=True)
        for info in filesystem.get_file_info(selector):
            if info.type == pa.fs.FileType.File:
                with filesystem.open_input_stream(info.path) as stream:
                    found[info.path[len(root) + len(prefix) + 2 :]] = stream.read()
        return found

    put("project/app.py", b"mine")
    put("project/msgs.parquet", b"PAR1")
    for overwrite in (False, True):
        with pytest.raises(OutputNotOurs):
            run(f"{bucket}/project", overwrite)
    with pytest.raises(OutputOverlapsInput):
        run(f"{bucket}/project", True, inputs=(f"{bucket}/project/msgs.parquet",))
    with pytest.raises(OutputOverlapsInput):
        run(f"{bucket}/project/out", True, inputs=(f"{bucket}/project",))
    assert keys("project") == {"app.py": b"mine", "msgs.parquet": b"PAR1"}

    out = f"{bucket}/routed"
    run(out)
    put("routed/notes.txt", b"mine")
    put("routed/deliveries/mine.csv", b"mine too")
    warned = run(out, True)
    assert len(warned) == 1 and "notes.txt" in warned[0] and "deliveries/mine.csv" in warned[0]
    found = keys("routed")
    assert found["notes.txt"] == b"mine" and found["deliveries/mine.csv"] == b"mine too"
    marker = json.loads(found[SUCCESS])
    parts = {f for files in marker["files"].values() for f in files}
    assert {k for k in found if k.endswith(".parquet")} == parts  # the old parts are gone
