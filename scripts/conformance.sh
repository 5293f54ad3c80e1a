#!/usr/bin/env bash
# make conformance: the differential tests against a real RabbitMQ, which is $XROUTE_AMQP_URL,
# else one answering on 127.0.0.1:5672, else a private node started on loopback (Debian's
# rabbitmq-server, installed if absent) and stopped when the tests end.
# XROUTE_CONFORMANCE_PRIVATE=1 always starts a private node. A second private node with the
# exchange-type plugins (consistent hash, random, JMS topic, recent history, sharding) is always
# started for tests/conformance/test_plugins.py and test_dead_letter.py, on its own ports.
# Two pytest-xdist workers ($XROUTE_CONFORMANCE_WORKERS; 0 runs in one process): the tests
# mostly wait on brokers, drivers and stream triggers, and the two stream modules, each with
# its node and Spark, run beside each other (tests/conftest.py's groups). Extra pytest
# arguments: $XROUTE_CONFORMANCE_ARGS (--durations=30, say).
set -euo pipefail
cd "$(dirname "$0")/.."
private=()
if [ -n "${XROUTE_CONFORMANCE_PRIVATE:-}" ]; then private=(--private); fi
exec .venv/bin/python -m xroute.bench.rabbitmq "${private[@]}" --plugins -- \
    .venv/bin/python -m pytest -m conformance tests/conformance tests/amqp -p no:cacheprovider \
    -n "${XROUTE_CONFORMANCE_WORKERS:-2}" --dist loadgroup ${XROUTE_CONFORMANCE_ARGS:-}
