"""A Celery app with topic routing (``task_queues`` bound to a topic exchange with binding
patterns), the tasks it sends, and what each queue holds afterwards: the same code for a real
RabbitMQ and for Redis or memory with xroute.kombu."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from celery import Celery
from kombu import Exchange, Queue, binding

from xroute import Topology

# (queue, binding pattern) of the app's task_queues on its topic exchange.
BINDINGS = [
    ("orders", "order.#"),
    ("eu", "*.eu"),
    ("eu", "*.*.eu"),  # a second binding of one queue: one copy per message
    ("audit", "#"),
    ("empty-word", "order.*.created"),
]
# Routing keys tasks are sent with (kombu's own topic routing gets 'order', 'order..created'
# and 'order.eu' wrong: '#' standing for no word, '*' for an empty one).
KEYS = ["order", "order.eu", "order..created", "order.x.created", "refund.eu", "refund.x.eu",
        "misc"]


def make_app(broker_url: str, prefix: str, transport_options: dict | None = None) -> Celery:
    """The app: its exchange and queues named with ``prefix``."""
    app = Celery(f"{prefix}app", broker=broker_url, set_as_current=False)
    exchange = Exchange(f"{prefix}events", type="topic", durable=False)
    queues: dict[str, list] = {}
    for queue, pattern in BINDINGS:
        queues.setdefault(queue, []).append(pattern)
    app.conf.update(
        task_queues=[
            Queue(f"{prefix}{name}", durable=False,
                  bindings=[binding(exchange, routing_key=p) for p in patterns])
            for name, patterns in queues.items()
        ],
        task_default_queue=f"{prefix}audit",
        task_default_exchange=exchange.name,
        task_default_exchange_type="topic",
        broker_transport_options=transport_options or {},
        broker_connection_retry_on_startup=False,
    )

    @app.task(name="place")
    def place(key: str) -> str:  # the tasks are only sent here, never run
        return key

    return app


def send_and_collect(app: Celery, prefix: str) -> dict[str, Counter]:
    """Declare the app's queues, send one task per key through the topic exchange, and
    return each queue's tasks as a multiset of routing keys (the task's argument); the
    queues and the exchange are deleted after."""
    with app.connection_for_write() as connection:
        channel = connection.channel()
        for queue in app.amqp.queues.values():
            queue(channel).declare()
        for key in KEYS:
            app.send_task("place", args=[key], exchange=f"{prefix}events", routing_key=key,
                          connection=connection)
        found: dict[str, Counter] = {}
        for name, queue in app.amqp.queues.items():
            bound, got = queue(channel), Counter()
            while (message := bound.get(no_ack=True)) is not None:
                assert message.headers["task"] == "place"
                got[message.payload[0][0]] += 1
            found[name[len(prefix):]] = got
            bound.delete()
        queue.exchange(channel).delete()
    return found


def expected() -> dict[str, Counter]:
    """What RabbitMQ's routing gives (`Topology.route`): each queue's keys."""
    topology = Topology()
    topology.declare_exchange("events", "topic")
    for queue, pattern in BINDINGS:
        topology.declare_queue(queue)
        topology.bind("events", queue, pattern)
    found: dict[str, Counter] = {queue: Counter() for queue, _ in BINDINGS}
    for key in KEYS:
        for queue in topology.route("events", key):
            found[queue][key] += 1
    return found


def new_prefix() -> str:
    """Names of this run's own."""
    return f"xr19-celery-{uuid.uuid4().hex[:8]}-"
