"""`xroute serve` and RabbitMQ (the private plugin node) give the same reply, code and text, to
every operation of scripts of typed operations, and put every message in the same queues
(`tests.wire_replay`; the scripts: `tests.wire_cases`, generated and hand-picked).

With ``XROUTE_RECORD_WIRE=1`` the broker's answers are written to `RECORDED`, which
tests/amqp/test_wire_recorded.py replays through xroute alone in ``make test``.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import pytest

from tests.conformance.plugins import BROKER_PROFILE, plugins_url  # noqa: F401 (fixture)
from tests.wire_cases import HAND_PICKED, generate
from tests.wire_replay import differences, run_script
from xroute.amqp import Broker

pytestmark = pytest.mark.conformance

RECORDED = Path(__file__).parent.parent / "data" / "wire" / f"rabbitmq-{BROKER_PROFILE}.json"
PREFIX = ""  # names as the scripts write them: CC keys and default-exchange keys name queues
SEEDS = range(40)
CASES = {f"generated, seed {seed}": generate(seed) for seed in SEEDS} | HAND_PICKED


@pytest.fixture(scope="module")
def answers(plugins_url):  # noqa: F811
    """The broker's answers by case, written to `RECORDED` at the end when asked."""
    found: dict[str, dict] = {}
    yield found
    if os.environ.get("XROUTE_RECORD_WIRE") and len(found) == len(CASES):
        source = {
            "broker": f"RabbitMQ {BROKER_PROFILE} (Debian's rabbitmq-server 3.10.8) with the "
            "consistent-hash, random, JMS topic, recent-history and sharding plugins",
            "recorded": datetime.date.today().isoformat(),
            "by": "tests/conformance/test_wire_replay.py (XROUTE_RECORD_WIRE=1)",
            "profile": BROKER_PROFILE,
            "prefix": PREFIX,
        }
        # One case a line: a new recording's diff shows the cases whose answers moved.
        lines = [
            f"  {json.dumps(name, ensure_ascii=False)}: "
            + json.dumps({"script": CASES[name], "answers": found[name]}, ensure_ascii=False)
            for name in CASES
        ]
        RECORDED.write_text(
            '{"source": ' + json.dumps(source, ensure_ascii=False) + ',\n "cases": {\n'
            + ",\n".join(lines) + "\n}}\n"
        )


@pytest.mark.parametrize("name", list(CASES))
def test_xroute_serve_answers_as_rabbitmq(plugins_url, answers, name):  # noqa: F811
    script = CASES[name]
    theirs = run_script(plugins_url, script, PREFIX)
    answers[name] = theirs
    with Broker(rabbitmq=BROKER_PROFILE) as broker:
        ours = run_script(broker.url, script, PREFIX)
    found = differences(script, theirs, ours)
    assert not found, f"{name}: {len(found)} differences:\n" + "\n".join(found)
