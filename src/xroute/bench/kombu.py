"""``xroute bench kombu``: publishing through kombu's memory and Redis transports with kombu's
own topic exchange and with xroute's (`xroute.kombu`), on the seed workload.

For each transport and binding count, the bindings are declared once through kombu (the rows
are the same for both: xroute keeps kombu's ``prepare_bind``), then each side publishes the
same keys through a `kombu.Producer` for a bounded time. The exchange type's ``lookup`` and the
channel's ``get_table`` are timed from outside (wrapped on the channel's instances), so a run
reports messages/s, the share of the publish time spent routing and reading the table, and
wrong routes: every message's queues from ``lookup`` against `Topology.route`.
"""

from __future__ import annotations

import os
import platform
import random
import statistics
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from xroute.bench.experiments.machine import cpu_model, load_average, machine_note
from xroute.bench.workload import random_word, seed_patterns
from xroute.core.keys import HASH, STAR
from xroute.core.topology import Topology

DEFAULT_SIZES = (100, 1_000, 10_000)
TRANSPORTS = ("memory", "redis")
MODES = ("kombu", "xroute")
ROUNDS = 6  # each side publishes in this many turns, alternating with the other


@dataclass
class Settings:
    """What one ``xroute bench kombu`` run measures."""

    sizes: list[int] = field(default_factory=lambda: list(DEFAULT_SIZES))
    transports: list[str] = field(default_factory=lambda: list(TRANSPORTS))
    queues: int = 10  # bindings spread over this many queues (sets the fan-out)
    keys: int = 500  # distinct routing keys, cycled through (traffic repeats its keys)
    max_messages: int = 3_000  # per side, transport and size ...
    max_seconds: float = 6.0  # ... or until this much time has passed
    seed: int = 0


class CheckFailed(AssertionError):
    """xroute's side routed a message differently from `Topology.route` (a bug, not a result)."""


def amqp_keys(patterns: list[str], count: int, seed: int) -> list[str]:
    """Routing keys made from binding keys: each ``*`` becomes a word and each ``#`` zero, one
    or two words (the seed workload's keys give ``#`` one word only, where kombu's ``.*?``
    happens to agree with AMQP; ``a.#`` receiving ``a`` is what ``#`` is for)."""
    rng = random.Random(seed)
    keys = []
    for _ in range(count):
        words: list[str] = []
        for word in rng.choice(patterns).split("."):
            if word == STAR:
                words.append(random_word(rng))
            elif word == HASH:
                words.extend(random_word(rng) for _ in range(rng.randint(0, 2)))
            else:
                words.append(word)
        keys.append(".".join(words))
    return keys



