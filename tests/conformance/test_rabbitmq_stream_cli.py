"""The commands on RabbitMQ streams, against a private node with the stream plugin: ``xroute
stream -m rabbitmq-stream://...`` routes live from the broker into Delta and Parquet, each
offset exactly once across restarts, through a driver SIGKILLed mid-batch and through the
node restarted under a running stream, with deliveries as `Topology.route_message` says;
``xroute pipeline`` routes a bounded range; ``?pattern=`` names the streams by a regular
expression (listed by the node's management API); a stream that is not there is refused in
one line before Spark starts.

The broker only stores the messages: they are published over AMQP 0-9-1 to a fanout exchange
bound to the stream queue (so each keeps its routing key, headers and message id), and xroute
routes them with a topology of its own (`definitions`).

Run by ``make conformance`` (markers ``conformance`` and ``spark``: each command starts Spark).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conformance.streams import publish_091, stream_node
from xroute import Topology
from xroute.bench.owned import Owned
from xroute.bench.rabbitmq import connect
from xroute.core.values import long, short
from xroute.pipeline.stream_commit import MARKERS, committed_batches, committed_files
from xroute.sources.storage import locate

pytestmark = [pytest.mark.conformance, pytest.mark.spark]
XDIST_GROUP = "stream-cli"  # its private node and drivers, beside test_rabbitmq_stream.py (tests/conftest.py)

SRC = Path(__file__).resolve().parents[2] / "src"
EXCHANGE = "orders"  # on the node: a fanout into the stream; for xroute: a topic exchange


@pytest.fixture(scope="module")
def node():
    """The private node with the stream plugin and the management API, for this module."""
    with stream_node(management=True) as started:
        yield started


def cli(*arguments: str) -> list[str]:
    """The command line of ``xroute`` from this checkout."""
    return [sys.executable, "-c", "from xroute.cli import main; main()", *arguments]


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    env["RABBITMQ_PASSWORD"] = "guest"
    return env


def topology() -> Topology:
    """What xroute routes the stored messages with: a topic exchange and a headers exchange
    behind it, whose bindings compare typed values."""
    t = Topology(rabbitmq="3.10")
    t.declare_exchange(EXCHANGE, "topic")
    t.declare_exchange("by-level", "headers")
    for queue in ("eu", "us", "all", "high"):
        t.declare_queue(queue)
    t.bind(EXCHANGE, "eu", "eu.*")
    t.bind(EXCHANGE, "us", "us.#")
    t.bind(EXCHANGE, "all", "#.paid")
    t.bind(EXCHANGE, "by-level", "#", destination_type="exchange")
    t.bind("by-level", "high", "", {"x-match": "all", "level": short(3)})
    return t


def messages(count: int, first: int = 0) -> list[tuple[str, dict[str, Any], bytes, str]]:
    """(routing key, headers, body, message id): some route, some do not."""
    rng = random.Random(first)
    out = []
    for n in range(first, first + count):
        key = ".".join([rng.choice(["eu", "us", "ap"]), rng.choice(["new", "paid", "x"])])
        headers = {"level": rng.choice([short(3), long(3), short(1)])} if n % 3 else {}
        out.append((key, headers, b"body-%d" % n, f"m{n}"))
    return out


def new_stream(node, name: str | None = None) -> str:
    """A stream queue bound to the fanout exchange `EXCHANGE` on the node."""
    name = name or f"xr-cli-{uuid.uuid4().hex[:6]}"
    connection = connect(node.amqp_url)
    try:
        channel = connection.channel()
        channel.exchange_declare(EXCHANGE, "fanout", durable=True, auto_delete=False)
        channel.queue_declare(name, durable=True, auto_delete=False,
                              arguments={"x-queue-type": "stream"})
        channel.queue_bind(name, EXCHANGE, "")
    finally:
        connection.close()
    return name


def expected_pairs(sent: list[tuple[str, dict[str, Any], bytes, str]]) -> tuple[Counter, set[str]]:
    """(message id, queue) deliveries and the unroutable ids, as the library routes them from
    the definitions the commands read (3.10's rules: the broker's own)."""
    t = Topology.from_definitions(topology().to_definitions(), rabbitmq="3.10")
    pairs: Counter = Counter()
    unroutable = set()
    for key, headers, _, mid in sent:
        queues = t.route_message(EXCHANGE, key, headers)
        pairs.update((mid, q) for q in queues)
        if not queues:
            unroutable.add(mid)
    return pairs, unroutable


def committed(out: Path, output: str, table_format: str) -> list[dict[str, Any]]:
    """The rows of ``output`` a reader of OUT sees."""
    if table_format == "delta":
        from deltalake import DeltaTable

        if not list((out / output / "_delta_log").glob("*.json")):
            return []  # no batch wrote to this table
        return DeltaTable(str(out / output)).to_pyarrow_table().to_pylist()
    rows = []
    for part in committed_files(str(out), output):
        rows.extend(pq.read_table(part.path).to_pylist())
    return rows


def assert_exactly_once(out: Path, sent: list, table_format: str) -> None:
    """Every message once in its outputs, as the library routes it; the markers' offsets
    tile the stream without a gap or an overlap."""
    deliveries = committed(out, "deliveries", table_format)
    unroutable = committed(out, "unroutable", table_format)
    pairs = Counter((r["message_id"], r["queue"]) for r in deliveries)
    want_pairs, want_unroutable = expected_pairs(sent)
    assert pairs == want_pairs
    assert Counter(r["message_id"] for r in unroutable) == Counter(want_unroutable)
    assert committed(out, "rejected", table_format) == []
    ranges = sorted(
        tuple(span) for m in committed_batches(str(out)).values()
        for span in m["offsets"].values()
    )
    assert ranges[0][0] == 0 and ranges[-1][1] == len(sent)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])), ranges


def run(arguments: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cli(*arguments), capture_output=True, text=True, timeout=timeout,
                          env=cli_env())


def write_definitions(tmp_path: Path) -> str:
    path = tmp_path / "defs.json"
    path.write_text(json.dumps(topology().to_definitions()))
    return str(path)


# ---------------------------------------------------------------------- preflight


def test_a_missing_stream_is_refused_in_one_line_before_spark(node, tmp_path):
    uri = node.uri("no-such-stream")
    started = time.monotonic()
    done = run(["stream", "-d", write_definitions(tmp_path), "-m", uri, "-o",
                str(tmp_path / "out"), "--checkpoint", str(tmp_path / "cp")], timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == "xroute: error: stream 'no-such-stream' does not exist"
    assert "starting Spark" not in done.stdout
    assert not (tmp_path / "cp").exists()
    assert time.monotonic() - started < 120  # bounded by the run's own timeout, not timed


# ---------------------------------------------------------------------- live, with restarts


@pytest.mark.parametrize("table_format", ["delta", "parquet"])
def test_stream_routes_live_from_the_broker_exactly_once_across_runs(node, tmp_path, table_format):
    stream = new_stream(node)
    sent = messages(300)
    publish_091(node.amqp_url, EXCHANGE, sent)
    out, checkpoint = tmp_path / "out", tmp_path / "cp"
    arguments = ["stream", "-d", write_definitions(tmp_path), "-m", node.uri(stream),
                 "-o", str(out), "--checkpoint", str(checkpoint), "--table-format",
                 table_format, "--available-now", "--master", "local[2]", "--rabbitmq", "3.10"]
    first = run(arguments)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert f"{stream} (tail at offset 300)" in first.stdout  # the preflight line
    assert "offsets " in first.stdout and "lag 0 messages" in first.stdout
    more = messages(120, first=300)
    publish_091(node.amqp_url, EXCHANGE, more)
    second = run(arguments)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert f"{stream} 300..419" in second.stdout
    assert_exactly_once(out, sent + more, table_format)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["input"] == 420


# ---------------------------------------------------------------------- a killed driver


def start_stream(arguments: list[str], log) -> subprocess.Popen:
    """``xroute`` with ``arguments`` (a stream) in its own session, a batch every 200 ms, its
    output to ``log``: the driver the crash tests kill."""
    with log.open("w") as sink:
        return Owned("driver").popen(cli(*arguments, "--trigger-interval", "200ms"), stdout=sink,
                                stderr=subprocess.STDOUT, env=cli_env(),
                                start_new_session=True)


def kill_mid_batch(first, target, log, within_s: float, between=lambda done: None) -> int:
    """SIGKILL the driver ``first`` (its own session) while a batch is staged in ``target`` but
    not committed; the batch it was killed in. ``between(committed batches)`` runs on each look
    (to publish more while it streams). Asserts the kill happened and nothing of that batch
    was committed."""
    killed_in = None
    try:
        deadline = time.monotonic() + within_s
        while killed_in is None and time.monotonic() < deadline:
            assert first.poll() is None, log.read_text()[-3000:]
            done = committed_batches(target) if target.exists() else {}
            between(done)
            following = max(done, default=-1) + 1
            if done and target.child("_temporary", f"batch-{following}").exists():
                if not target.child(MARKERS, f"{following}.json").exists():
                    os.killpg(first.pid, signal.SIGKILL)
                    killed_in = following
            time.sleep(0.005)
    finally:
        if first.poll() is None and killed_in is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.wait(60)
    assert killed_in is not None, "no batch was in flight to kill: " + log.read_text()[-3000:]
    assert not target.child(MARKERS, f"{killed_in}.json").exists()
    return killed_in


@pytest.mark.parametrize("table_format", ["delta", "parquet"])
def test_driver_killed_mid_batch_then_restarted_loses_and_doubles_nothing(
    node, tmp_path, table_format
):
    """Messages are stored while the stream runs in batches of 150; the driver is SIGKILLed
    while a batch is staged but not committed; the restarted stream routes every offset once."""
    stream = new_stream(node)
    sent = messages(900)
    publish_091(node.amqp_url, EXCHANGE, sent[:300])
    out, checkpoint = tmp_path / "out", tmp_path / "cp"
    arguments = ["stream", "-d", write_definitions(tmp_path), "-m", node.uri(stream),
                 "-o", str(out), "--checkpoint", str(checkpoint), "--table-format",
                 table_format, "--max-messages", "150", "--master", "local[2]",
                 "--rabbitmq", "3.10"]
    log = tmp_path / "first.log"
    first = start_stream(arguments, log)
    target = locate(str(out))
    published = 300

    def publish_more(done: dict) -> None:
        nonlocal published
        if done and published < len(sent):
            publish_091(node.amqp_url, EXCHANGE, sent[published:published + 150])
            published += 150

    killed_in = kill_mid_batch(first, target, log, 400, publish_more)
    assert first.returncode == -signal.SIGKILL
    if published < len(sent):
        publish_091(node.amqp_url, EXCHANGE, sent[published:])
    second = run([*arguments, "--available-now"])
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert killed_in in committed_batches(target), "the batch killed mid-way was redone"
    assert_exactly_once(out, sent, table_format)
    assert not target.child("_temporary").exists(), "no staging left behind"


# ---------------------------------------------------------------------- a bounded range


def test_pipeline_routes_a_bounded_range_of_a_stream(node, tmp_path):
    stream = new_stream(node)
    sent = messages(200)
    publish_091(node.amqp_url, EXCHANGE, sent)
    out = tmp_path / "out"
    uri = node.uri(stream) + "&start=50&end=150"
    done = run(["pipeline", "-d", write_definitions(tmp_path), "-m", uri, "-o", str(out),
                "--master", "local[2]", "--rabbitmq", "3.10"])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{stream} offsets 50..150 (100 messages" in done.stdout
    rows = pq.read_table(out / "deliveries").to_pylist()
    want, unroutable = expected_pairs(sent[50:150])
    assert Counter((r["message_id"], r["queue"]) for r in rows) == want
    assert json.loads((out / "summary.json").read_text())["counts"]["input"] == 100


def test_diff_routes_a_stream_through_both_topologies(node, tmp_path):
    """diff -m on a stream: the messages whose queues change when a binding goes, typed
    headers read from amqp_headers (a short(3) binding still matches after the change)."""
    stream = new_stream(node)
    sent = messages(120)
    publish_091(node.amqp_url, EXCHANGE, sent)
    old = write_definitions(tmp_path)
    changed = topology()
    changed.unbind(EXCHANGE, "eu", "eu.*")
    new = tmp_path / "new.json"
    new.write_text(json.dumps(changed.to_definitions()))
    done = run(["diff", old, str(new), "-m", node.uri(stream), "-o", str(tmp_path / "out"),
                "--json", "--master", "local[2]", "--rabbitmq", "3.10"])
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{stream} offsets 0..120 (120 messages" in done.stderr
    report = json.loads(done.stdout)
    before, _ = expected_pairs(sent)
    lost = {mid for mid, queue in before if queue == "eu"}
    assert report["traffic"]["counts"]["messages"] == 120
    assert report["traffic"]["counts"]["changed"] == len(lost) > 0
    assert report["traffic"]["counts"]["lost_a_queue"] == len(lost)


# ---------------------------------------------------------------------- the node restarted


def test_stream_outlives_the_node_restarted_under_it(node, tmp_path):
    """stop_app/start_app of the node while ``xroute stream`` runs batches of 100 into Delta:
    the driver and the tasks reconnect; every offset lands once."""
    stream = new_stream(node)
    sent = messages(1200)
    publish_091(node.amqp_url, EXCHANGE, sent)
    out, checkpoint = tmp_path / "out", tmp_path / "cp"
    arguments = ["stream", "-d", write_definitions(tmp_path), "-m", node.uri(stream),
                 "-o", str(out), "--checkpoint", str(checkpoint), "--table-format", "delta",
                 "--max-messages", "100", "--available-now", "--master", "local[2]",
                 "--rabbitmq", "3.10"]
    log = tmp_path / "stream.log"
    with log.open("w") as sink:
        process = Owned("driver").popen(cli(*arguments), stdout=sink, stderr=subprocess.STDOUT,
                                   env=cli_env(), start_new_session=True)
    target = locate(str(out))
    try:
        deadline = time.monotonic() + 400
        while not (target.exists() and committed_batches(target)):
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.05)
        before = len(committed_batches(target))
        assert before < 12, f"the restart must come mid-stream ({before} of 12 batches)"
        node.restart()
        assert process.wait(400) == 0, log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(60)
    assert_exactly_once(out, sent, "delta")


# ---------------------------------------------------------------------- patterns


def test_a_pattern_names_the_streams_for_stream_and_pipeline(node, tmp_path):
    """``?pattern=`` with the node's management API (``management=``): the preflight lists
    what it matches, ``xroute stream`` routes every matched stream once, ``pipeline`` a bounded
    range of each."""
    tag = uuid.uuid4().hex[:6]
    first, second = new_stream(node, f"pat{tag}-1"), new_stream(node, f"pat{tag}-2")
    sent = messages(150)
    publish_091(node.amqp_url, EXCHANGE, sent)  # the fanout stores each in both streams
    uri = (f"rabbitmq-stream://guest@127.0.0.1:{node.stream_port}/%2F?pattern=pat{tag}-.%2A"
           f"&management={node.management_url}")
    out = tmp_path / "out"
    done = run(["stream", "-d", write_definitions(tmp_path), "-m", uri, "-o", str(out),
                "--checkpoint", str(tmp_path / "cp"), "--table-format", "parquet",
                "--available-now", "--master", "local[2]", "--rabbitmq", "3.10"])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (f"pattern 'pat{tag}-.*' matches {first} (tail at offset 150), {second} (tail at "
            "offset 150)") in done.stdout
    want, unroutable = expected_pairs(sent)
    deliveries = committed(out, "deliveries", "parquet")
    assert Counter((r["message_id"], r["queue"]) for r in deliveries) == want + want
    assert sorted(Counter(r["message_id"] for r in deliveries if r["queue"] == "eu").values()) \
        == [2] * sum(1 for mid, q in want if q == "eu")
    ranges = sorted(m["offsets"][s] for m in committed_batches(str(out)).values()
                    for s in m["offsets"])
    assert ranges == [[0, 150], [0, 150]]
    # pipeline: the same pattern, a bounded range of each stream it matches.
    done = run(["pipeline", "-d", write_definitions(tmp_path), "-m", uri + "&start=100",
                "-o", str(tmp_path / "range"), "--master", "local[2]", "--rabbitmq", "3.10"])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{first} offsets 100..150 (50 messages" in done.stdout
    assert f"{second} offsets 100..150 (50 messages" in done.stdout
    assert json.loads((tmp_path / "range" / "summary.json").read_text())["counts"]["input"] == 100


# ---------------------------------------------------------------------- make run's sample

# How many messages of make run's 1M sample (a prefix of it): 100,000 by default, so that
# make conformance stays short; XROUTE_STREAM_SAMPLE=1000000 runs the whole sample.
SAMPLE = int(os.environ.get("XROUTE_STREAM_SAMPLE", "100000"))


def publish_held(port: int, stream: str, rows: list[dict[str, Any]], batch: int = 2000) -> None:
    """Each row as the message a broker holds, with the stream protocol: its exchange and key
    as the ``x-exchange`` / ``x-routing-key`` annotations (what a 0-9-1 publish into a stream
    gets), its headers as application properties."""
    import asyncio

    from rstream import AMQPMessage, Producer

    def message(row: dict[str, Any]) -> Any:
        headers = json.loads(row["headers"]) if row["headers"] else None
        return AMQPMessage(
            body=b"", application_properties=headers,
            message_annotations={"x-exchange": row["exchange"],
                                 "x-routing-key": row["routing_key"]},
        )

    async def go() -> None:
        async with Producer("127.0.0.1", port, username="guest", password="guest") as producer:
            for at in range(0, len(rows), batch):
                await producer.send_batch(stream, [message(r) for r in rows[at:at + batch]])

    asyncio.run(go())


def _can_be_held(row: dict[str, Any]) -> bool:
    """Whether a broker can hold the record: a message always has a routing key, and its
    headers are a table (the sample's malformed records of those two kinds are file-only)."""
    if row["routing_key"] is None:
        return False
    if row["headers"] is None:
        return True
    try:
        return isinstance(json.loads(row["headers"]), dict)
    except ValueError:
        return False


def test_make_runs_sample_routes_live_into_delta_with_its_counts_through_a_killed_driver(
    node, tmp_path
):
    """make run's sample (a prefix of XROUTE_STREAM_SAMPLE messages) published into a stream
    routes live into Delta, the driver SIGKILLed mid-batch once and restarted, with make run's
    per-queue, unroutable and rejected counts from the same messages in Parquet. The records no
    broker can hold (no routing key; headers that are not JSON: make run rejects them) are not
    published: rejected is lower by exactly their number, every other count is equal."""

    from xroute.pipeline.sample import definitions, messages

    clock = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:  # printed (pytest -s): the run's time, phase by phase
        nonlocal clock
        now = time.monotonic()
        phases[name] = round(now - clock, 1)
        clock = now

    sample = messages(max(SAMPLE, 1_000_000)).slice(0, SAMPLE)
    defs = tmp_path / "definitions.json"
    defs.write_text(json.dumps(definitions()))
    parquet = tmp_path / "messages.parquet"
    pq.write_table(sample, parquet, row_group_size=131072)
    # make run's job, on the Parquet file.
    done = run(["pipeline", "--definitions", str(defs), "--messages", str(parquet),
                "--out", str(tmp_path / "from-parquet"), "--overwrite",
                "--keep-columns", "sent_at", "--master", "local[2]"], timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    baseline = json.loads((tmp_path / "from-parquet" / "summary.json").read_text())
    phase("make run's pipeline on Parquet")
    rows = sample.select(["exchange", "routing_key", "headers"]).to_pylist()
    held = [r for r in rows if _can_be_held(r)]
    not_held = len(rows) - len(held)
    assert 0 < not_held < len(rows) // 100  # about 0.4%: the two kinds of 1% malformed
    stream = f"xr-sample-{uuid.uuid4().hex[:6]}"
    from tests.conformance.streams import declare_stream

    declare_stream(node.amqp_url, stream)
    publish_held(node.stream_port, stream, held)
    phase("publish into the stream")
    out, checkpoint = tmp_path / "out", tmp_path / "cp"
    arguments = ["stream", "-d", str(defs), "-m", node.uri(stream), "-o", str(out),
                 "--checkpoint", str(checkpoint), "--table-format", "delta",
                 "--max-messages", str(max(len(held) // 8, 1000)), "--master", "local[2]"]
    log = tmp_path / "first.log"
    first = start_stream(arguments, log)
    target = locate(str(out))
    killed_in = kill_mid_batch(first, target, log, 1200)
    phase(f"stream until killed in batch {killed_in}")
    second = run([*arguments, "--available-now"], timeout=1800)
    phase("restarted stream to the end")
    counts = json.loads((out / "summary.json").read_text())["counts"]
    print(f"\nsample {SAMPLE:,} ({len(held):,} held): {phases}; counts {counts}")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert killed_in in committed_batches(target), "the batch killed mid-way was redone"
    live = json.loads((out / "summary.json").read_text())
    want = baseline["counts"]
    got = live["counts"]
    assert got["input"] == want["input"] - not_held == len(held)
    assert got["rejected"] == want["rejected"] - not_held
    for name in ("delivered", "deliveries", "unroutable"):
        assert got[name] == want[name], name
    assert live["queues"] == baseline["queues"]
    # The Delta tables themselves: as many rows a queue as the summaries say, offsets once.
    from deltalake import DeltaTable

    deliveries = DeltaTable(str(out / "deliveries")).to_pyarrow_table(columns=["queue"])
    per_queue = dict(zip(*[c.to_pylist() for c in
                           deliveries.group_by("queue").aggregate([("queue", "count")])
                           .select(["queue", "queue_count"]).columns]))
    assert per_queue == {q: n for q, n in baseline["queues"].items() if n}
    assert DeltaTable(str(out / "unroutable")).to_pyarrow_dataset().count_rows() == \
        want["unroutable"]
    ranges = sorted(tuple(m["offsets"][stream]) for m in committed_batches(str(out)).values())
    assert ranges[0][0] == 0 and ranges[-1][1] == len(held)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])), ranges
