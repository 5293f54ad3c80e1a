"""xroute on the cases where RabbitMQ once routed differently (tests/rabbitmq_cases.py)."""

from __future__ import annotations

import pytest

from tests.rabbitmq_cases import CASES, QUEUE, Case
from xroute import Topology


def route_case(case: Case, topology: Topology, exchange: str, queue: str) -> bool:
    """Declare the case's exchange and queue in ``topology`` and route its message."""
    topology.declare_exchange(exchange, case.exchange_type, arguments=case.exchange_arguments)
    topology.declare_queue(queue)
    topology.bind(exchange, queue, case.binding_key, case.arguments)
    key = queue if case.routing_key == QUEUE else case.routing_key
    return queue in topology.route(exchange, key, case.headers)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case: Case) -> None:
    # Measured on 3.10.8: its profile (4.x routes a top-level timestamp header as milliseconds).
    assert route_case(case, Topology(rabbitmq="3.10"), "X", "q") is case.routed, case
