"""Experiment 4, seed 000's MongooseIM case: the same traffic through a topic exchange with
20,000 ``user_N.*`` bindings and through a direct exchange with 40,000 ``user_N.chat_msg_sent``
/ ``user_N.chat_msg_recv`` bindings. Cost per message through `Topology.route`.

The article quotes topic keys ``user_N.{sent,received}`` and direct binding keys
``user_N.chat_msg_{sent,recv}``; a direct exchange routes only equal keys, so the direct run
publishes ``user_N.chat_msg_{sent,recv}``. Both reach the same one queue per user, which is
checked before timing.
"""

from __future__ import annotations

import random
from typing import Any

from xroute.bench.experiments.common import (
    Context,
    check_same,
    seconds_of,
    seconds_per_item,
    table,
)
from xroute.bench.experiments.peers import peer_rows
from xroute.core.topology import Topology
from xroute.engines import DEFAULT_ENGINE, ENGINES

NUMBER = 4
KEY = "topic_direct"
TITLE = "Topic versus direct at scale: the MongooseIM case"
SEED = {
    "source": "000/003, Rabbit's Anatomy, section 'Real world example' (MongooseIM)",
    "setup": (
        "90k XMPP users, 10k AMQP consumers, about 4,800 payloads/s of about 120 B from "
        "MongooseIM to RabbitMQ. Run 1: topic exchange, binding keys like user_N.*, 20k "
        "bindings, routing keys <user>.{sent,received}. Run 2: direct exchange, binding keys "
        "user_N.chat_msg_sent and user_N.chat_msg_recv, 40k bindings. Measure: time to "
        "delivery (95th-99th percentile and maximum)."
    ),
    "figures": [
        ["topic, 20k bindings", "higher time to delivery (graph; no numbers in the text)"],
        [
            "direct, 40k bindings",
            "lower: 'significant difference in favour of the direct exchange'",
        ],
    ],
}
USERS, RNG_SEED = 20_000, 4000
DIRECT_KEYS = {"sent": "chat_msg_sent", "received": "chat_msg_recv"}

PARAMETERS: dict[str, dict[str, Any]] = {
    "full": {
        "users": USERS,
        "messages": 200_000,
        "check": 20_000,
        "reference_check": 200,
        "peer_keys": 300,
    },
    "quick": {
        "users": USERS,
        "messages": 20_000,
        "check": 2_000,
        "reference_check": 30,
        "peer_keys": 60,
    },
    "tiny": {"users": 500, "messages": 1_000, "check": 200, "reference_check": 10, "peer_keys": 10},
}


def _engines() -> list[str]:
    return [name for name in sorted(ENGINES) if name != "reference"]


def steps(scale: str) -> int:
    """How many progress steps `run` reports at this scale."""
    return 2 + len(_engines()) + 1


def topic_topology(users: int, engine: str) -> Topology:
    """One queue per user, bound to a topic exchange by ``user_N.*``."""
    topology = Topology(engine=engine)
    topology.declare_exchange("events", "topic")
    for n in range(users):
        topology.declare_queue(f"q.user_{n}")
        topology.bind("events", f"q.user_{n}", f"user_{n}.*")
    return topology


def direct_topology(users: int) -> Topology:
    """The same queues bound to a direct exchange by both of a user's event keys."""
    topology = Topology()
    topology.declare_exchange("events", "direct")
    for n in range(users):
        topology.declare_queue(f"q.user_{n}")
        for suffix in DIRECT_KEYS.values():
            topology.bind("events", f"q.user_{n}", f"user_{n}.{suffix}")
    return topology


