"""Topic workloads that real brokers benchmark, rebuilt from each one's own recipe (issue 20).

Each generator returns a `Shape`: bindings (pattern, queue), keys a route sees for the first
time, a stream of keys that repeat, and the anchor's published figure. docs/benchmarks.md
says where each recipe comes from:

- ``unicast``: RabbitMQ 4.3's topic benchmark (PR #15619): 10k queues, each bound to
  ``devices.dev{i}.cmd`` and to ``broadcast.#``; keys ``devices.dev{N}.cmd`` (one queue each).
- ``broadcast``: the same bindings, keys ``broadcast.{x}``: every one of the 10k queues.
- ``nats``: nats-server's sublist benchmark (``sublist_test.go``): every subject of 1 to 5
  tokens over 8 words (37,448), plus ``cloud.>``, ``cloud.continuum.component.>`` and
  ``cloud.*.*.router.*`` (NATS's ``>`` is AMQP's ``#`` here).
- ``emqx``: EMQX's ``emqx_broker_bench:run1/0`` (80 subscribers x 1,000 subscriptions to
  ``device/{{id}}/+/{{num}}/#``, publishes to ``device/{{id}}/foo/{{num}}/bar/1/2/3/4/5``),
  ``/`` written as ``.``: 80k bindings, keys of 10 words, one route each.
- ``fanout``: RabbitMQ 4.3's large fan-out: 10k queues bound to one key.
- ``literal``: 100k literal bindings (a direct-like topic exchange: a device, user or tenant
  each), keys of 3 words, 1 in 10 unbound.
- ``seed-10k`` and ``seed-100k``: the seed articles' mix (`xroute.bench.workload`), 5-word keys.
- ``mqtt`` (`SCALED_SHAPES`): 1M MQTT-style subscriptions, keys of 4-6 words, Zipf-skewed;
  ``mqtt-10k``: the same recipe at 10k, at any scale (what ``mqtt`` is compared with).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from xroute.bench.workload import seed_keys, seed_patterns

NATS_TOKENS = ("apcera", "continuum", "component", "router", "api", "imgr", "jmgr", "auth")
NATS_WILDCARDS = ("cloud.#", "cloud.continuum.component.#", "cloud.*.*.router.*")


@dataclass
class Shape:
    """One workload: what is bound, what is routed, and what the anchor published."""

    name: str
    anchor: str  # whose benchmark, and its figure
    bindings: list[tuple[str, str]]  # (pattern, queue)
    first_keys: list[str]  # distinct keys, in the order a route first sees them
    repeat_keys: list[str]  # a stream drawn from a small set of distinct keys
    fanout: bool = False  # thousands of queues a key: timed per route, not per second
    notes: list[str] = field(default_factory=list)
    # More distinct keys for first routes timed one by one, where batches of every key would
    # be too large to keep (a broadcast's 10k queue ids a key): empty when `first_keys` serve.
    single_keys: list[str] = field(default_factory=list)

    @property
    def queues(self) -> list[str]:
        """Every queue named by a binding, once, in order."""
        return list(dict.fromkeys(queue for _, queue in self.bindings))


def _stream(rng: random.Random, distinct: list[str], count: int) -> list[str]:
    return [rng.choice(distinct) for _ in range(count)]


def unicast(queues: int = 10_000, keys: int = 10_000, seed: int = 0) -> Shape:
    """RabbitMQ 4.3 PR #15619, unicast: ``devices.dev{i}.cmd`` and ``broadcast.#`` per queue."""
    rng = random.Random(seed)
    bindings = [(f"devices.dev{i}.cmd", f"q{i}") for i in range(queues)]
    bindings += [("broadcast.#", f"q{i}") for i in range(queues)]
    order = list(range(queues))
    rng.shuffle(order)
    first = [f"devices.dev{i}.cmd" for i in order[:keys]]
    return Shape("unicast", "RabbitMQ 4.3: 460k routes/s, 2.2 µs a route", bindings, first,
                 _stream(rng, first[:1_000], keys))


