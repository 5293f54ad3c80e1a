"""`xroute verify` on the tracing plugin's own logs, with typed headers and the default
exchange's names of queues that do not exist: it flags exactly the messages that re-publishing
flags, with the export alone and with the topology history (the event exchange's records).

A private node with the tracing, event-exchange and exchange-type plugins gets a topology,
messages whose headers carry every AMQP type (written on a plain socket: `tests.wire_replay`),
some published to the default exchange with names of no queue; then bindings change and every
message is published again. The second publication is the truth: a message whose traced queues
(less the names that are no queue) differ from its re-publication's is one the change moved,
and only those may be flagged against the export taken at the end.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.conformance.management import api
from tests.conformance.plugins import BROKER_PROFILE
from tests.wire_cases import VALUES
from tests.wire_replay import WireClient, encode_properties, encode_table
from xroute import Topology
from xroute.bench.rabbitmq import PLUGINS, private_node
from xroute.sources.definitions import with_profile
from xroute.sources.management import fetch_definitions
from xroute.traces.capture import Capture
from xroute.traces.history import TopologyEvent, TopologyHistory
from xroute.traces.read import read_traces
from xroute.traces.verify import AGREE, DISAGREE, INEXACT, verify_batch

pytestmark = pytest.mark.conformance
XDIST_GROUP = "typed-log-node"  # its private node, started once, in one xdist worker (tests/conftest.py)

SEED = int(os.environ.get("XROUTE_TRACE_SEED", "3434"))
PREFIX = "tv-"
QUEUES = [f"q{i}" for i in range(5)]
# Binding arguments in the types a definitions export keeps (JSON: long, longstr, double, bool),
# so that the export is the broker's topology exactly; the messages' headers are of every type.
CRITERIA = [["l", 1], ["l", 2], ["S", "abc"], ["d", 1.5], ["t", True],
            ["A", [["l", 1]]], ["A", [["S", "abc"]]]]


def _declare(client: WireClient, rng: random.Random) -> list[tuple]:
    from pamqp import commands as c

    def call(method, table=None, reply=None):
        assert client.call(method, table, reply) == "ok", method

    for name, kind, arguments in (("h", "headers", {}), ("t", "topic", {}),
                                  ("c", "x-consistent-hash", {"hash-header": ["S", "n"]}),
                                  ("d", "direct", {})):
        call(c.Exchange.Declare(exchange=PREFIX + name, exchange_type=kind, arguments={}),
             encode_table(arguments), c.Exchange.DeclareOk)
    for queue in QUEUES:
        call(c.Queue.Declare(queue=PREFIX + queue, arguments={}), None, c.Queue.DeclareOk)
    bindings = []
    for i, queue in enumerate(QUEUES):
        call(c.Queue.Bind(queue=PREFIX + queue, exchange=PREFIX + "c", routing_key=str(i + 1),
                          arguments={}), None, c.Queue.BindOk)
    for _ in range(10):
        queue = rng.choice(QUEUES)
        source = rng.choice(["h", "t", "d"])
        if source == "h":
            arguments = {"x-match": ["S", rng.choice(["any", "all"])]}
            for name in rng.sample(["a", "n"], rng.randint(1, 2)):
                arguments[name] = rng.choice(CRITERIA)
            key = ""
        else:
            arguments = {}
            key = rng.choice(["a", "a.b", "#", "*.b", "b"])
        binding = (source, queue, key, arguments)
        if binding not in bindings:
            call(c.Queue.Bind(queue=PREFIX + queue, exchange=PREFIX + source, routing_key=key,
                              arguments={}), encode_table(arguments), c.Queue.BindOk)
            bindings.append(binding)
    return bindings


def _messages(rng: random.Random) -> list[tuple[str, str, dict]]:
    out = []
    for _ in range(60):
        exchange = rng.choice(["h", "t", "c", "d", ""])
        if exchange == "":
            key = rng.choice([PREFIX + "q0", "no.such.queue", "", "amq.gen-none", PREFIX + "q3"])
        else:
            key = rng.choice(["a", "a.b", "b", "c"])
        headers = {name: rng.choice(VALUES) for name in rng.sample(["a", "n", "z"], 2)}
        if rng.random() < 0.2:
            headers["CC"] = ["A", [["S", rng.choice(["a", PREFIX + "q1", "nowhere"])]]]
        out.append((exchange, key, headers))
    return out


def _publish_all(client: WireClient, messages, tag: str) -> set[str]:
    """Publish every message; the ids of those the broker closed the connection on."""
    crashed = set()
    for number, (exchange, key, headers) in enumerate(messages):
        reply = client.publish(PREFIX + exchange if exchange else "", key,
                               encode_properties({"message_id": f"{tag}{number}"}, headers),
                               f"{tag}{number}".encode())
        assert reply in ("ok", "nack") or reply[0] == 541, reply  # 541: the hash crashed
        if reply not in ("ok", "nack"):
            crashed.add(f"{tag}{number}")
    return crashed


def _landed(client: WireClient) -> dict[str, set[str]]:
    where: dict[str, set[str]] = {}
    for queue in QUEUES:
        for body in client.drain(PREFIX + queue):
            where.setdefault(body.decode(), set()).add(PREFIX + queue)
    return where


@pytest.fixture(scope="module")
def traced():
    rng = random.Random(SEED)
    logs = Path(tempfile.mkdtemp(prefix="xroute-tracing-"))
    if os.geteuid() == 0:
        shutil.chown(logs, "rabbitmq", "rabbitmq")
    advanced = f'[{{rabbitmq_tracing, [{{directory, "{logs}"}}]}}].\n'
    plugins = ("rabbitmq_tracing", "rabbitmq_event_exchange", *PLUGINS)
    with private_node(management=True, plugins=plugins, advanced_config=advanced) as node:
        node.rabbitmqctl("trace_on", "-p", "/")
        for fmt in ("json", "text"):
            api(node.management_url, "PUT", f"traces/%2F/x{fmt}",
                 {"format": fmt, "pattern": "publish.#"})
        out = tempfile.mkdtemp(prefix="xroute-capture-")
        capture = Capture(node.amqp_url, out, roll_records=50)
        runner = threading.Thread(target=capture.run, kwargs={"idle_seconds": 4})
        client = WireClient(node.amqp_url)
        bindings = _declare(client, rng)
        runner.start()
        time.sleep(0.5)
        messages = _messages(rng)
        crashed = _publish_all(client, messages, "p")
        first = _landed(client)
        time.sleep(0.05)  # the tracing plugin's clock tells the change from the messages
        from pamqp import commands as c

        for source, queue, key, arguments in rng.sample(bindings, 3):  # the change
            assert client.call(c.Queue.Unbind(queue=PREFIX + queue, exchange=PREFIX + source,
                                              routing_key=key, arguments={}),
                               encode_table(arguments), c.Queue.UnbindOk) == "ok"
        time.sleep(0.05)
        crashed |= _publish_all(client, messages, "r")
        again = _landed(client)
        runner.join(60)
        capture.close()
        client.close()
        # Read as the node's version routes (3.10: consistent hash on {Type, Value}...).
        export = with_profile(fetch_definitions(node.management_url, "/", password="guest"),
                              BROKER_PROFILE)
        for fmt in ("json", "text"):  # stopping a trace flushes its log
            api(node.management_url, "DELETE", f"traces/%2F/x{fmt}")
        yield {"logs": logs, "capture": out, "export": export, "first": first, "again": again,
               "count": len(messages), "crashed": crashed}
    shutil.rmtree(logs, ignore_errors=True)


def _by_payload(table) -> dict[str, dict]:
    """The publish records by payload (each message's body is its id)."""
    return {r["payload"].decode(): r for r in table.to_pylist() if r["record_type"] == "publish"}


def _moved(traced) -> set[str]:
    """The first publications whose queues differ from their re-publication's: the ones a
    verification against the end topology must flag, and no other."""
    count = traced["count"]
    return {f"p{i}" for i in range(count)
            if traced["first"].get(f"p{i}", set()) != traced["again"].get(f"r{i}", set())}


def _verdicts(table, against) -> dict[str, dict]:
    records = _by_payload(table)
    by_seq = {r["seq"]: r for r in verify_batch(table, against).to_pylist()}
    return {payload: by_seq[row["seq"]] for payload, row in records.items()}


def test_the_text_log_is_flagged_exactly_where_republishing_differs(traced):
    table = read_traces(str(traced["logs"] / "xtext.log"), "rabbitmq-tracing")
    verdicts = _verdicts(table, Topology.from_definitions(traced["export"]))
    flagged = {m for m, v in verdicts.items() if v["status"] != AGREE}
    assert flagged == _moved(traced), {m: verdicts[m] for m in flagged ^ _moved(traced)}
    assert {verdicts[m]["status"] for m in flagged} <= {DISAGREE}


def test_with_the_events_the_text_log_agrees_on_every_message(traced):
    table = read_traces(str(traced["logs"] / "xtext.log"), "rabbitmq-tracing")
    captured = read_traces(traced["capture"])
    events = [TopologyEvent.from_row(r) for r in captured.to_pylist()
              if r["record_type"] == "event"]
    history = TopologyHistory(traced["export"], events, order="time")
    verdicts = _verdicts(table, history)
    wrong = {m: v for m, v in verdicts.items() if v["status"] != AGREE}
    assert not wrong, wrong


def test_the_json_log_flags_no_message_it_cannot_judge(traced):
    table = read_traces(str(traced["logs"] / "xjson.log"), "rabbitmq-tracing")
    verdicts = _verdicts(table, Topology.from_definitions(traced["export"]))
    disagree = {m for m, v in verdicts.items() if v["status"] == DISAGREE}
    inexact = {m for m, v in verdicts.items() if v["status"] == INEXACT}
    assert disagree <= _moved(traced)  # no false alarm
    assert _moved(traced) <= disagree | inexact  # no miss: the rest is said to be inexact


def test_the_capture_and_the_text_log_keep_the_same_typed_headers(traced):
    from xroute.core.field_table import decode_table

    def typed(table) -> dict[str, dict]:
        return {payload: decode_table(row["amqp_headers"])[0]
                for payload, row in _by_payload(table).items()}

    text = typed(read_traces(str(traced["logs"] / "xtext.log"), "rabbitmq-tracing"))
    captured = typed(read_traces(traced["capture"]))
    assert text == captured and len(text) == 2 * traced["count"] - len(_crashed(traced))
    kinds = {type(v).__name__ for headers in text.values() for v in headers.values()}
    assert {"short", "float32", "bytes", "unsignedint"} <= kinds  # bytes: binary, as pika's
    json_log = read_traces(str(traced["logs"] / "xjson.log"), "rabbitmq-tracing")
    assert json_log.column("amqp_headers").null_count == json_log.num_rows


def _crashed(traced) -> set[str]:
    """Messages the broker closed the connection on (a hash it could not compute): untraced."""
    return traced["crashed"]