def run(context: Context) -> dict[str, Any]:
    """Measure; return the experiment's result (JSON values only)."""
    p = PARAMETERS[context.scale]
    progress = context.progress
    rng = random.Random(RNG_SEED)
    events = [
        (rng.randrange(p["users"]), rng.choice(("sent", "received"))) for _ in range(p["messages"])
    ]
    topic_keys = [f"user_{n}.{kind}" for n, kind in events]
    direct_keys = [f"user_{n}.{DIRECT_KEYS[kind]}" for n, kind in events]
    expected = [frozenset({f"q.user_{n}"}) for n, _ in events]
    check = p["check"]

    progress.step(f"direct exchange, {2 * p['users']:,} bindings")
    build, direct = seconds_of(lambda: direct_topology(p["users"]))
    check_same(
        "direct exchange",
        direct_keys[:check],
        expected[:check],
        [direct.route("events", k) for k in direct_keys[:check]],
    )
    rows = [
        {
            "name": "direct",
            "exchange": "direct",
            "bindings": 2 * p["users"],
            "build_seconds": build,
            "us_per_message": seconds_per_item(lambda k: direct.route("events", k), direct_keys)
            * 1e6,
        }
    ]

    progress.step("topic exchange, reference engine answers")
    reference = topic_topology(p["users"], "reference")
    few = topic_keys[: p["reference_check"]]
    check_same(
        "topic exchange, reference engine",
        few,
        expected[: len(few)],
        [reference.route("events", k) for k in few],
    )
    for engine in _engines():
        progress.step(f"topic exchange, {engine} engine")
        build, topic = seconds_of(lambda: topic_topology(p["users"], engine))
        check_same(
            f"topic exchange, {engine} engine",
            topic_keys[:check],
            expected[:check],
            [topic.route("events", k) for k in topic_keys[:check]],
        )
        rows.append(
            {
                "name": f"topic ({engine})",
                "exchange": "topic",
                "bindings": p["users"],
                "build_seconds": build,
                "us_per_message": seconds_per_item(lambda k: topic.route("events", k), topic_keys)
                * 1e6,
            }
        )

    progress.step("peers")
    bound = [(f"user_{n}.*", f"q.user_{n}") for n in range(p["users"])]
    peer_keys = topic_keys[: p["peer_keys"]]
    for peer in peer_rows(bound, peer_keys, expected[: len(peer_keys)]):
        rows.append(
            {
                "name": f"topic: {peer['peer']}",
                "exchange": "topic (peer)",
                "bindings": peer["bindings"],
                "build_seconds": None,
                "us_per_message": peer["us_per_route"],
                "wrong": peer["wrong"],
                "wrong_of": peer["keys"],
            }
        )
    direct_bound = [
        (f"user_{n}.{s}", f"q.user_{n}") for n in range(p["users"]) for s in DIRECT_KEYS.values()
    ]
    for peer in peer_rows(
        direct_bound, direct_keys[: p["peer_keys"]], expected[: p["peer_keys"]], kind="direct"
    ):
        rows.append(
            {
                "name": f"direct: {peer['peer']}",
                "exchange": "direct (peer)",
                "bindings": peer["bindings"],
                "build_seconds": None,
                "us_per_message": peer["us_per_route"],
                "wrong": peer["wrong"],
                "wrong_of": peer["keys"],
            }
        )

    direct_us = rows[0]["us_per_message"]
    for row in rows:
        row["times_direct"] = (
            round(row["us_per_message"] / direct_us, 2) if row["us_per_message"] else None
        )
    return {
        "setup": {
            "users": f"{p['users']:,}, one queue each",
            "topic": f"{p['users']:,} bindings user_N.*, keys user_N.sent / user_N.received",
            "direct": f"{2 * p['users']:,} bindings user_N.chat_msg_sent / user_N.chat_msg_recv, "
            "keys equal to them",
            "messages": f"{p['messages']:,}, user and event drawn uniformly",
            "timed call": "Topology.route(exchange, key) per message (validation included)",
            "checked": f"both exchanges deliver each of the first {check:,} messages to exactly "
            f"the user's queue; the reference engine agrees on {len(few)}",
        },
        "scaling": [] if p["users"] == USERS else [f"{p['users']:,} users instead of {USERS:,}."],
        "rows": rows,
        "checks": {"messages checked": check},
        "comparison": _comparison(rows),
        "tables": [_table(rows)],
    }


def _table(rows: list[dict[str, Any]]) -> dict:
    return table(
        "Cost per message through Topology.route",
        ["exchange / matcher", "bindings", "µs per message", "× direct", "build s", "wrong routes"],
        [
            [
                r["name"],
                r["bindings"],
                r["us_per_message"],
                r["times_direct"],
                r["build_seconds"],
                f"{r['wrong']} of {r['wrong_of']}" if "wrong" in r else 0,
            ]
            for r in rows
        ],
    )


def _comparison(rows: list[dict[str, Any]]) -> dict:
    direct = rows[0]
    default = next(r for r in rows if r["name"] == f"topic ({DEFAULT_ENGINE})")
    topics = [r for r in rows if r["exchange"] == "topic"]
    best = min(topics, key=lambda r: r["us_per_message"])
    return table(
        "The seed beside ours",
        [
            "measure",
            "seed (RabbitMQ, time to delivery under load)",
            "xroute (this run, routing only)",
        ],
        [
            [
                "direct, 40k bindings",
                SEED["figures"][1][1],
                f"{direct['us_per_message']:.2f} µs per message",
            ],
            [
                "topic, 20k bindings",
                SEED["figures"][0][1],
                (
                    f"{default['us_per_message']:.2f} µs ({default['name']}), best "
                    f"{best['us_per_message']:.2f} µs ({best['name']})"
                ),
            ],
            [
                "topic / direct",
                "direct clearly better",
                f"{default['times_direct']} ({default['name']}), "
                f"{best['times_direct']} ({best['name']})",
            ],
        ],
    )


def plot(result: dict[str, Any], path: str) -> None:
    """µs per message for the direct exchange, the topic exchange per engine, and the peers."""
    from xroute.bench.experiments.figures import figure, marked_barh, save

    fig, (ax,) = figure(1, "Experiment 4: topic vs direct at scale (seed 000, MongooseIM)")
    rows = [r for r in result["rows"] if r["us_per_message"]]
    colours = {"direct": "tab:green", "topic": "tab:blue"}
    marked_barh(
        ax, rows, [r["us_per_message"] for r in rows],
        [colours.get(r["exchange"], "tab:orange") for r in rows],
        kinds={"direct exchange": "tab:green", "topic exchange": "tab:blue",
               "peers": "tab:orange"},
    )
    ax.set_xscale("log")
    ax.set_xlabel("µs per message (log)")
    ax.invert_yaxis()
    save(fig, path)
