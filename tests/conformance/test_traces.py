"""RabbitMQ's own traces against xroute, on a private node with the tracing and event-exchange
plugins: a random topology changes while messages are published; `xroute capture` records the
firehose and the events, the tracing plugin writes its json and text logs, and `verify` must
find that the export taken at the end, with the events, routes every message where the broker
did; without the events, exactly the messages the changes moved disagree; and a binding taken
out of the export is named by every disagreement it causes."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import amqp
import pyarrow.parquet as pq
import pytest

from tests.conformance.broker import Mirror
from tests.conformance.management import api
from xroute import Topology
from xroute.bench.owned import Owned
from xroute.bench.rabbitmq import connect, private_node
from xroute.sources.management import fetch_definitions
from xroute.traces.capture import Capture
from xroute.traces.history import TopologyEvent, TopologyHistory
from xroute.traces.read import read_traces
from xroute.traces.verify import AGREE, DISAGREE, INEXACT, verify_batch

pytestmark = pytest.mark.conformance
XDIST_GROUP = "tracing-node"  # its private node, started once, in one xdist worker (tests/conftest.py)

SEED = int(os.environ.get("XROUTE_TRACE_SEED", "20261124"))
WORDS = ("a", "b", "c", "")
PLUGINS = ("rabbitmq_tracing", "rabbitmq_event_exchange")


@pytest.fixture(scope="module")
def traced():
    """A private node with the firehose on, and what one random run left: the capture, the
    tracing plugin's logs, the export at the end, and each message's queues at its moment."""
    logs = Path(tempfile.mkdtemp(prefix="xroute-tracing-"))
    shutil.chown(logs, "rabbitmq", "rabbitmq") if os.geteuid() == 0 else None
    advanced = f'[{{rabbitmq_tracing, [{{directory, "{logs}"}}]}}].\n'
    with private_node(management=True, plugins=PLUGINS, advanced_config=advanced) as node:
        node.rabbitmqctl("trace_on", "-p", "/")
        for fmt in ("json", "text"):
            api(node.management_url, "PUT", f"traces/%2F/x{fmt}", {"format": fmt, "pattern": "publish.#"})
        out = tempfile.mkdtemp(prefix="xroute-capture-")
        capture = Capture(node.amqp_url, out, roll_records=40)
        runner = threading.Thread(target=capture.run, kwargs={"idle_seconds": 4})
        connection = connect(node.amqp_url)
        try:
            expected, removed_last = _run(connection.channel(), capture, runner)
        finally:
            runner.join(60)
            capture.close()
            connection.close()
        export = fetch_definitions(node.management_url, "/", password="guest")
        for fmt in ("json", "text"):  # stopping a trace flushes its log
            api(node.management_url, "DELETE", f"traces/%2F/x{fmt}")
        yield {"capture": out, "logs": logs, "export": export, "expected": expected,
               "removed_last": removed_last, "url": node.amqp_url, "node": node}
    shutil.rmtree(logs, ignore_errors=True)


def _run(channel, capture, runner):
    rng = random.Random(SEED)
    print(f"trace conformance seed {SEED} (XROUTE_TRACE_SEED)")
    mirror = Mirror(channel, "tr-", exclusive=False)
    mirror.exchange("alt", "fanout")
    mirror.exchange("t", "topic", alternate="alt")
    for name, kind in (("t2", "topic"), ("d", "direct"), ("f", "fanout"), ("h", "headers")):
        mirror.exchange(name, kind)
    for q in range(6):
        mirror.queue(f"q{q}")
    mirror.bind("alt", "q5", "")
    mirror.bind("t", "t2", "a.#", to_exchange=True)
    bound: list[tuple] = []

    def bind_random() -> None:
        source = rng.choice(["t", "t2", "d", "f", "h"])
        queue = f"q{rng.randrange(5)}"
        if source in ("t", "t2"):
            key = ".".join(rng.choice(WORDS + ("*", "#")) for _ in range(rng.randint(1, 3)))
            args = None
        elif source == "h":
            key, args = "", {"x-match": rng.choice(["all", "any"]), "n": rng.choice([1, 2]),
                              "s": rng.choice(["x", "y"])}
        else:
            key, args = ".".join(rng.choice(WORDS) for _ in range(2)), None
        binding = (source, queue, key, args)
        if binding not in bound:
            mirror.bind(*binding)
            bound.append(binding)

    for _ in range(14):
        bind_random()
    runner.start()
    time.sleep(0.5)  # the capture's queue is consuming
    expected: dict[str, frozenset[str]] = {}
    removed_last = None
    for phase in range(3):
        for i in range(40):
            exchange = rng.choice(["t", "d", "f", "h"])
            key = ".".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
            headers = {"n": rng.choice([1, 2, 1.0]), "s": rng.choice(["x", "y"])}
            if rng.random() < 0.3:
                headers["CC"] = [".".join(rng.choice(WORDS) for _ in range(2))]
            if rng.random() < 0.2:
                headers["BCC"] = [rng.choice(["a.b", "b.a"])]
            message_id = f"m{phase}-{i}"
            expected[message_id] = mirror.topology.route(mirror.name(exchange), key, headers)
            channel.basic_publish(
                amqp.Message(b"x", application_headers=headers, message_id=message_id),
                mirror.name(exchange), key,
            )
        time.sleep(0.05)  # the tracing plugin's clock tells each change from each message
        for _ in range(2):
            gone = bound.pop(rng.randrange(len(bound)))
            source, queue, key, args = gone
            mirror.topology.unbind(mirror.name(source), mirror.name(queue), key, args)
            channel.queue_unbind(mirror.name(queue), mirror.name(source), key, arguments=args or {})
            removed_last = gone
            bind_random()
        time.sleep(0.05)
    return expected, removed_last


def _verdicts(table, against):
    return {r["message_id"]: r for r in verify_batch(table, against).to_pylist()}


def test_the_broker_routed_as_the_mirror_said(traced):
    table = read_traces(traced["capture"])
    published = [r for r in table.to_pylist() if r["record_type"] == "publish"]
    assert len(published) == len(traced["expected"])
    for row in published:
        assert set(row["routed_queues"]) == traced["expected"][row["message_id"]], row


def test_the_end_export_with_the_events_agrees_on_every_message(traced):
    table = read_traces(traced["capture"])
    events = [TopologyEvent.from_row(r) for r in table.to_pylist() if r["record_type"] == "event"]
    assert len(events) >= 12  # the 6 unbinds and up to 6 binds of the run
    history = TopologyHistory(traced["export"], events)
    verdicts = _verdicts(table, history)
    assert Counter(v["status"] for v in verdicts.values()) == {AGREE: len(traced["expected"])}
    assert history.skipped == []


def test_without_events_exactly_the_moved_messages_disagree(traced):
    end = Topology.from_definitions(traced["export"])
    verdicts = _verdicts(read_traces(traced["capture"]), end)
    for message_id, before in traced["expected"].items():
        row = verdicts[message_id]
        # An agreeing verdict went where the broker put it, which the mirror test checks.
        now = before if row["status"] == AGREE else frozenset(row["xroute_queues"])
        assert row["status"] == (AGREE if now == before else DISAGREE), row
        assert set(row["missing"] or ()) == before - now  # null when the message agrees
        assert set(row["extra"] or ()) == now - before
    assert any(v["status"] == DISAGREE for v in verdicts.values())


def test_a_binding_left_out_of_the_export_is_named_by_every_disagreement(traced):
    export = json.loads(json.dumps(traced["export"]))
    # A binding that the end topology has and that messages of the last phase used.
    last = [m for m in traced["expected"] if m.startswith("m2-")]
    end = Topology.from_definitions(export)
    table = read_traces(traced["capture"])
    rows = {r["message_id"]: r for r in table.to_pylist() if r["record_type"] == "publish"}
    used = Counter()
    for m in last:
        row = rows[m]
        for queue in traced["expected"][m]:
            used[queue] += 1
    candidates = [b for b in export["bindings"] if b["destination_type"] == "queue"
                  and b["destination"] in used and b["source"] != "tr-alt"]
    assert candidates
    dropped = candidates[0]
    export["bindings"].remove(dropped)
    events = [TopologyEvent.from_row(r) for r in table.to_pylist() if r["record_type"] == "event"]
    verdicts = _verdicts(table, TopologyHistory(export, events))
    wrong = [v for v in verdicts.values() if v["status"] != AGREE]
    needle = f"'{dropped['source']}' -> queue '{dropped['destination']}'"
    assert all(any(needle in s for s in v["suspects"]) for v in wrong), (needle, wrong[:3])


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_the_tracing_plugin_logs_verify_as_the_capture_does(traced, fmt):
    log = traced["logs"] / f"x{fmt}.log"
    table = read_traces(str(log), "rabbitmq-tracing")
    captured = read_traces(traced["capture"])
    events = [TopologyEvent.from_row(r) for r in captured.to_pylist() if r["record_type"] == "event"]
    assert table.num_rows == len(traced["expected"])
    by_time = _verdicts(table, TopologyHistory(traced["export"], events, order="time"))
    assert Counter(v["status"] for v in by_time.values()) == {AGREE: len(traced["expected"])}
    end = Topology.from_definitions(traced["export"])
    # The JSON log lost the headers' types: where the capture disagrees, it says inexact.
    moved = {DISAGREE: INEXACT} if fmt == "json" else {}
    assert {m: (v["status"], v["missing"], v["extra"]) for m, v in _verdicts(table, end).items()} == {
        m: (moved.get(v["status"], v["status"]), v["missing"], v["extra"])
        for m, v in _verdicts(captured, end).items()
    }


def test_xroute_verify_on_spark_publishes_and_exits_by_agreement(traced, tmp_path):
    defs = tmp_path / "defs.json"
    defs.write_text(json.dumps(traced["export"]))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    xroute = str(Path(sys.executable).parent / "xroute")

    def verify(trace: str, out: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [xroute, "verify", "-d", str(defs), "-m", trace, "-o", str(out), "--master", "local[2]"],
            capture_output=True, text=True, env=env, timeout=600,
        )

    agree = verify(traced["capture"], tmp_path / "ok")
    assert agree.returncode == 0, agree.stdout + agree.stderr
    report = json.loads((tmp_path / "ok" / "verify.json").read_text())
    assert report["counts"]["agree"] == report["counts"]["published"] == len(traced["expected"])
    assert report["topology_versions"] > 1
    assert (tmp_path / "ok" / "_SUCCESS").exists() and (tmp_path / "ok" / "verify.png").exists()
    written = pq.read_table(tmp_path / "ok" / "messages")
    assert sorted(written.column("message_id").to_pylist()) == sorted(traced["expected"])

    # The text log carries no events: the end export alone, and the moved messages disagree.
    log = str(traced["logs"] / "xtext.log")
    static = verify(log, tmp_path / "static")
    expected = Counter(
        v["status"] for v in verify_batch(read_traces(log), Topology.from_definitions(traced["export"])).to_pylist()
    )
    report = json.loads((tmp_path / "static" / "verify.json").read_text())
    assert expected[DISAGREE] > 0 and static.returncode == 1, static.stdout + static.stderr
    assert report["counts"]["disagree"] == expected[DISAGREE]
    assert report["counts"]["agree"] == expected[AGREE]
    assert report["per_binding"] and report["samples"][0]["path"]["visits"]


def test_the_capture_command_stops_on_sigterm_and_resumes_without_a_gap(traced, tmp_path):
    import signal

    url, out = traced["url"], tmp_path / "cap"
    traced["node"].rabbitmqctl("trace_on", "-p", "/")  # deleting the last plugin trace turned it off
    xroute = str(Path(sys.executable).parent / "xroute")
    connection = connect(url)
    channel = connection.channel()
    channel.exchange_declare("cap.x", "fanout", auto_delete=False)
    channel.queue_declare("cap.q", auto_delete=False)
    channel.queue_bind("cap.q", "cap.x", "")

    def publish(first: int, count: int) -> None:
        for i in range(first, first + count):
            channel.basic_publish(amqp.Message(b"c", message_id=f"c{i}"), "cap.x", "k")

    def capture() -> subprocess.Popen:
        process = Owned("capture").popen(
            [xroute, "capture", url, "-o", str(out), "--queue", "xroute-cap-test",
             "--roll-records", "4", "--no-events"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        # It says so once its queue is bound and consuming: from then on nothing is missed.
        assert "capturing the firehose" in process.stderr.readline()
        return process

    first = capture()
    publish(0, 10)
    time.sleep(2)
    first.send_signal(signal.SIGTERM)
    said, errors = first.communicate(timeout=60)
    assert first.returncode == 0, errors
    publish(10, 5)  # while no capture runs: they wait in the named queue
    second = capture()
    time.sleep(2)
    second.send_signal(signal.SIGTERM)
    said_again, errors = second.communicate(timeout=60)
    assert second.returncode == 0, errors
    connection.close()
    table = read_traces(str(out))
    ids = [r["message_id"] for r in table.to_pylist() if r["exchange"] == "cap.x"]
    assert sorted(ids) == sorted(f"c{i}" for i in range(15))  # each once, none lost
    assert table.column("seq").to_pylist() == list(range(table.num_rows))  # one order, resumed
    assert "captured" in said and "captured" in said_again
