"""RabbitMQ's recorded answers to scripts of typed operations (tests/data/wire/, written by
tests/conformance/test_wire_replay.py from the private 3.10.8 plugin node), replayed through
`xroute serve` of the same profile: every reply, code and text, and every message's queues."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.wire_replay import differences, run_script
from xroute.amqp import Broker

RECORDED = Path(__file__).parent.parent / "data" / "wire" / "rabbitmq-3.10.json"
DATA = json.loads(RECORDED.read_text())


@pytest.fixture(scope="module")
def broker():
    """One broker for every case: each script deletes what it declared."""
    with Broker(rabbitmq=DATA["source"]["profile"]) as running:
        yield running


def test_the_recording_covers_every_operation_kind():
    kinds = {op["op"] for case in DATA["cases"].values() for op in case["script"]}
    assert kinds >= {"exchange.declare", "queue.declare", "queue.bind", "exchange.bind",
                     "queue.unbind", "exchange.delete", "queue.delete", "publish"}
    letters = json.dumps([c["script"] for c in DATA["cases"].values()])
    for letter in "bBsuIilfdDSxTVtAF":
        assert f'["{letter}", ' in letters, letter


@pytest.mark.parametrize("name", list(DATA["cases"]))
def test_xroute_serve_answers_as_recorded(broker, name):
    case = DATA["cases"][name]
    ours = run_script(broker.url, case["script"], DATA["source"]["prefix"])
    found = differences(case["script"], case["answers"], ours)
    assert not found, f"{name}: {len(found)} differences:\n" + "\n".join(found)