class _Timed:
    """Wraps one bound method on an instance: total seconds spent in it, and its results."""

    def __init__(self, owner: Any, name: str, keep: bool) -> None:
        self.inner = getattr(owner, name)
        self.seconds = 0.0
        self.results: list[Any] = []
        self.keep = keep
        setattr(owner, name, self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        result = self.inner(*args, **kwargs)
        self.seconds += time.perf_counter() - began
        if self.keep:
            self.results.append(result)
        return result


def _connection(transport: str, mode: str, redis_url: str | None, prefix: str) -> Any:
    from kombu import Connection

    import xroute.kombu

    url = "memory://" if transport == "memory" else redis_url
    options = {"global_keyprefix": prefix} if transport == "redis" else {}
    kind = xroute.kombu.transport_class(transport) if mode == "xroute" else None
    return Connection(url, transport=kind, transport_options=options)


class _Side:
    """One side (kombu's routing or xroute's) of one transport and size: its own connection,
    channel and Producer, with ``lookup`` and ``get_table`` timed."""

    def __init__(self, transport: str, mode: str, redis_url: str | None, prefix: str,
                 exchange_name: str) -> None:
        from kombu import Exchange, Producer

        self.transport, self.mode = transport, mode
        self.connection = _connection(transport, mode, redis_url, prefix)
        self.channel = self.connection.channel()
        exchange = Exchange(exchange_name, type="topic", durable=False, channel=self.channel)
        exchange.declare()  # the exchange's type lives in each connection's own state
        if mode == "xroute":
            # xroute's channel routes through its broker; ``routing`` reads the state (on Redis
            # the version counter and the exchange's set) inside ``route``.
            self.lookup = _Timed(self.channel, "route", keep=True)
            self.table = _Timed(self.channel.broker, "routing", keep=False)
        else:
            self.lookup = _Timed(self.channel.typeof(exchange_name), "lookup", keep=True)
            self.table = _Timed(self.channel, "get_table", keep=False)
        self.producer = Producer(self.channel, exchange=exchange, serializer="json")
        self.sent = 0
        self.seconds = 0.0
        self.first_ms = 0.0

    def first(self, key: str) -> None:
        """The first publish, timed apart: it builds xroute's topology (kombu compiles its
        regexes one by one as the scan meets them)."""
        began = time.perf_counter()
        self.producer.publish({"n": -1}, routing_key=key)
        self.first_ms = (time.perf_counter() - began) * 1e3
        self.lookup.seconds = self.table.seconds = 0.0
        self.lookup.results.clear()

    def publish(self, keys: list[str], count: int, seconds: float) -> None:
        """Publish up to ``count`` messages for at most ``seconds``, continuing the key cycle."""
        deadline = time.perf_counter() + seconds
        publish, sent, stop = self.producer.publish, self.sent, self.sent + count
        began = time.perf_counter()
        while sent < stop and time.perf_counter() < deadline:
            # hot loop of `xroute bench kombu`: one Producer.publish per message
            publish({"n": sent}, routing_key=keys[sent % len(keys)])
            sent += 1
        self.seconds += time.perf_counter() - began
        self.sent = sent

    def result(self, oracle: list[frozenset[str]]) -> dict[str, Any]:
        """The side's figures; its routes checked against ``oracle`` (one set per key)."""
        sent, seconds = self.sent, self.seconds
        routing = self.lookup.seconds
        if self.mode == "xroute":
            routing -= self.table.seconds  # timed inside the route: count it once, as reading
        wrong = sum(
            frozenset(got) != oracle[n % len(oracle)] for n, got in enumerate(self.lookup.results)
        )
        return {
            "transport": self.transport,
            "mode": self.mode,
            "messages": sent,
            "seconds": round(seconds, 3),
            "messages_per_s": round(sent / seconds, 1),
            "publish_us": round(seconds / sent * 1e6, 1),
            "routing_share": round(routing / seconds, 3),
            "table_share": round(self.table.seconds / seconds, 3),
            "routing_us": round(routing / sent * 1e6, 1),
            "table_us": round(self.table.seconds / sent * 1e6, 1),
            "first_publish_ms": round(self.first_ms, 2),
            "wrong_routes": wrong,
            "checked": len(self.lookup.results),
        }

    def close(self, queues: list[str]) -> None:
        """Empty the queues this side filled, and close."""
        for queue in queues:
            self.channel.queue_purge(queue)
        self.connection.close()


def _declare(transport: str, mode: str, redis_url: str | None, prefix: str, name: str,
             patterns: list[str], queues: int) -> None:
    from kombu import Exchange, Queue

    # Each side declares through its own channels: xroute's keep RabbitMQ's broker state.
    with _connection(transport, mode, redis_url, prefix) as connection:
        channel = connection.channel()
        exchange = Exchange(name, type="topic", durable=False, channel=channel)
        exchange.declare()
        for number in range(queues):
            Queue(f"{name}-q{number}", durable=False, channel=channel).declare()
        for index, pattern in enumerate(patterns):
            channel.queue_bind(f"{name}-q{index % queues}", name, pattern)


def run(
    settings: Settings, report: Callable[[str], None], redis_url: str | None, command: str
) -> dict[str, Any]:
    """Measure every transport, size and side; the results as a JSON-ready dict."""
    import kombu

    results: dict[str, Any] = {
        "meta": {
            "command": command,
            "settings": asdict(settings),
            "python": sys.version.split()[0],
            "kombu": kombu.__version__,
            "machine": platform.machine(),
            "processor": cpu_model(),
            "cpus": os.cpu_count(),
            "load_before": load_average(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "redis": redis_url,
            "note": f"measured on {machine_note()} at the start: figures compare sides of "
            "the same run, not machines",
        },
        "runs": [],
    }
    prefix = f"xroute-bench-kombu-{uuid.uuid4().hex[:8]}:"
    try:
        for size in settings.sizes:
            patterns = seed_patterns(size, seed=settings.seed)
            keys = amqp_keys(patterns, settings.keys, seed=settings.seed + 1)
            topology = Topology()
            topology.declare_exchange("x", "topic")
            for number in range(settings.queues):
                topology.declare_queue(f"q{number}")
            for index, pattern in enumerate(patterns):
                topology.bind("x", f"q{index % settings.queues}", pattern)
            for transport in settings.transports:
                name = f"bench-{transport}-{size}-{uuid.uuid4().hex[:6]}"
                oracle = [
                    frozenset(f"{name}-{q}" for q in topology.route("x", key)) for key in keys
                ]
                fan_out = statistics.mean(len(o) for o in oracle)
                began = time.perf_counter()
                for mode in MODES:
                    _declare(transport, mode, redis_url, prefix, name, patterns, settings.queues)
                report(f"{transport}: {size:,} bindings declared in "
                       f"{time.perf_counter() - began:.1f} s; mean fan-out {fan_out:.2f} queues")
                sides = [_Side(transport, mode, redis_url, prefix, name) for mode in MODES]
                queue_names = [f"{name}-q{n}" for n in range(settings.queues)]
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # kombu warns on unroutable messages
                        for side in sides:
                            side.first(keys[-1])
                        # Rounds, the sides taking turns: load from other jobs on this shared
                        # machine then falls on both alike.
                        for _ in range(ROUNDS):
                            for side in sides:
                                side.publish(keys, settings.max_messages // ROUNDS,
                                             settings.max_seconds / ROUNDS)
                finally:
                    for side in sides:
                        side.close(queue_names)
                for side in sides:
                    entry = side.result(oracle)
                    entry.update(bindings=size, mean_fan_out=round(fan_out, 2))
                    if side.mode == "xroute" and entry["wrong_routes"]:
                        raise CheckFailed(
                            f"xroute routed {entry['wrong_routes']} of {entry['checked']} "
                            f"messages differently from Topology.route ({transport}, {size})"
                        )
                    results["runs"].append(entry)
                    report(
                        f"{transport:<6} {size:>6,} {side.mode:<6} "
                        f"{entry['messages_per_s']:>9,.0f} msg/s"
                        f"  routing {entry['routing_share']:.0%}  table {entry['table_share']:.0%}"
                        f"  wrong {entry['wrong_routes']}/{entry['checked']}"
                    )
    finally:
        delete_redis_keys(redis_url, prefix)
    results["ratios"] = ratios(results["runs"])
    results["meta"]["load_after"] = load_average()
    return results


def ratios(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """xroute's messages/s over kombu's, per transport and binding count (same run)."""
    by = {(r["transport"], r["bindings"], r["mode"]): r["messages_per_s"] for r in runs}
    out: dict[str, dict[str, float]] = {}
    for (transport, size, mode), rate in by.items():
        kombu_rate = by.get((transport, size, "kombu"))
        if mode == "xroute" and kombu_rate:
            out.setdefault(transport, {})[str(size)] = round(rate / kombu_rate, 2)
    return out


def delete_redis_keys(redis_url: str | None, prefix: str) -> None:
    """Remove every Redis key under ``prefix`` (a run's own: others share this Redis)."""
    if not redis_url:
        return
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        stale = list(client.scan_iter(match=f"{prefix}*"))
        if stale:
            client.delete(*stale)
    finally:
        client.close()


__all__ = [
    "CheckFailed", "DEFAULT_SIZES", "Settings", "amqp_keys", "delete_redis_keys", "ratios", "run",
]
