"""``xroute bench engines --paths``: every public routing path, every engine, one run (issue 12).

Per size (seed-mix bindings, `xroute.bench.workload`) and per workload:

- ``repeat``: a stream of 5-word keys drawn from 3,000 distinct ones, routed once through
  every path before timing (the caches warm);
- ``unique``: keys that never repeat (each path gets keys no path routed before);

it times, for every engine (``trie``, ``trie+cache``, ``dfa``, ``bitmap``, ``compiled``,
``auto``), keys per second through ``TopicMatcher.match`` (one call per key),
``match_many`` (a list), ``match_many_ids`` (a list, and an Arrow array), and through a
`Topology` (one topic exchange, the same patterns bound to 100 queues, so that a key reaches
about 90 queues at 10k bindings) ``Topology.route`` (one call per key) and
``BatchRouter.route`` (the keys as one batch). Every engine's answers are checked against
``reference`` first (`CheckFailed` is a bug, not a result). Each engine then gets one warm-up
batch of `WARMUP_KEYS` keys through ``match_many_ids`` (numba's cache load, the kernel's flat
trie): the figures are for an engine already in use, as in a service or a Spark worker.

The peers (kombu's topic exchange, an exact per-binding regex matcher) route single keys in
the same run, on fewer keys at large sizes (they cost milliseconds a key); their wrong routes
are counted against ``reference``.

Churn: with caches warm, every binding removed in random order, then added back in another
random order (timed, answers checked after); memory (tracemalloc) of a fresh matcher against
the same matcher after churn, at `CHURN_MEMORY_SIZE` bindings.
"""

from __future__ import annotations

import gc
import os
import random
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from xroute.bench.experiments.common import CheckFailed, check_same, wrong_routes
from xroute.bench.experiments.machine import cpu_model, load_average, machine_note
from xroute.bench.peers import build_peer
from xroute.bench.workload import seed_keys, seed_patterns
from xroute.core.batch import BatchRouter
from xroute.core.topology import Topology
from xroute.engines import TopicMatcher

ENGINE_SPECS = ("trie", "trie+cache", "dfa", "bitmap", "compiled", "auto")
PEERS = ("kombu", "regex")
PATHS = ("match", "match_many", "match_many_ids list", "match_many_ids arrow",
         "Topology.route", "BatchRouter.route")
WORKLOADS = ("repeat", "unique")
DISTINCT_KEYS = 3_000
QUEUES = 100  # Topology destinations: about 90 queues a key at 10k bindings
WARMUP_KEYS = 5_000
CHURN_MEMORY_SIZE = 10_000
CHUNKS = 5  # each path timed on 5 slices of its keys, the best kept
GOAL = 1.25  # auto within this factor of the best engine, per path (issue 12)
EXCHANGE = "bench"


def keys_per_path(size: int) -> int:
    """Keys timed per path: fewer at large sizes, where a cold key costs up to 1 ms."""
    return {1_000: 10_000, 10_000: 5_000}.get(size, 1_500 if size <= 100_000 else 500)


