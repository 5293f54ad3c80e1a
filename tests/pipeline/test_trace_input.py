"""RabbitMQ's own traces as the messages of `xroute pipeline`, `xroute diff -m` and
`xroute stream` (`xroute.spark.trace_input`): each publish record is routed once, with its
other routing keys as the broker's CC/BCC, exactly as `Topology.route_message` routes the
message as it was published; deliveries and events are counted apart, never routed; a file
that is not in the stated format is refused, by name, before Spark starts."""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tests.traces.test_tracing_log import DATA, sample_topology
from xroute.cli import cli
from xroute.core.errors import DatasetError, TraceFormatError, XRouteError
from xroute.core.topology import Topology
from xroute.spark.diff import DiffOptions, run_diff
from xroute.spark.job import PipelineOptions, run_pipeline
from xroute.spark.preflight import check_pipeline, check_stream
from xroute.spark.stream import StreamOptions, run_stream
from xroute.spark.trace_input import message_format
from xroute.traces.firehose import event_record, firehose_record
from xroute.traces.read import read_traces
from xroute.traces.records import to_table

KEYS = ["a.b", "a.c", "a.cc", "b.x", "ü.bcc", "ü.x", "nothing", ""]
EXCHANGES = ["s.topic", "s.topic", "s.hdr", "", "s.alt", "no.such"]


def published(rng: random.Random, i: int) -> dict[str, Any]:
    """A message as a publisher sent it: exchange, key, CC, BCC and typed headers."""
    headers: dict[str, Any] = {}
    if rng.random() < 0.5:
        headers["n"] = rng.choice([1, 2, 1.0])
    if rng.random() < 0.3:
        headers["f"] = rng.choice([2.5, 3.5])
    if rng.random() < 0.2:
        headers["s"] = b"\xff\x00"  # bytes that are not UTF-8
    exchange = rng.choice(EXCHANGES)
    key = rng.choice(KEYS + ["s.q1", "s.q2"] if exchange == "" else KEYS)
    return {
        "message_id": f"m{i}",
        "exchange": exchange,
        "key": key,
        "cc": rng.sample(KEYS, rng.choice([0, 0, 1, 2])),
        "bcc": rng.sample(KEYS, rng.choice([0, 0, 1])),
        "headers": headers,
    }


def expected_queues(topology: Topology, message: dict[str, Any]) -> frozenset[str] | None:
    """Where the message goes, published as it was (None: refused)."""
    headers = dict(message["headers"])
    if message["cc"]:
        headers["CC"] = message["cc"]
    if message["bcc"]:
        headers["BCC"] = message["bcc"]
    try:
        return topology.route_message(
            message["exchange"], message["key"], headers,
            properties={"message_id": message["message_id"]},
        )
    except XRouteError:
        return None


def write_capture(folder: Path, seed: int = 23, files: int = 3, per_file: int = 40) -> list[dict]:
    """Capture files as `xroute capture` writes them, from firehose messages: publishes (the
    broker strips BCC from the properties and lists RK, CC, BCC in routing_keys), with a
    delivery and a topology event in every file. The messages published."""
    rng = random.Random(seed)
    topology = sample_topology()
    folder.mkdir(parents=True)
    messages, seq = [], 0
    for f in range(files):
        records = []
        for _ in range(per_file):
            m = published(rng, len(messages))
            messages.append(m)
            headers = dict(m["headers"], **({"CC": m["cc"]} if m["cc"] else {}))
            routed = expected_queues(topology, m)
            records.append(firehose_record(
                f"publish.{m['exchange']}",
                {
                    "exchange_name": m["exchange"],
                    "routing_keys": [m["key"], *m["cc"], *m["bcc"]],
                    "properties": {"headers": headers, "message_id": m["message_id"]},
                    "routed_queues": sorted(routed or ()),
                },
                b"payload",
            ))
        records.append(firehose_record(
            "deliver.s.q1",
            {"exchange_name": "s.topic", "routing_keys": ["a.b"], "properties": {}, "redelivered": 0},
            b"payload",
        ))
        records.append(event_record(
            "binding.created",
            {"source_name": "s.topic", "destination_name": "s.q1", "routing_key": "a.*"},
        ))
        name = f"part-{seq:012d}-{seq + len(records) - 1:012d}.parquet"
        pq.write_table(to_table(records, seq), folder / name)
        seq += len(records)
    return messages


