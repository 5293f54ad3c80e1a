"""Experiment 6b (with ``--with-rabbitmq``): a real RabbitMQ as the peer a user would deploy.

A private node on 127.0.0.1 (`xroute.bench.rabbitmq`), topic and direct exchanges with 1k and
10k bindings all leading to one queue, so that the queue's work stays the same and what grows
is routing. Each message is published with a publisher confirm and waited for, so a message's
time includes the broker's route; a direct exchange with one binding gives the floor (network,
protocol, queue) that is subtracted to estimate routing alone. Half the keys match a binding and
half may not; the queue's message count must equal what xroute's `Topology.route` delivers for
the same bindings and keys, which checks xroute against the broker on the way.
"""

from __future__ import annotations

import random
import time
from typing import Any

from xroute.bench.experiments.common import Context, Progress, seconds_per_item, table
from xroute.bench.rabbitmq import connect
from xroute.bench.workload import random_word, seed_keys, seed_patterns
from xroute.core.topology import Topology

NUMBER = 6
KEY = "rabbitmq"
TITLE = "A real RabbitMQ: publish with confirms, topic and direct, 1k and 10k bindings"
SEED = {
    "source": "000/003 (RabbitMQ's topic route/2) and 002 (RabbitMQ's own trie study)",
    "setup": (
        "The seeds measured RabbitMQ itself: route/2 timed inside the node (000/003) and "
        "rabbitmq-perf-test throughput (004). Here: RabbitMQ from Debian on loopback, one "
        "publisher waiting for each confirm, bindings of the seed mix (topic) or distinct "
        "words (direct), all to one queue."
    ),
    "figures": [
        ["RabbitMQ topic routing", "grows with bindings and key length (000/003, no numbers)"],
        ["topic against direct", "direct clearly cheaper under load (000/003, MongooseIM)"],
    ],
}
SINK = "xroute.bench.sink"
RNG_SEED = 6000

PARAMETERS: dict[str, dict[str, Any]] = {
    "full": {"sizes": (1_000, 10_000), "messages": 3_000},
    "quick": {"sizes": (1_000, 10_000), "messages": 300},
    "tiny": {"sizes": (50, 200), "messages": 30},
}


def steps(scale: str) -> int:
    """How many progress steps `run` reports at this scale."""
    return 2 + 2 * len(PARAMETERS[scale]["sizes"])


