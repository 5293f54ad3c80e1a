"""`verify_batch` on records whose broker answer is known: the library's own routes agree with
themselves whatever the topology; a binding taken away is named by every disagreement it
causes; exchanges that are missing, and records that cannot be routed, never count as agreeing."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import keys, patterns
from xroute import Topology
from xroute.traces.records import DELIVER, PUBLISH, TraceRecord, to_table
from xroute.traces.history import TopologyHistory
from xroute.traces.verify import (
    AGREE,
    DISAGREE,
    INEXACT,
    INVALID,
    MISSING_EXCHANGE,
    verify_batch,
)

QUEUES = ["q1", "q2", "q3"]


def topology_of(bindings: list[tuple[str, str]]) -> Topology:
    t = Topology()
    t.declare_exchange("t", "topic", alternate_exchange="alt")
    t.declare_exchange("alt", "fanout")
    for q in QUEUES + ["lost"]:
        t.declare_queue(q)
    t.bind("alt", "lost")
    for pattern, queue in bindings:
        t.bind("t", queue, pattern)
    return t


def record(t: Topology, key: str, cc: list[str], message_id: str) -> TraceRecord:
    headers = {"CC": cc} if cc else None
    return TraceRecord(PUBLISH, "t", [key, *cc], {"headers": headers or {}, "message_id": message_id},
                       sorted(t.route("t", key, headers)))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(patterns, st.sampled_from(QUEUES)), min_size=1, max_size=12),
       st.lists(st.tuples(keys, st.lists(keys, max_size=2)), min_size=1, max_size=15), st.data())
def test_a_removed_binding_is_named_by_every_disagreement(bindings, messages, data):
    broker = topology_of(bindings)
    records = [record(broker, key, cc, str(i)) for i, (key, cc) in enumerate(messages)]
    table = to_table(records + [TraceRecord(DELIVER, "t", ["x"], {}, queue="q1")])
    assert {v["status"] for v in verify_batch(table, broker).to_pylist()} == {AGREE}
    pattern, queue = data.draw(st.sampled_from(bindings))
    ours = topology_of([b for b in bindings if b != (pattern, queue)])
    verdicts = verify_batch(table, ours).to_pylist()
    assert len(verdicts) == len(messages)  # the delivery is not routed
    for v, r, (key, cc) in zip(verdicts, records, messages):
        expected = ours.route("t", key, {"CC": cc} if cc else None)
        # An agreeing verdict names the message only: its queues are the broker's.
        assert set(v["xroute_queues"] if v["status"] != AGREE else r.routed_queues) == expected
        if v["status"] == DISAGREE:
            named = [s for s in v["suspects"] if "'t' -> queue" in s and f"'{queue}'" in s]
            extra_via_alternate = v["extra"] == ["lost"]
            assert named or extra_via_alternate, (pattern, queue, v)
        else:
            assert v["status"] == AGREE and set(r.routed_queues) == expected
            assert v["headers"] is None and v["routed_queues"] is None


def test_missing_exchanges_and_unreadable_records_never_agree():
    t = topology_of([("a.#", "q1")])
    table = to_table([
        TraceRecord(PUBLISH, "nowhere", ["a"], {}, []),
        TraceRecord(PUBLISH, "t", ["a" * 256], {}, []),
    ])
    rows = table.to_pylist()
    rows.append({**rows[0], "seq": 2, "exchange": "t", "routing_key": "a", "headers": "{not json",
                 "amqp_headers": None})
    import pyarrow as pa

    verdicts = verify_batch(pa.Table.from_pylist(rows, schema=table.schema), t).to_pylist()
    assert [v["status"] for v in verdicts] == [MISSING_EXCHANGE, INVALID, INVALID]
    assert "nowhere" in verdicts[0]["reason"] and "255" in verdicts[1]["reason"]
    assert "JSON" in verdicts[2]["reason"]


def test_an_extra_queue_names_the_binding_that_took_the_message_there():
    broker = topology_of([])
    ours = topology_of([("a.*", "q2")])
    table = to_table([record(broker, "a.b", [], "m")])
    (v,) = verify_batch(table, ours).to_pylist()
    assert v["status"] == DISAGREE and v["extra"] == ["q2"] and v["missing"] == ["lost"]
    assert "'t' -> queue 'q2' key 'a.*'" in v["suspects"]
    assert json.loads(table.column("headers")[0].as_py()) == {}


def test_a_consistent_hash_on_a_property_is_verified_with_the_message_s_properties():
    t = Topology()
    t.declare_exchange("ch", "x-consistent-hash", arguments={"hash-property": "message_id"})
    for q, weight in (("q1", "1"), ("q2", "3"), ("q3", "2")):
        t.declare_queue(q)
        t.bind("ch", q, weight)
    records = [
        TraceRecord(PUBLISH, "ch", ["same-key"], {"message_id": f"m{i}"},
                    sorted(t.route("ch", "same-key", properties={"message_id": f"m{i}"})))
        for i in range(60)
    ]
    assert len({tuple(r.routed_queues) for r in records}) > 1  # the pick follows the id
    verdicts = verify_batch(to_table(records), t).to_pylist()
    assert {v["status"] for v in verdicts} == {AGREE}


def test_the_default_exchange_s_names_of_no_queue_are_no_disagreement():
    # 3.10.8's trace lists every routing key of a default-exchange message, queue or not.
    t = topology_of([])
    records = [
        TraceRecord(PUBLISH, "", [key, *cc], {"headers": {"CC": cc} if cc else {}},
                    sorted({key, *cc}))
        for key, cc in (("no.such.queue", []), ("q1", []), ("", []), ("amq.gen-none", ["q2"]))
    ]
    records.append(TraceRecord(PUBLISH, "", ["q3"], {}, []))  # q3 exists: a true difference
    verdicts = verify_batch(to_table(records), t).to_pylist()
    assert [v["status"] for v in verdicts] == [AGREE, AGREE, AGREE, AGREE, DISAGREE]
    assert verdicts[4]["extra"] == ["q3"]
    history = TopologyHistory(t.to_definitions(), [])
    assert [v["status"] for v in verify_batch(to_table(records), history).to_pylist()] == [
        AGREE, AGREE, AGREE, AGREE, DISAGREE]


def test_a_json_log_s_untyped_headers_are_inexact_rather_than_flagged():
    t = Topology()
    t.declare_exchange("h", "headers")
    t.declare_queue("q")
    t.bind("h", "q", "", {"x-match": "any", "n": 1})
    typed = TraceRecord(PUBLISH, "h", ["k"], {"headers": {"n": 2}}, ["q"])
    untyped = TraceRecord(PUBLISH, "h", ["k"], {"headers": {"n": 2}}, ["q"], typed=False)
    bare = TraceRecord(PUBLISH, "h", ["k"], {}, ["q"], typed=False)  # no headers: exact
    verdicts = verify_batch(to_table([typed, untyped, bare]), t).to_pylist()
    assert [v["status"] for v in verdicts] == [DISAGREE, INEXACT, DISAGREE]
    assert "JSON" in verdicts[1]["reason"]
