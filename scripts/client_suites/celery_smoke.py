"""Celery smoke test: a worker on the broker at ``TEST_BROKER`` runs a chain of tasks."""

from __future__ import annotations

import os

from celery import Celery, chain
from celery.contrib.testing.worker import start_worker

app = Celery("xroute_smoke", broker=os.environ["TEST_BROKER"], backend="rpc://")
app.conf.update(task_default_queue="xroute-celery-smoke", worker_hijack_root_logger=False)


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task
def double(x: int) -> int:
    return 2 * x


def test_a_chain_runs_on_a_worker():
    with start_worker(app, pool="threads", perform_ping_check=False, loglevel="WARNING",
                      shutdown_timeout=60):
        result = chain(add.s(2, 3), double.s(), add.s(1))()
        assert result.get(timeout=30) == 11