def _workload(kind: str, size: int, messages: int) -> tuple[list[str], list[str]]:
    """(binding keys, routing keys): half the keys made to match, half free to miss."""
    rng = random.Random(RNG_SEED + size)
    if kind == "topic":
        patterns = seed_patterns(size, seed=RNG_SEED + size)
        hits = seed_keys(patterns, messages - messages // 2, seed=RNG_SEED + 1)
        misses = [
            ".".join(random_word(rng) for _ in range(rng.randint(1, 8)))
            for _ in range(messages // 2)
        ]
    else:
        patterns = [f"k{n}" for n in range(size)]
        hits = [f"k{rng.randrange(size)}" for _ in range(messages - messages // 2)]
        misses = [f"none{rng.randrange(size)}" for _ in range(messages // 2)]
    keys = hits + misses
    rng.shuffle(keys)
    return patterns, keys


def _measure(channel: Any, kind: str, patterns: list[str], keys: list[str]) -> dict[str, Any]:
    import amqp

    exchange = f"xroute.bench.{kind}.{len(patterns)}"
    channel.exchange_declare(exchange, kind, durable=False, auto_delete=False)
    topology = Topology()
    topology.declare_exchange(exchange, kind)
    topology.declare_queue(SINK)
    started = time.perf_counter()
    for pattern in patterns:
        channel.queue_bind(SINK, exchange, pattern)
        topology.bind(exchange, SINK, pattern)
    bind_seconds = time.perf_counter() - started
    channel.queue_purge(SINK)
    body = amqp.Message(b"x" * 120)  # the MongooseIM payload size of seed 000

    def publish(key: str) -> None:
        channel.basic_publish(body, exchange, key)

    per_message = seconds_per_item(publish, keys)
    _, in_queue, _ = channel.queue_declare(SINK, passive=True)
    expected = sum(1 for key in keys if topology.route(exchange, key))
    xroute = seconds_per_item(lambda key: topology.route(exchange, key), keys)
    channel.queue_purge(SINK)
    channel.exchange_delete(exchange)
    return {
        "exchange": kind,
        "bindings": len(patterns),
        "messages": len(keys),
        "us_per_publish": per_message * 1e6,
        "bind_seconds": bind_seconds,
        "queued": in_queue,
        "xroute_delivered": expected,
        "agrees": in_queue == expected,
        "xroute_us_per_route": xroute * 1e6,
    }


def run(context: Context) -> dict[str, Any]:
    """Start a private broker (or use the context's), measure, stop it; return the result."""
    from xroute.bench.rabbitmq import rabbitmq_broker

    p = PARAMETERS[context.scale]
    progress = context.progress
    progress.step("starting a private RabbitMQ")
    if context.amqp_url is not None:
        return _run(context.amqp_url, p, progress)
    with rabbitmq_broker(private=True) as started:
        return _run(started, p, progress)


def _run(url: str, p: dict[str, Any], progress: Progress) -> dict[str, Any]:
    connection = connect(url)
    try:
        version = connection.server_properties.get("version")
        version = version.decode() if isinstance(version, bytes) else version
        channel = connection.channel()
        channel.queue_declare(SINK, durable=False, exclusive=True, auto_delete=False)
        progress.step("floor: direct exchange, one binding")
        floor_patterns, floor_keys = _workload("direct", 1, p["messages"])
        floor = _measure(channel, "direct", floor_patterns, floor_keys)
        rows = []
        for kind in ("direct", "topic"):
            for size in p["sizes"]:
                progress.step(f"{kind}, {size:,} bindings: binding and publishing")
                patterns, keys = _workload(kind, size, p["messages"])
                row = _measure(channel, kind, patterns, keys)
                row["routing_us_estimate"] = max(
                    row["us_per_publish"] - floor["us_per_publish"], 0.0
                )
                rows.append(row)
    finally:
        connection.close()
    return {
        "setup": {
            "broker": f"RabbitMQ {version}, a private node on 127.0.0.1, started and stopped "
            "by the harness",
            "client": "py-amqp, one channel, each publish waits for its publisher confirm",
            "messages": f"{p['messages']:,} per configuration, 120-byte body, half the keys "
            "made to match",
            "topology": f"bindings all to one exclusive queue {SINK}; topic: seed mix, "
            "direct: distinct keys",
            "floor": f"direct exchange with one binding: {floor['us_per_publish']:.1f} µs per "
            "confirmed publish",
        },
        "version": version,
        "floor": floor,
        "rows": rows,
        "checks": {"queue counts equal xroute's": all(r["agrees"] for r in rows + [floor])},
        "comparison": _comparison(rows),
        "tables": [_table(rows, floor)],
    }


def _table(rows: list[dict[str, Any]], floor: dict[str, Any]) -> dict:
    return table(
        "RabbitMQ, publish with confirm, against xroute's Topology.route on the same bindings",
        [
            "exchange",
            "bindings",
            "µs per confirmed publish",
            "routing estimate µs",
            "xroute µs per route",
            "queued",
            "xroute delivered",
            "agree",
        ],
        [
            [
                r["exchange"],
                r["bindings"],
                round(r["us_per_publish"], 1),
                round(r.get("routing_us_estimate", 0.0), 1),
                round(r["xroute_us_per_route"], 2),
                r["queued"],
                r["xroute_delivered"],
                "yes" if r["agrees"] else "NO",
            ]
            for r in [floor, *rows]
        ],
        "routing estimate: the publish time minus the one-binding direct floor.",
    )


def _comparison(rows: list[dict[str, Any]]) -> dict:
    def at(kind: str) -> str:
        found = sorted((r for r in rows if r["exchange"] == kind), key=lambda r: r["bindings"])
        return "; ".join(
            f"{r['bindings']:,} bindings: {r['routing_us_estimate']:,.0f} µs "
            f"(xroute {r['xroute_us_per_route']:.1f} µs)"
            for r in found
        )

    return table(
        "The seed beside ours",
        ["measure", "seed", "this run: RabbitMQ routing estimate per message"],
        [
            ["RabbitMQ topic routing", SEED["figures"][0][1], at("topic")],
            ["RabbitMQ direct routing", SEED["figures"][1][1], at("direct")],
        ],
        "routing estimate: µs per confirmed publish minus the one-binding direct floor.",
    )


def plot(result: dict[str, Any], path: str) -> None:
    """µs per message: RabbitMQ's confirmed publish and xroute's route, per exchange and size."""
    from xroute.bench.experiments.figures import figure, save
    from xroute.pipeline.figures import legend_outside

    fig, (ax,) = figure(1, "Experiment 6: a real RabbitMQ against xroute")
    rows = result["rows"]
    labels = [f"{r['exchange']} {r['bindings']:,}" for r in rows]
    positions = range(len(rows))
    ax.bar(
        [i - 0.2 for i in positions],
        [r["us_per_publish"] for r in rows],
        0.4,
        label="RabbitMQ publish + confirm",
    )
    ax.bar(
        [i + 0.2 for i in positions],
        [r["xroute_us_per_route"] for r in rows],
        0.4,
        label="xroute Topology.route",
    )
    ax.axhline(
        result["floor"]["us_per_publish"],
        color="grey",
        linestyle="--",
        label="RabbitMQ floor (1 binding)",
    )
    ax.set_xticks(list(positions), labels)
    ax.set_yscale("log")
    ax.set_ylabel("µs per message (log)")
    legend_outside(ax)
    save(fig, path)
