"""Experiment 5, seed 004 ("Achieving Multiple Routing Keys in RabbitMQ Exchanges"): deliver one
message to k of n clients, four ways.

- topic: each client's queue bound by ``#.<client>.#``; the key lists the k clients;
- headers: each client's queue bound with the one argument ``<client> = 1``; the message
  carries one header per client;
- x-delimiter: each queue bound by ``<client>``; the key is ``:c1:c2:...``;
- CC: a direct exchange, each queue bound by ``<client>``; the key is the first client and the
  ``CC`` header lists the rest.

Every method must deliver every message to exactly the same k queues: checked on every
message before anything is timed.
"""

from __future__ import annotations

import random
from typing import Any

from xroute.bench.experiments.common import (
    Context,
    check_same,
    quiet_gc,
    seconds_per_item,
    table,
)
from xroute.bench.experiments.peers import peer_rows
from xroute.core.topology import Topology
from xroute.engines import DEFAULT_ENGINE, ENGINES

NUMBER = 5
KEY = "multikey"
TITLE = "Several routing keys per message: topic, headers, x-delimiter and CC"
SEED = {
    "source": "004, Achieving Multiple Routing Keys in RabbitMQ Exchanges (x-delimiter exchange)",
    "setup": (
        "Route one message to any number of clients chosen by the publisher. Topic with "
        "`#.<client>.#` bindings: 'extremely expensive', too slow in rabbitmq-perf-test. "
        "Headers with one header per client: works, 'performance is again an issue'. The "
        "x-delimiter plugin (first character of the key is the delimiter, each piece routed "
        "as direct): throughput 'basically indistinguishable' from direct. rabbitmq-perf-test, "
        "producers x consumers; the delimiter runs used two keys per message."
    ),
    "figures": [
        ["direct 1x1 / 1x4 / 1x8, send msg/s", "30,233 / 12,936 / 4,146"],
        ["x-delimiter 1x1 / 1x4 / 1x8, send msg/s", "31,285 / 13,329 / 5,141"],
        ["x-delimiter / direct, 1x1", "1.03"],
        ["topic #.<client>.#, headers", "too slow to be viable (no numbers)"],
    ],
}
METHODS = ("topic", "headers", "x-delimiter", "CC")
RNG_SEED = 5000

PARAMETERS: dict[str, dict[str, Any]] = {
    "full": {"clients": (1_000, 10_000), "k": (1, 2, 8), "messages": 5_000, "peer_keys": 200},
    "quick": {"clients": (1_000, 10_000), "k": (1, 2, 8), "messages": 500, "peer_keys": 40},
    "tiny": {"clients": (100, 300), "k": (1, 2, 8), "messages": 40, "peer_keys": 8},
}


def _engines() -> list[str]:
    return [name for name in sorted(ENGINES) if name != "reference"]


def steps(scale: str) -> int:
    """How many progress steps `run` reports at this scale."""
    p = PARAMETERS[scale]
    return len(p["clients"]) * (len(_engines()) + len(p["k"]))


def client_topology(clients: int, engine: str) -> Topology:
    """One queue per client, bound four ways: topic, headers, x-delimiter and direct (for CC)."""
    topology = Topology(engine=engine)
    for name, kind in (
        ("topic", "topic"),
        ("headers", "headers"),
        ("x-delimiter", "x-delimiter"),
        ("CC", "direct"),
    ):
        topology.declare_exchange(f"mk.{name}", kind)
    for n in range(clients):
        client = f"c{n}"
        topology.declare_queue(client)
        topology.bind("mk.topic", client, f"#.{client}.#")
        topology.bind("mk.headers", client, "", {client: 1})
        topology.bind("mk.x-delimiter", client, client)
        topology.bind("mk.CC", client, client)
    return topology


def message(method: str, chosen: list[str]) -> tuple[str, dict[str, Any] | None]:
    """(routing key, headers) that send one message to the ``chosen`` clients by ``method``."""
    if method == "topic":
        return ".".join(chosen), None
    if method == "headers":
        return "", {client: 1 for client in chosen}
    if method == "x-delimiter":
        return ":" + ":".join(chosen), None
    return chosen[0], ({"CC": chosen[1:]} if len(chosen) > 1 else None)