def routed_outputs(out: Path) -> tuple[dict[str, set[str]], set[str], set[str]]:
    """Deliveries by message id, and the ids of the unroutable and rejected messages."""
    deliveries: dict[str, set[str]] = defaultdict(set)
    for row in pq.read_table(out / "deliveries", columns=["message_id", "queue"]).to_pylist():
        deliveries[row["message_id"]].add(row["queue"])
    unroutable = set(pq.read_table(out / "unroutable", columns=["message_id"]).column(0).to_pylist())
    rejected = set(pq.read_table(out / "rejected", columns=["message_id"]).column(0).to_pylist())
    return dict(deliveries), unroutable, rejected


def assert_routed_as_published(out: Path, messages: list[dict]) -> None:
    deliveries, unroutable, rejected = routed_outputs(out)
    topology = sample_topology()
    for m in messages:
        queues = expected_queues(topology, m)
        where = m["message_id"]
        if queues is None:
            assert where in rejected and where not in deliveries, m
        elif not queues:
            assert where in unroutable and where not in deliveries, m
        else:
            assert deliveries[where] == set(queues), m  # one message, every key: RK, CC, BCC
    assert len(deliveries) + len(unroutable) + len(rejected) == len(messages)
    assert any(len(m["cc"]) + len(m["bcc"]) > 0 for m in messages)