def broadcast(queues: int = 10_000, keys: int = 300, seed: int = 0,
              single_keys: int = 20_000) -> Shape:
    """The unicast bindings, keys ``broadcast.{x}``: every queue gets each message. Batches
    take ``keys`` of them; first routes one by one ``single_keys`` (the issue's 20k)."""
    shape = unicast(queues, 1, seed)
    first = [f"broadcast.k{i}" for i in range(keys)]
    return Shape("broadcast", "RabbitMQ 4.3: 0.6 ms a 10k-queue route", shape.bindings, first,
                 _stream(random.Random(seed), first[:20], 3_000), fanout=True,
                 single_keys=[f"broadcast.k{i}" for i in range(single_keys)])


def nats_subjects(tokens: tuple[str, ...] = NATS_TOKENS, depth: int = 5) -> list[str]:
    """Every subject of 1 to ``depth`` tokens over ``tokens``, in sublist_test.go's order."""
    found: list[str] = []

    def grow(prefix: str) -> None:
        for token in tokens:
            subject = f"{prefix}.{token}" if prefix else token
            found.append(subject)
            if subject.count(".") + 1 < depth:
                grow(subject)

    grow("")
    return found


def nats(keys: int = 10_000, seed: int = 0) -> Shape:
    """nats-server's sublist benchmark: 37,448 literal subjects and 3 wildcard ones."""
    rng = random.Random(seed)
    subjects = nats_subjects()
    bindings = [(subject, f"s{i}") for i, subject in enumerate(subjects)]
    bindings += [(pattern, f"w{i}") for i, pattern in enumerate(NATS_WILDCARDS)]
    # Keys: subjects, and one in ten under "cloud." (what the wildcards catch), all distinct.
    cloud = [f"cloud.{s}" for s in subjects if s.count(".") < 4]
    rng.shuffle(subjects)
    rng.shuffle(cloud)
    first = subjects[: keys - keys // 10] + cloud[: keys // 10]
    rng.shuffle(first)
    return Shape("nats", "NATS: 28 ns a cached match (Go)", bindings, first,
                 _stream(rng, first[:1_000], keys))


def emqx(subscribers: int = 80, filters: int = 1_000, keys: int = 10_000, seed: int = 0) -> Shape:
    """EMQX's router benchmark (emqx_broker_bench:run1/0): ``device.{s}.*.{n}.#``."""
    rng = random.Random(seed)
    bindings = [(f"device.{s}.*.{n}.#", f"sub{s}")
                for s in range(subscribers) for n in range(filters)]
    pairs = [(s, n) for s in range(subscribers) for n in range(filters)]
    first = [f"device.{s}.foo.{n}.bar.1.2.3.4.5" for s, n in rng.sample(pairs, keys)]
    return Shape("emqx", "EMQX: 80 subscribers x 1,000 filters, keys of 10 words", bindings,
                 first, _stream(rng, first[:1_000], keys))


def fanout(queues: int = 10_000, seed: int = 0) -> Shape:
    """RabbitMQ 4.3's large fan-out: every queue bound to one key."""
    bindings = [("events.all", f"q{i}") for i in range(queues)]
    return Shape("fanout", "RabbitMQ 4.3: 0.6 ms a 10k-queue route", bindings, ["events.all"],
                 ["events.all"] * 3_000, fanout=True,
                 notes=["one distinct key: 'first time' is the first route after the build"])


def literal(count: int = 100_000, keys: int = 10_000, seed: int = 0) -> Shape:
    """100k literal bindings of 3 words; 1 key in 10 matches none."""
    rng = random.Random(seed)
    patterns = [f"tenant{i // 1_000}.user{i % 1_000}.inbox" for i in range(count)]
    bindings = [(pattern, f"q{i}") for i, pattern in enumerate(patterns)]
    first = rng.sample(patterns, keys - keys // 10)
    first += [f"tenant{i}.user{i}.outbox" for i in range(keys // 10)]
    rng.shuffle(first)
    return Shape("literal", "a direct-like topic exchange: one binding per user", bindings,
                 first, _stream(rng, first[:1_000], keys))


def seed_mix(count: int, keys: int = 3_000, seed: int = 0, queues: int = 100) -> Shape:
    """The seed articles' mix (word 70%, ``*`` 20%, ``#`` 10%) to ``queues`` queues."""
    rng = random.Random(seed)
    patterns = seed_patterns(count, seed=seed)
    bindings = [(pattern, f"q{i % queues}") for i, pattern in enumerate(patterns)]
    # Five-word keys, as the seed articles measure (a small mix may have no five-word pattern).
    length = 5 if any(p.count(".") == 4 for p in patterns) else None
    first = list(dict.fromkeys(seed_keys(patterns, 2 * keys, seed=seed + 1, length=length)))[:keys]
    return Shape(f"seed-{count // 1000}k", "the seed articles' mix (README's earlier figures)",
                 bindings, first, _stream(rng, first[:1_000], keys))


def mqtt(subscriptions: int = 1_000_000, keys: int = 20_000, seed: int = 0,
         name: str = "mqtt") -> Shape:
    """An MQTT-style fleet (issue 36), ``subscriptions`` in all: per site ``s{i}.*.temp``,
    ``s{i}.floor{j}.#`` (3 floors) and literal ``s{i}.floor{j}.room{k}.temp`` (2 floors x 3
    rooms), one client queue per site, and 100 ``*.*.alarm.{k}`` watchers; keys of 4 to 6
    words whose sites follow a Zipf law (a few sites send most)."""
    rng = random.Random(seed)
    sites = max(1, (subscriptions - 100) // 10)
    bindings = [(f"*.*.alarm.{k}", f"watch{k}") for k in range(100)]
    for i in range(sites):
        queue = f"c{i}"
        bindings.append((f"s{i}.*.temp", queue))
        bindings += [(f"s{i}.floor{j}.#", queue) for j in range(3)]
        bindings += [(f"s{i}.floor{j}.room{k}.temp", queue) for j in range(2) for k in range(3)]

    def key() -> str:
        site = min(int(rng.paretovariate(1.1)) - 1, sites - 1) if rng.random() < 0.5 else (
            rng.randrange(sites))
        floor, room = rng.randrange(4), rng.randrange(5)
        form = rng.randrange(4)
        if form == 0:
            return f"s{site}.floor{floor}.room{room}.temp"
        if form == 1:
            return f"s{site}.floor{floor}.alarm.{rng.randrange(120)}"
        if form == 2:
            return f"s{site}.floor{floor}.room{room}.temp.c{rng.randrange(10)}"
        return f"s{site}.floor{floor}.room{room}.sensor{rng.randrange(9)}.temp.v"

    seen: dict[str, None] = {}
    for _ in range(20 * keys):
        seen[key()] = None
        if len(seen) >= keys:
            break
    first = list(seen)
    weights = [1 / (rank + 1) for rank in range(min(1_000, len(first)))]  # Zipf over 1,000
    repeat = rng.choices(first[:1_000], weights=weights, k=keys)
    return Shape(name, "issue 36: 1M MQTT-style subscriptions (EMQX's index: ~225 B each)",
                 bindings, first, repeat)


SHAPES: dict[str, Callable[[], Shape]] = {
    "unicast": unicast,
    "broadcast": broadcast,
    "nats": nats,
    "emqx": emqx,
    "fanout": fanout,
    "literal": literal,
    "seed-10k": lambda: seed_mix(10_000),
    "seed-100k": lambda: seed_mix(100_000, keys=1_500),
}
# The seed mixes as `xroute.bench.contact` takes them: first routes and batches over the
# issue's 20k keys a topology has not seen (`SHAPES` keeps fewer, for the engines
# comparison, where every engine routes them, the slowest included). Over 1.5k keys a first
# batch's one-time costs in a process (its kernels loaded) outweighed the keys themselves.
CONTACT_KEYS = 20_000
CONTACT_VARIANTS: dict[str, Callable[[], Shape]] = {
    "seed-10k": lambda: seed_mix(10_000, keys=CONTACT_KEYS),
    "seed-100k": lambda: seed_mix(100_000, keys=CONTACT_KEYS),
}
# Shapes measured by `xroute.bench.contact` only (minutes to build at full size), each built
# at a scale (1.0: as the issue states it).
SCALED_SHAPES: dict[str, Callable[[float], Shape]] = {
    "mqtt": lambda scale: mqtt(max(1_000, int(1_000_000 * scale))),
    "mqtt-10k": lambda scale: mqtt(10_000, name="mqtt-10k"),
}