def peer_keys(size: int) -> int:
    """Keys a peer routes (a regex scan costs about 0.4 µs per binding per key)."""
    return max(5, min(300, 2_000_000 // size))


Report = Callable[[str], None]


def run(sizes: Sequence[int], report: Report = lambda line: None,
        engines: Sequence[str] = ENGINE_SPECS, seed: int = 0) -> dict[str, Any]:
    """The whole experiment: ``{"meta", "sizes": [...], "gaps": [...], "churn": [...]}``."""
    results: dict[str, Any] = {"meta": _meta(sizes, engines), "sizes": [], "churn": []}
    gc.collect()
    gc.freeze()  # modules and the like are never garbage: keep them out of each collection
    for size in sizes:
        results["sizes"].append(_one_size(size, engines, seed, report))
    largest = max(sizes)
    for spec in engines:
        report(f"churn: {spec} at {largest:,} bindings")
        results["churn"].append(churn(spec, largest, seed))
    memory_size = min(CHURN_MEMORY_SIZE, largest)
    for spec in engines:
        report(f"churn memory: {spec} at {memory_size:,} bindings")
        results["churn"].append(churn_memory(spec, memory_size, seed))
    gc.unfreeze()
    results["gaps"] = gaps(results)
    results["meta"]["load_after"] = load_average()
    return results


# -- one size -------------------------------------------------------------------------------


def _unique_keys(patterns: list[str], count: int, seed: int, avoid: set[str]) -> list[str]:
    found: dict[str, None] = {}
    attempt = 0
    while len(found) < count and attempt < 20:
        for key in seed_keys(patterns, 2 * count, seed=seed + attempt, length=5):
            if key not in avoid and key not in found:
                found[key] = None
                if len(found) == count:
                    break
        attempt += 1
    return list(found)


def _one_size(size: int, engines: Sequence[str], seed: int, report: Report) -> dict[str, Any]:
    report(f"{size:,} bindings: workload")
    patterns = seed_patterns(size, seed=seed)
    bindings = [(p, f"q{i}") for i, p in enumerate(patterns)]
    count = keys_per_path(size)
    rng = random.Random(seed + 1)
    distinct = sorted(set(seed_keys(patterns, DISTINCT_KEYS, seed=seed + 2, length=5)))
    stream = [rng.choice(distinct) for _ in range(count)]
    # One fresh slice per path (and for the warm-up and the check), so no key repeats.
    checked = 10  # of each workload (the reference tests every pattern for each key)
    fresh = _unique_keys(patterns, count * len(PATHS) + WARMUP_KEYS + checked, seed + 3,
                         set(distinct))
    warmup, check = fresh[:WARMUP_KEYS], fresh[WARMUP_KEYS:WARMUP_KEYS + checked]
    fresh = fresh[WARMUP_KEYS + checked:]
    unique = {path: fresh[i * count:(i + 1) * count] for i, path in enumerate(PATHS)}
    check = check + distinct[:checked]
    report(f"{size:,} bindings: reference answers on {len(check)} keys")
    reference = build_matcher("reference", bindings)
    truth = reference.match_many(check)
    topology_truth = _topology("reference", patterns).route
    route_truth = [topology_truth(EXCHANGE, key) for key in check]
    entry: dict[str, Any] = {"bindings": size, "keys_per_path": count,
                             "distinct_keys": len(distinct), "engines": {}, "peers": {}}
    prepared = {}
    for spec in engines:
        report(f"{size:,} bindings: {spec}: build, check, warm up")
        prepared[spec] = _prepare(spec, bindings, patterns, check, truth, route_truth, warmup,
                                  distinct)
    # Engines take turns on each slice of keys, so that the machine's other work (shared
    # cores) falls on all of them alike rather than on whichever ran last.
    for workload, keys_of in (("repeat", {path: stream for path in PATHS}), ("unique", unique)):
        report(f"{size:,} bindings: timing, workload {workload}")
        for path in PATHS:
            rates = _rates({spec: p["calls"][path] for spec, p in prepared.items()},
                           keys_of[path], arrow=path.endswith("arrow"))
            for spec, rate in rates.items():
                prepared[spec]["result"][workload][path] = rate
    for spec, p in prepared.items():
        result = p["result"]
        result["stats"] = {k: v for k, v in p["matcher"].stats().items()
                           if isinstance(v, (int, float))}
        result["topology_route_cache"] = p["topology"].route_cache_stats()
        entry["engines"][spec] = result
    del prepared
    gc.collect()
    some = check[: min(len(check), 10)]
    for name in PEERS:
        report(f"{size:,} bindings: peer {name}")
        peer, skipped = build_peer(name, bindings)
        keys = stream[: peer_keys(size)]
        answers = [peer.match(key) for key in some]
        seconds = time_call(lambda: [peer.match(key) for key in keys])
        entry["peers"][name] = {"match keys/s": len(keys) / seconds, "keys": len(keys),
                                "wrong_routes": wrong_routes(truth[: len(some)], answers),
                                "checked_keys": len(some), "skipped_bindings": skipped}
        del peer
        gc.collect()
    return entry


def build_matcher(spec: str, bindings: Sequence[tuple[str, str]]) -> TopicMatcher:
    """A `TopicMatcher` of engine ``spec`` (``NAME+cache``: route cache on) with ``bindings``."""
    name, _, cache = spec.partition("+")
    matcher = TopicMatcher(engine=name, cache=True if cache else None)
    for pattern, destination in bindings:
        matcher.add(pattern, destination)
    return matcher


def _topology(spec: str, patterns: Sequence[str]) -> Topology:
    name, _, cache = spec.partition("+")
    topology = Topology(engine=name)
    topology.declare_exchange(EXCHANGE, "topic")
    if cache:  # the topic exchange's matcher, with the engine route cache in front
        topology.exchanges[EXCHANGE].kind.matcher = TopicMatcher(engine=name, cache=True)
    for i in range(QUEUES):
        topology.declare_queue(f"q{i}")
    for i, pattern in enumerate(patterns):
        topology.bind(EXCHANGE, f"q{i % QUEUES}", pattern)
    return topology


def decode_ids(matcher: TopicMatcher, offsets: Any, ids: Any) -> list[frozenset]:
    """`match_many_ids` output as one frozenset of destinations per key."""
    names = matcher.destinations()
    bounds, ids = offsets.tolist(), ids.tolist()
    return [frozenset(names[j] for j in ids[a:b]) for a, b in zip(bounds, bounds[1:])]


def _prepare(spec: str, bindings: Sequence[tuple[str, str]], patterns: Sequence[str],
             check: list[str], truth: list[frozenset], route_truth: list[frozenset],
             warmup: list[str], distinct: list[str]) -> dict[str, Any]:
    """Build one engine's matcher and topology, check them, warm them up; their calls."""
    began = time.perf_counter()
    matcher = build_matcher(spec, bindings)
    build = time.perf_counter() - began
    check_same(f"{spec} match", check, truth, [matcher.match(k) for k in check])
    check_same(f"{spec} match_many", check, truth, matcher.match_many(check))
    check_same(f"{spec} match_many_ids", check, truth,
               decode_ids(matcher, *matcher.match_many_ids(pa.array(check, pa.string()))))
    topology = _topology(spec, patterns)
    check_same(f"{spec} Topology.route", check, route_truth,
               [topology.route(EXCHANGE, k) for k in check])
    routed = BatchRouter(topology).route(EXCHANGE, check)
    check_same(f"{spec} BatchRouter.route", check, route_truth,
               [routed.queues(i) for i in range(len(check))])
    matcher.match_many_ids(warmup)  # numba's cache load, the flat trie: an engine in use
    BatchRouter(topology).route(EXCHANGE, warmup)
    router = BatchRouter(topology)

    calls: dict[str, Callable[[Any], Any]] = {
        "match": lambda keys: [matcher.match(k) for k in keys],
        "match_many": matcher.match_many,
        "match_many_ids list": matcher.match_many_ids,
        "match_many_ids arrow": matcher.match_many_ids,  # given Arrow arrays by _rate
        "Topology.route": lambda keys: [topology.route(EXCHANGE, k) for k in keys],
        "BatchRouter.route": lambda keys: router.route(EXCHANGE, keys),
    }
    for path, call in calls.items():  # every path has routed the repeat workload's keys once
        call(pa.array(distinct, pa.string()) if path.endswith("arrow") else distinct)
    return {"matcher": matcher, "topology": topology, "calls": calls,
            "result": {"build_s": build, "repeat": {}, "unique": {}}}


def _rates(calls: dict[str, Callable[[Any], Any]], keys: list[str],
           arrow: bool = False) -> dict[str, float]:
    """Keys per second of each call: the best of `CHUNKS` slices of ``keys`` (fresh keys stay
    fresh for each engine), the engines taking turns on each slice; on a shared machine the
    slower slices measure the other work. Arrow input is built before the clock starts."""
    size = max(1, len(keys) // CHUNKS)
    best = dict.fromkeys(calls, 0.0)
    for start in range(0, size * CHUNKS, size):
        chunk: Any = keys[start:start + size]
        if arrow:
            chunk = pa.array(chunk, pa.string())
        for spec, call in calls.items():
            best[spec] = max(best[spec], len(chunk) / time_call(lambda: call(chunk)))
    return best


def time_call(call: Callable[[], Any]) -> float:
    """Seconds ``call()`` took, the garbage collector off meanwhile."""
    gc.disable()
    try:
        began = time.perf_counter()
        call()
        return max(time.perf_counter() - began, 1e-9)
    finally:
        gc.enable()


# -- churn ----------------------------------------------------------------------------------


def _churn_workload(size: int, seed: int) -> tuple[list[tuple[str, str]], list[str]]:
    patterns = seed_patterns(size, seed=seed + 7)
    bindings = list(dict.fromkeys((p, f"q{i % 5_000}") for i, p in enumerate(patterns)))
    return bindings, sorted(set(seed_keys(patterns, DISTINCT_KEYS, seed=seed + 8, length=5)))


def churn(spec: str, size: int, seed: int) -> dict[str, Any]:
    """Remove every binding in random order, then add them back, on a warm matcher."""
    bindings, keys = _churn_workload(size, seed)
    matcher = build_matcher(spec, bindings)
    matcher.match_many(keys)  # every cache warm: DFA states, memo, known keys, cache entries
    for key in keys:
        matcher.match(key)
    matcher.match_many_ids(keys)
    order = list(bindings)
    rng = random.Random(seed + 9)
    rng.shuffle(order)
    remove = time_call(lambda: [matcher.remove(p, d) for p, d in order])
    rng.shuffle(order)
    add = time_call(lambda: [matcher.add(p, d) for p, d in order])
    sample = keys[:10]
    check_same(f"{spec} after churn", sample, build_matcher("reference", bindings).match_many(sample),
               matcher.match_many(sample))
    return {"engine": spec, "bindings": len(bindings), "remove_all_s": remove, "add_all_s": add,
            "warmed_with_keys": 3 * len(keys)}


def churn_memory(spec: str, size: int, seed: int) -> dict[str, Any]:
    """tracemalloc: what a fresh matcher holds, then what one holds warm and after a full
    churn. "Holds" is what deleting the matcher frees, so that what the process keeps anyway
    (interned words, allocator pools) is not counted as the matcher's."""
    bindings, keys = _churn_workload(size, seed)
    order = list(bindings)
    random.Random(seed + 9).shuffle(order)
    gc.collect()
    tracemalloc.start()
    try:
        matcher = build_matcher(spec, bindings)
        built = _traced()
        del matcher
        fresh = built - _traced()
        matcher = build_matcher(spec, bindings)
        matcher.match_many(keys)
        for key in keys:
            matcher.match(key)
        matcher.match_many_ids(keys)
        warm = _traced()
        for pattern, destination in order:
            matcher.remove(pattern, destination)
        for pattern, destination in reversed(order):
            matcher.add(pattern, destination)
        churned = _traced()
        del matcher
        left = _traced()
    finally:
        tracemalloc.stop()
    return {"engine": spec, "bindings": len(bindings), "memory_fresh_bytes": fresh,
            "memory_warm_bytes": warm - left, "memory_after_churn_bytes": churned - left,
            "after_over_fresh": (churned - left) / max(fresh, 1)}


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


# -- the rule holds? ------------------------------------------------------------------------


def gaps(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per size, workload and path: auto's rate, the best engine's, and the ratio."""
    found = []
    for entry in results["sizes"]:
        engines = entry["engines"]
        if "auto" not in engines:
            continue
        for workload in WORKLOADS:
            for path in PATHS:
                rates = {spec: e[workload][path] for spec, e in engines.items()}
                best = max(rates, key=rates.__getitem__)
                ratio = rates[best] / rates["auto"]
                found.append({"bindings": entry["bindings"], "workload": workload, "path": path,
                              "auto": rates["auto"], "best": best, "best_rate": rates[best],
                              "ratio": ratio, "met": ratio <= GOAL})
    return found



def _meta(sizes: Sequence[int], engines: Sequence[str]) -> dict[str, Any]:
    import sys

    return {
        "experiment": "paths",
        "sizes": list(sizes),
        "engines": list(engines),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "processor": cpu_model(),
        "load_before": load_average(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine_note": f"{machine_note()} at the start: compare engines within this run "
                        "only",
        "workloads": {"repeat": f"5-word keys drawn from {DISTINCT_KEYS:,} distinct, routed "
                                "once before timing", "unique": "5-word keys never routed before"},
        "topology": f"one topic exchange, the same patterns bound to {QUEUES} queues",
        "warmup": f"one match_many_ids batch of {WARMUP_KEYS:,} other keys before timing",
    }


__all__ = ["CheckFailed", "ENGINE_SPECS", "PATHS", "WORKLOADS", "churn", "churn_memory", "gaps",
           "run"]


# -- report ---------------------------------------------------------------------------------


def _rate(value: float) -> str:
    return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.1f}k" if value >= 1e3 else (
        f"{value:.0f}")


def _load(load: list[float] | None) -> str:
    return f"{load[0]:.1f}" if load else "unknown"


def markdown(results: dict[str, Any]) -> str:
    """The tables the README and docs/engines.md quote, from one run's results."""
    meta = results["meta"]
    lines = [
        f"Measured with `{meta.get('command', 'xroute bench engines --paths')}` on "
        f"{meta['date']}, {meta['cpus']} cores ({meta['processor']}), load average "
        f"{_load(meta['load_before'])} before, {_load(meta['load_after'])} after: compare "
        "figures within this run only. Keys/s, best of 5 slices, engines taking turns.",
        "",
        "**`auto` (the default) against the best engine of the same run**, keys/s "
        "(ratio = best / auto; goal <= 1.25):",
        "",
        "| path | workload | " + " | ".join(f"{e['bindings']:,} bindings" for e in
                                            results["sizes"]) + " |",
        "| --- | --- |" + " --- |" * len(results["sizes"]),
    ]
    for workload in WORKLOADS:
        for path in PATHS:
            cells = []
            for entry in results["sizes"]:
                gap = next(g for g in results["gaps"] if g["bindings"] == entry["bindings"]
                           and g["workload"] == workload and g["path"] == path)
                mark = "" if gap["met"] else " **(over)**"
                best = "auto" if gap["best"] == "auto" else f"{gap['best']} {_rate(gap['best_rate'])}"
                cells.append(f"{_rate(gap['auto'])} / {best}: {gap['ratio']:.2f}x{mark}")
            lines.append(f"| `{path}` | {workload} | " + " | ".join(cells) + " |")
    met = sum(g["met"] for g in results["gaps"])
    lines += ["", f"{met} of {len(results['gaps'])} cells within 1.25x.", "",
              "**Peers in the same run** (`match`, one key a call, keys/s; wrong routes on the "
              "checked keys):", "",
              "| peer | " + " | ".join(f"{e['bindings']:,}" for e in results["sizes"]) + " |",
              "| --- |" + " --- |" * len(results["sizes"])]
    for peer in results["sizes"][0]["peers"]:
        cells = [f"{_rate(e['peers'][peer]['match keys/s'])} ({e['peers'][peer]['wrong_routes']}"
                 f"/{e['peers'][peer]['checked_keys']} wrong)" for e in results["sizes"]]
        lines.append(f"| {peer} | " + " | ".join(cells) + " |")
    auto_match = [e["engines"]["auto"]["repeat"]["match"] for e in results["sizes"]]
    lines.append("| `auto` `match`, repeat | " + " | ".join(_rate(v) for v in auto_match) + " |")
    timed = [c for c in results["churn"] if "remove_all_s" in c]
    memory = {c["engine"]: c for c in results["churn"] if "after_over_fresh" in c}
    if timed:
        lines += ["", f"**Binding churn**: {timed[0]['bindings']:,} bindings removed in random "
                  "order then added back in another, caches warm (each key of "
                  f"{DISTINCT_KEYS:,} routed 3 times first); memory by tracemalloc at "
                  f"{next(iter(memory.values()))['bindings']:,} bindings, after churn / fresh:",
                  "", "| engine | remove all s | add all s | memory after / fresh |",
                  "| --- | --- | --- | --- |"]
        for c in timed:
            ratio = memory.get(c["engine"], {}).get("after_over_fresh")
            lines.append(f"| {c['engine']} | {c['remove_all_s']:.2f} | {c['add_all_s']:.2f} | "
                         f"{ratio:.3f} |" if ratio else f"| {c['engine']} | "
                         f"{c['remove_all_s']:.2f} | {c['add_all_s']:.2f} | |")
    return "\n".join(lines) + "\n"
