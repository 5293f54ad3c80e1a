"""Differential: the same kombu programs against the real RabbitMQ (``pyamqp://``, where the
broker routes) and against ``memory://`` and ``redis://`` with xroute.kombu: every
operation's outcome and every queue's contents (body, headers as received, redelivered) must
agree. The issue's scenarios, seeded random programs with churn, and a Celery app with topic
routing. docs/kombu.md lists what differs and why; none of it is exercised here."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from kombu import Connection

import xroute.kombu
from tests import celery_support
from tests.kombu_programs import (
    RECORDED,
    SCENARIOS,
    differences,
    program,
    recorded,
    recorded_names,
    run,
)
from xroute.bench.kombu import delete_redis_keys
from xroute.bench.redis import RedisUnavailable, redis_server

pytestmark = pytest.mark.conformance
SEEDS = range(60)


@pytest.fixture(scope="module")
def transports(broker_url):
    """Connection makers: RabbitMQ (publisher confirms: a publish returns once routed, and a
    refused one raises), memory and Redis with xroute installed (Redis keys under a prefix of
    this module's own)."""
    amqp = broker_url.replace("amqp://", "pyamqp://", 1)
    prefix = f"xr19-conformance-{uuid.uuid4().hex[:8]}:"
    xroute.kombu.install()
    try:
        with redis_server() as redis_url:
            options = {"global_keyprefix": prefix, "polling_interval": 0.05}
            yield {
                "rabbitmq": lambda: Connection(amqp, transport_options={"confirm_publish": True}),
                "memory": lambda: Connection("memory://"),
                "redis": lambda: Connection(redis_url, transport_options=options),
            }
            delete_redis_keys(redis_url, prefix)
    except RedisUnavailable as error:
        print(f"no Redis: {error}")
        pytest.skip(f"no Redis could be found or started: {error}")
    finally:
        xroute.kombu.uninstall()


def agree(transports, name: str) -> None:
    steps = program(name)
    want = run(steps, transports["rabbitmq"])
    for transport in ("memory", "redis"):
        got = run(steps, transports[transport])
        assert not differences(steps, want, got), f"{transport}, {name}:\n" + differences(
            steps, want, got)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_issue_scenarios_agree_with_rabbitmq(transports, name):
    agree(transports, name)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_programs_with_churn_agree_with_rabbitmq(transports, seed):
    agree(transports, f"seed={seed}")


def test_recorded_rabbitmq_results_are_current(transports):
    """The default test run compares memory and Redis with RabbitMQ's recorded results."""
    live = {name: run(program(name), transports["rabbitmq"]) for name in recorded_names()}
    if os.environ.get("XROUTE_KOMBU_RECORD") == "1":
        RECORDED.write_text(json.dumps({"broker": "RabbitMQ via pyamqp", "results": live},
                                       indent=1, sort_keys=True) + "\n")
    stale = [name for name in recorded_names() if recorded().get(name) != live[name]]
    assert not stale, f"RabbitMQ now answers otherwise for {stale}: XROUTE_KOMBU_RECORD=1"


def test_celery_topic_routing_on_redis_matches_rabbitmq(transports, broker_url):
    prefix = celery_support.new_prefix()
    rabbitmq = celery_support.send_and_collect(celery_support.make_app(
        broker_url.replace("amqp://", "pyamqp://", 1), prefix, {"confirm_publish": True}), prefix)
    with redis_server() as redis_url:
        prefix = celery_support.new_prefix()
        redis = celery_support.send_and_collect(celery_support.make_app(
            redis_url, prefix, {"global_keyprefix": prefix}), prefix)
        delete_redis_keys(redis_url, prefix)
    assert redis == rabbitmq
    assert rabbitmq == celery_support.expected()