def definitions_file(tmp_path: Path, topology: Topology, name: str = "defs.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(topology.to_definitions()))
    return str(path)


# --- detection and refusal: no Spark ------------------------------------------------------


def test_traces_are_detected_and_a_dataset_of_one_s_own_is_not(tmp_path):
    write_capture(tmp_path / "cap", files=1, per_file=2)
    assert message_format(str(tmp_path / "cap")) == "firehose"
    assert message_format(str(DATA / "rabbitmq-3.10.8.text.log")) == "rabbitmq-tracing"
    assert message_format(str(DATA / "rabbitmq-3.10.8.json.log")) == "rabbitmq-tracing"
    own = tmp_path / "own.json"  # a JSON message log that names a type: still a dataset
    own.write_text('{"routing_key": "a.b", "exchange": "x", "type": "order"}\n')
    assert message_format(str(own)) == "json"
    pq.write_table(read_traces(str(tmp_path / "cap")).select(["routing_key", "exchange"]),
                   tmp_path / "own.parquet")
    assert message_format(str(tmp_path / "own.parquet")) == "parquet"


def test_a_file_not_in_the_stated_format_is_named_before_spark(tmp_path):
    defs = definitions_file(tmp_path, sample_topology())
    folder = tmp_path / "mixed"
    write_capture(folder, files=1, per_file=2)
    shutil.copy(DATA / "rabbitmq-3.10.8.text.log", folder / "zz.log")
    with pytest.raises(TraceFormatError, match=r"zz\.log: a tracing-plugin log, read with --format firehose"):
        check_pipeline(PipelineOptions(definitions=defs, messages=str(folder),
                                       out=str(tmp_path / "o"), format="firehose"))
    with pytest.raises(TraceFormatError, match="appends to its log files in place"):
        check_stream(StreamOptions(definitions=defs, source=str(tmp_path / "logs"), out=str(tmp_path / "o"),
                                   checkpoint=str(tmp_path / "c"), format="rabbitmq-tracing"))
    with pytest.raises(TraceFormatError, match=r"zz\.log: a tracing-plugin log"):
        check_stream(StreamOptions(definitions=defs, source=str(folder), out=str(tmp_path / "o"),
                                   checkpoint=str(tmp_path / "c")))  # auto: a capture, by its first file
    with pytest.raises(DatasetError, match="--schema does not apply"):
        check_stream(StreamOptions(definitions=defs, source=str(folder), out=str(tmp_path / "o"),
                                   checkpoint=str(tmp_path / "c"), format="firehose",
                                   schema="routing_key string"))
    assert not (tmp_path / "o").exists()


def test_the_cli_refuses_bad_trace_input_in_one_line(tmp_path):
    defs = definitions_file(tmp_path, sample_topology())
    log = str(DATA / "rabbitmq-3.10.8.text.log")
    for args in (
        ["pipeline", "-d", defs, "-m", log, "--format", "firehose", "-o", str(tmp_path / "o")],
        ["diff", defs, defs, "-m", log, "--format", "firehose", "-o", str(tmp_path / "o")],
        ["stream", "-d", defs, "-m", str(DATA), "--format", "rabbitmq-tracing",
         "-o", str(tmp_path / "o"), "--checkpoint", str(tmp_path / "c")],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("xroute: error: "), lines
    assert not (tmp_path / "o").exists()


# --- on Spark -----------------------------------------------------------------------------


@pytest.mark.spark
def test_pipeline_routes_each_publish_as_the_broker_did_and_counts_the_rest_apart(spark, tmp_path):
    messages = write_capture(tmp_path / "cap")
    out = tmp_path / "out"
    summary = run_pipeline(spark, PipelineOptions(
        definitions=definitions_file(tmp_path, sample_topology()), messages=str(tmp_path / "cap"),
        out=str(out), format="auto",  # detected: a capture
    ))
    assert summary["format"] == "firehose"
    assert summary["counts"]["input"] == len(messages) == 120
    assert summary["trace_records_skipped"] == {"deliver": 3, "event": 3}
    assert_routed_as_published(out, messages)
    unroutable = pq.read_table(out / "unroutable").column_names
    assert "routing_keys" in unroutable and "queue" not in unroutable


@pytest.mark.spark
def test_pipeline_reads_the_tracing_plugin_s_logs(spark, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for fmt in ("json", "text"):
        shutil.copy(DATA / f"rabbitmq-3.10.8.{fmt}.log", logs / f"{fmt}.log")
    out = tmp_path / "out"
    summary = run_pipeline(spark, PipelineOptions(
        definitions=sample_topology().to_definitions(), messages=str(logs), out=str(out),
        format="rabbitmq-tracing",
    ))
    assert summary["counts"]["input"] == 8 and summary["trace_records_skipped"] == {"deliver": 2}
    deliveries, unroutable, rejected = routed_outputs(out)
    topology = sample_topology()
    for record in read_traces(str(logs)).to_pylist():
        if record["record_type"] != "publish":
            continue
        headers = json.loads(record["headers"])
        queues = topology.route_message(record["exchange"], record["routing_key"], headers)
        assert deliveries.get(record["message_id"], set()) == set(queues)
    assert deliveries["s1"] == {"s.q1", "s.q2", "s.ünï"}  # a.b, CC a.cc, BCC ü.bcc: one message
    assert not rejected


@pytest.mark.spark
def test_diff_over_a_capture_counts_what_the_change_moves(spark, tmp_path):
    messages = write_capture(tmp_path / "cap", seed=5, files=2)
    old, new = sample_topology(), sample_topology()
    new.unbind("s.topic", "s.q1", "a.*")
    traffic = run_diff(spark, DiffOptions(
        old=old.to_definitions(), new=new.to_definitions(), messages=str(tmp_path / "cap"),
        out=str(tmp_path / "out"), format="firehose",
    ))
    moved = [m for m in messages if expected_queues(old, m) != expected_queues(new, m)]
    assert traffic.messages == len(messages) and traffic.changed == len(moved) > 0
    assert traffic.trace_records_skipped == {"deliver": 2, "event": 2}
    report = json.loads((tmp_path / "out" / "diff.json").read_text())
    assert report["traffic"]["trace_records_skipped"] == {"deliver": 2, "event": 2}


@pytest.mark.spark
def test_stream_routes_a_folder_of_capture_files(spark, tmp_path):
    messages = write_capture(tmp_path / "in")
    summary = run_stream(spark, StreamOptions(
        definitions=definitions_file(tmp_path, sample_topology()), source=str(tmp_path / "in"),
        out=str(tmp_path / "out"), checkpoint=str(tmp_path / "checkpoint"), max_files=1,
        available_now=True,  # format auto: detected
    ), say=lambda _: None)
    assert len(summary["batches"]) == 3
    assert summary["counts"]["input"] == len(messages)
    assert summary["trace_records_skipped"] == {"deliver": 3, "event": 3}
    assert_routed_as_published(tmp_path / "out", messages)
    assert Counter(b["input"] for b in summary["batches"]) == {40: 3}
