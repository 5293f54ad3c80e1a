"""Every input mistake that can be found without Spark is reported before Spark starts, in one
line naming the thing, exit 2: for pipeline, diff -m and stream. Spark is never started here
(`start_spark` fails the test if called)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tests.pipeline import data
from xroute.cli import EXIT_BAD_INPUT, cli
from xroute.core.errors import DatasetError
from xroute.spark.io import Columns
from xroute.spark.job import PipelineOptions
from xroute.spark.preflight import check_pipeline, dataset_columns


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    pq.write_table(pa.table({"rk": ["a.b"], "ex": ["x"], "h": ['{"a": 1}']}), tmp_path / "m.parquet")
    monkeypatch.chdir(tmp_path)

    def no_spark(*_args, **_kwargs):
        raise AssertionError("Spark was started before the input was checked")

    monkeypatch.setattr("xroute.spark.session.start_spark", no_spark)
    return tmp_path


def fails(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xroute: error: "), result.stderr
    return lines[0]


PIPELINE = ["pipeline", "-d", "defs.json", "-m", "m.parquet", "-o", "out", "--no-progress"]


def test_pipeline_mistakes_are_reported_before_spark_starts(folder):
    assert "'nope.json'" in fails("pipeline", "-d", "nope.json", "-m", "m.parquet", "-o", "out")
    assert "'nope.parquet' does not exist" in fails(
        "pipeline", "-d", "defs.json", "-m", "nope.parquet", "-o", "out"
    )
    assert "no 'routing_key' column; name another with --routing-key-column" in fails(*PIPELINE)
    assert "no 'exchange' column" in fails(*PIPELINE, "--routing-key-column", "rk")
    assert "--keep-columns names 'zz'" in fails(
        *PIPELINE, "--routing-key-column", "rk", "--exchange-column", "ex", "--keep-columns", "zz"
    )
    assert "--headers-column names 'hh'" in fails(
        *PIPELINE, "--routing-key-column", "rk", "-e", "x", "--headers-column", "hh"
    )
    (folder / "out").mkdir()
    (folder / "out" / "app.py").write_text("mine")
    assert "holds no xroute output" in fails(
        *PIPELINE, "--routing-key-column", "rk", "-e", "x", "--overwrite"
    )
    assert "holds the input 'm.parquet'" in fails(
        "pipeline", "-d", "defs.json", "-m", "m.parquet", "-o", ".", "--overwrite"
    )
    assert (folder / "out" / "app.py").read_text() == "mine"


def test_a_corrupt_parquet_file_in_a_folder_is_named(folder):
    (folder / "logs").mkdir()
    pq.write_table(pa.table({"routing_key": ["a"], "exchange": ["x"]}), folder / "logs" / "a.parquet")
    (folder / "logs" / "b.parquet").write_bytes(b"PAR1 not really")
    line = fails("pipeline", "-d", "defs.json", "-m", "logs", "-o", "out")
    assert f"cannot read {folder / 'logs' / 'b.parquet'} as Parquet" in line
    assert "file://" not in line


def test_columns_come_from_footers_header_lines_and_small_json(folder):
    assert dataset_columns("m.parquet", "parquet") == ["rk", "ex", "h"]
    (folder / "m.csv").write_text('routing_key,"a,b"\nx,1\n')
    assert dataset_columns("m.csv", "csv") == ["routing_key", "a,b"]
    (folder / "m.json").write_text('{"routing_key": "a"}\nnot json\n{"exchange": "x"}\n')
    assert dataset_columns("m.json", "json") == ["routing_key", "exchange"]
    (folder / "parts" / "day=1").mkdir(parents=True)
    pq.write_table(pa.table({"routing_key": ["a"]}), folder / "parts" / "day=1" / "p.parquet")
    assert dataset_columns("parts", "parquet") == ["routing_key", "day"]


def test_the_options_that_pass_carry_the_parsed_definitions(folder):
    options = PipelineOptions(
        definitions="defs.json",
        messages="m.parquet",
        out="out",
        columns=Columns("rk", "ex", "h"),
    )
    checked = check_pipeline(options)
    assert checked.definitions == json.loads((folder / "defs.json").read_text())
    with pytest.raises(DatasetError, match="'routing_key'"):
        check_pipeline(PipelineOptions(definitions="defs.json", messages="m.parquet", out="out"))


def test_diff_and_stream_check_before_spark_starts(folder):
    assert "no 'routing_key' column" in fails(
        "diff", "defs.json", "defs.json", "-m", "m.parquet", "-o", "out"
    )
    assert "holds the input" in fails("diff", "defs.json", "defs.json", "-m", "m.parquet", "-o", ".")
    (folder / "in").mkdir()
    pq.write_table(pa.table({"rk": ["a"]}), folder / "in" / "f.parquet")
    stream = ["stream", "-d", "defs.json", "-m", "in", "--checkpoint", "ck"]
    assert "lies inside the input 'in'" in fails(*stream, "-o", "in/out")
    assert "the stream source 'in' has no 'routing_key' column" in fails(*stream, "-o", "s")
    (folder / "s").mkdir()
    (folder / "s" / "notes.txt").write_text("mine")
    assert "holds no stream's output" in fails(*stream, "-o", "s", "--routing-key-column", "rk", "-e", "x")


def test_a_failed_spark_job_names_the_file_it_could_not_read(tmp_path):
    from xroute.core.errors import PipelineFailed
    from xroute.spark.job import spark_failure

    logs = tmp_path / "logs"
    spark_reader = (
        ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while "
        f"reading file file://{logs}/b.parquet.  SQLSTATE: KD001\n"
        "Caused by: java.io.IOException: FAILED_TO_UNCOMPRESS(5)\n"
    )
    error = spark_failure(RuntimeError(spark_reader), str(logs))
    assert isinstance(error, DatasetError)
    assert str(error) == f"cannot read {logs}/b.parquet: FAILED_TO_UNCOMPRESS(5)"
    task = (
        "Traceback (most recent call last):\n  File \"x.py\", line 1\n"
        f"xroute.core.errors.DatasetError: cannot read {logs}/c.parquet as Parquet: Corrupt snappy "
        "compressed data.\n\tat org.apache.spark.api.python.BasePythonRunner\n"
    )
    error = spark_failure(RuntimeError(task), str(logs))
    assert str(error) == f"cannot read {logs}/c.parquet as Parquet: Corrupt snappy compressed data."
    died = f"Task 1 in stage 2.0 failed 3 times: Python worker exited unexpectedly (crashed) {logs}/a.parquet"
    assert isinstance(spark_failure(RuntimeError(died), str(logs)), PipelineFailed)
