"""The stream's pieces that need no Spark: the running summary derived from markers, the
status line, the CLI's interval and option checks, and how a Spark failure names a file."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from xroute import Topology
from xroute.cli import cli
from xroute.cli.stream import parse_interval
from xroute.core.errors import DatasetError, PipelineFailed
from xroute.pipeline.stream_summary import status_line, stream_summary
from xroute.spark.stream import _failure

# Refused before Spark starts: the definitions file "d" does not even exist.
STREAM = ["stream", "-d", "d", "-m", "m", "-o", "o", "--checkpoint", "c"]


def marker(batch_id: int, definitions: str, delivered: int, unroutable: int, rejected: int):
    """A batch marker as `BatchCommit.publish` writes it (2 deliveries per delivered message)."""
    return {
        "batch_id": batch_id,
        "counts": {
            "input": delivered + unroutable + rejected,
            "delivered": delivered,
            "deliveries": 2 * delivered,
            "unroutable": unroutable,
            "rejected": rejected,
        },
        "queues": {"a": delivered, "b": delivered},
        "hits": [delivered, 0],
        "errors": {"InvalidRoutingKey": rejected} if rejected else {},
        "inputs": {f"file:///in/f{batch_id}.parquet": delivered + unroutable + rejected},
        "definitions": definitions,
        "started_at": 100.0 + batch_id,
        "committed_at": 100.5 + batch_id,
        "seconds": 0.5,
    }


def test_summary_totals_batches_and_definitions_changes():
    t = Topology(engine="reference")
    t.declare_exchange("x", "topic")
    for queue in ("a", "b"):
        t.declare_queue(queue)
        t.bind("x", queue, "#")
    markers = {
        0: marker(0, "old", 5, 1, 0),
        1: marker(1, "old", 3, 0, 2),
        2: marker(2, "new", 4, 2, 1),
        3: marker(3, "new", 1, 0, 0),
    }
    summary = stream_summary(
        markers,
        queues=["a", "b"],
        bindings=t.bindings(),
        definitions="new",
        engine="e",
        master="local[2]",
    )
    assert summary["counts"] == dict(
        input=19, delivered=13, deliveries=26, unroutable=3, rejected=3
    )
    assert summary["queues"] == {"a": 13, "b": 13}
    assert summary["rejected_by_error"] == {"InvalidRoutingKey": 3}
    assert [c["batch_id"] for c in summary["definitions_changes"]] == [0, 2]
    # Hits are summed over the batches routed with the definitions in force now.
    assert [b["hits"] for b in summary["bindings"]] == [5, 0]
    assert [b["input"] for b in summary["batches"]] == [6, 5, 7, 1]
    assert summary["messages_per_s"] == pytest.approx(19 / 2.0)


def test_status_line_names_every_figure():
    line = status_line(marker(7, "d", 1000, 20, 3), lag=4)
    assert line.split() == (
        "batch 7 1,023 msgs 2,046/s 20 unroutable 3 rejected lag 4 files".split()
    )


@pytest.mark.parametrize(
    ("text", "seconds"), [("10s", 10.0), ("500ms", 0.5), ("2m", 120.0), ("1h", 3600.0), ("3", 3.0)]
)
def test_intervals(text, seconds):
    assert parse_interval(text) == seconds


@pytest.mark.parametrize("text", ["0s", "-1s", "10 parsecs", ""])
def test_bad_intervals_are_refused(text):
    result = CliRunner().invoke(cli, [*STREAM, "--trigger-interval", text])
    assert result.exit_code == 2 and "is not a positive interval" in result.output


def test_available_now_excludes_a_trigger_interval():
    result = CliRunner().invoke(cli, [*STREAM, "--available-now", "--trigger-interval", "1s"])
    assert result.exit_code == 2 and "exclude each other" in result.output


def test_a_spark_failure_names_the_file_it_could_not_read(tmp_path):
    source = tmp_path / "in"
    text = (
        "An error occurred while calling o1.collect.\n"
        f": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while "
        f"reading file file://{source}/b%20ad.parquet.  SQLSTATE: KD001\n"
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(x.scala:1)\n"
        f"Caused by: java.lang.RuntimeException: file:{source}/b%20ad.parquet is not a Parquet "
        "file. Expected magic number at tail, but found [1, 2, 3, 4]\n"
    )
    error = _failure(RuntimeError(text), str(source))
    assert isinstance(error, DatasetError)
    assert error.path == f"{source}/b%20ad.parquet"
    assert str(error).startswith(f"cannot read {source}/b%20ad.parquet: it is not a Parquet")
    other = _failure(RuntimeError("Task 1 in stage 2.0 failed 3 times: boom Error"), str(source))
    assert isinstance(other, PipelineFailed)


@pytest.mark.parametrize("source", ["s3://bucket/in", "gs://bucket/in"])
def test_a_source_spark_cannot_list_is_refused_up_front(source):
    from xroute.spark.io import read_message_stream

    with pytest.raises(DatasetError, match="Hadoop connector") as caught:
        read_message_stream(None, source)
    assert caught.value.path == source


def test_definitions_reload_only_on_change_and_name_a_bad_file(tmp_path):
    import json

    from tests.pipeline import data
    from xroute.core.errors import DefinitionsError
    from xroute.spark.stream import Definitions

    path = tmp_path / "defs.json"
    path.write_text(json.dumps(data.definitions()))
    definitions = Definitions(str(path), None, "trie")
    first, shipped = definitions.token, definitions.shipped
    assert not definitions.refresh() and definitions.shipped is shipped
    changed = data.definitions()
    queue = {"name": "new", "durable": True, "auto_delete": False, "arguments": {}}
    changed["queues"].append(queue)
    path.write_text(json.dumps(changed))
    assert definitions.refresh() and definitions.token != first
    assert "new" in definitions.router.queues and definitions.shipped.token == definitions.token
    assert "new" in definitions.shipped.router().queues  # what the tasks build from it
    path.write_text("{not json")
    with pytest.raises(DefinitionsError, match=f"cannot read definitions file '{path}'"):
        definitions.refresh()