def run(context: Context) -> dict[str, Any]:
    """Measure; return the experiment's result (JSON values only)."""
    p = PARAMETERS[context.scale]
    progress = context.progress
    rng = random.Random(RNG_SEED)
    rows: list[dict[str, Any]] = []
    checked = 0
    for clients in p["clients"]:
        picks = {
            k: [[f"c{i}" for i in rng.sample(range(clients), k)] for _ in range(p["messages"])]
            for k in p["k"]
        }
        topologies = {}
        for engine in _engines():
            progress.step(f"{clients:,} clients: building and checking ({engine} engine)")
            topology = topologies[engine] = client_topology(clients, engine)
            for k, chosen in picks.items():
                expected = [frozenset(c) for c in chosen]
                for method in METHODS:
                    sent = [message(method, c) for c in chosen]
                    got = [topology.route(f"mk.{method}", key, headers) for key, headers in sent]
                    checked += check_same(
                        f"{method}, {clients} clients, k={k}, {engine}", sent, expected, got
                    )
        for k, chosen in picks.items():
            progress.step(f"{clients:,} clients, k = {k}: timing")
            with quiet_gc():  # one collection for all the methods of this k
                for method in METHODS:
                    sent = [message(method, c) for c in chosen]
                    engines = _engines() if method == "topic" else [DEFAULT_ENGINE]
                    for engine in engines:
                        topology, exchange = topologies[engine], f"mk.{method}"
                        seconds = seconds_per_item(
                            lambda m: topology.route(exchange, m[0], m[1]), sent
                        )
                        rows.append(
                            {
                                "clients": clients,
                                "k": k,
                                "method": method,
                                "name": f"topic ({engine})" if method == "topic" else method,
                                "kind": "xroute",
                                "us_per_message": seconds * 1e6,
                            }
                        )
            bound = [(f"#.c{n}.#", f"c{n}") for n in range(clients)]
            keys = [".".join(c) for c in chosen[: p["peer_keys"]]]
            truth = [frozenset(c) for c in chosen[: p["peer_keys"]]]
            for peer in peer_rows(bound, keys, truth):
                rows.append(
                    {
                        "clients": clients,
                        "k": k,
                        "method": "topic",
                        "name": f"topic: {peer['peer']}",
                        "kind": "peer",
                        "us_per_message": peer["us_per_route"],
                        "wrong": peer["wrong"],
                        "wrong_of": peer["keys"],
                        "bindings": peer["bindings"],
                    }
                )
    return {
        "setup": {
            "clients": ", ".join(f"{n:,}" for n in p["clients"]) + " (one queue each)",
            "k": ", ".join(map(str, p["k"])) + " clients per message, drawn at random",
            "messages": f"{p['messages']:,} per (clients, k)",
            "bindings": "per client: topic #.<c>.#, headers {<c>: 1} (x-match all), "
            "x-delimiter <c>, direct <c> (CC)",
            "timed call": "Topology.route(exchange, key, headers) per message "
            "(validation included)",
            "checked": f"all four methods, every engine: {checked:,} routes equal to the "
            "chosen clients",
        },
        "rows": rows,
        "checks": {"routes checked": checked},
        "comparison": _comparison(rows),
        "tables": [_table(rows, p)],
    }


def _table(rows: list[dict[str, Any]], p: dict[str, Any]) -> dict:
    columns = [(n, k) for n in p["clients"] for k in p["k"]]
    names = list(dict.fromkeys(r["name"] for r in rows))
    cell = {(r["name"], r["clients"], r["k"]): r for r in rows}

    def show(name: str, n: int, k: int) -> Any:
        r = cell.get((name, n, k))
        if r is None or r["us_per_message"] is None:
            return None
        value = r["us_per_message"]
        if not r.get("wrong"):
            return value
        shown = f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
        return f"{shown} ({r['wrong']} wrong)"

    return table(
        "µs per message, by method (rows) and clients n / clients per message k (columns)",
        ["method", *[f"n={n:,} k={k}" for n, k in columns]],
        [[name, *[show(name, n, k) for n, k in columns]] for name in names],
        "Peers route the topic keys against #.<client>.# bindings; '(w wrong)' counts routes "
        "that differ from the chosen clients.",
    )


def _comparison(rows: list[dict[str, Any]]) -> dict:
    def at(name: str, k: int) -> float | None:
        found = [r["us_per_message"] for r in rows if r["name"] == name and r["k"] == k]
        return found[-1] if found else None  # the largest n

    topic = f"topic ({DEFAULT_ENGINE})"
    delimiter, cc, headers, topic_us = (
        at("x-delimiter", 1),
        at("CC", 1),
        at("headers", 8),
        at(topic, 8),
    )
    return table(
        "The seed beside ours",
        ["measure", "seed (RabbitMQ perf-test)", "xroute (this run, largest n)"],
        [
            [
                "x-delimiter / direct (CC method with one key), k=1",
                "1.03 (throughput ratio, 1x1)",
                f"{delimiter / cc:.2f} (cost ratio, k=1)" if delimiter and cc else None,
            ],
            [
                "topic #.<c>.#, 8 keys",
                "too slow to be viable",
                f"{topic_us:.2f} µs ({topic})" if topic_us else None,
            ],
            [
                "headers, 8 keys",
                "performance is an issue",
                f"{headers:.2f} µs" if headers else None,
            ],
            [
                "x-delimiter, 8 keys",
                "fast as direct",
                f"{at('x-delimiter', 8):.2f} µs" if at("x-delimiter", 8) else None,
            ],
        ],
    )


def plot(result: dict[str, Any], path: str) -> None:
    """Per client count, µs per message against k for each method (log scale)."""
    from xroute.bench.experiments.figures import figure, save, wrong_of
    from xroute.pipeline.figures import figure_legend, series_style, wrong_label

    sizes = sorted({r["clients"] for r in result["rows"]})
    fig, axes = figure(len(sizes), "Experiment 5: several routing keys per message (seed 004)")
    names = list(dict.fromkeys(r["name"] for r in result["rows"]))
    for ax, clients in zip(axes, sizes):
        for index, name in enumerate(names):
            rows = [r for r in result["rows"]
                    if r["name"] == name and r["clients"] == clients and r["us_per_message"]]
            if not rows:
                continue
            points = sorted((r["k"], r["us_per_message"]) for r in rows)
            wrong = sum(wrong_of(r)[0] for r in rows), sum(wrong_of(r)[1] for r in rows)
            style = dict(series_style(index), linestyle="--" if name.startswith("topic:") else "-")
            if wrong[0]:  # wrong answers: drawn faint and dotted, and said in the label
                style.update(linestyle=":", alpha=0.5)
            ax.plot(*zip(*points), label=wrong_label(name, *wrong), **style)
        ax.set_yscale("log")
        ax.set_xlabel("clients per message (k)")
        ax.set_ylabel("µs per message (log)")
        ax.set_title(f"{clients:,} clients")
    figure_legend(fig, axes)
    save(fig, path)
