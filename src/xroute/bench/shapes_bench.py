"""``xroute bench engines --shapes``: every engine on the workloads other brokers benchmark.

Per shape (`xroute.bench.shapes`) and engine, in one process:

- ``build_s``: binding every pattern into a `TopicMatcher`;
- ``match`` µs a call, keys seen the first time (a fresh matcher) and repeated (a stream from
  1,000 distinct keys, after one pass);
- ``Topology.route`` routes/s, first time and repeated (one topic exchange, one queue per
  destination of the shape);
- ``match_many_ids`` keys/s on an Arrow array: the first batch of a fresh matcher (the flat
  trie built inside it), then a batch of keys the matcher has not seen, then a repeated one;
  ``flatten_s``: building the flat trie alone; ``BatchRouter.route`` keys/s (warm);
- peers (an exact per-binding regex, kombu) on a few keys where they are cheap enough.

Every engine's answers are checked against ``reference`` before anything is timed
(`CheckFailed`: a bug, not a result). Engines take turns within a shape, so load from other
work on the shared machine falls on all of them alike; the load average is recorded.
"""

from __future__ import annotations

import gc
import os
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from xroute.batch import BatchRouter
from xroute.bench.experiments.common import check_same, wrong_routes
from xroute.bench.experiments.machine import load_average
from xroute.bench.peers import build_peer
from xroute.bench.shapes import SHAPES, Shape
from xroute.engines import TopicMatcher
from xroute.engines.warm import warm as warm_kernels
from xroute.topology import Topology

ENGINES = ("trie", "dfa", "compiled", "auto")
PEERS = ("regex", "kombu")
PEER_MAX_BINDINGS = 20_000  # a peer scans every binding per key: milliseconds each
PEER_KEYS = 20
CHECKED_KEYS = 25
EXCHANGE = "bench"
WARM_SHARE = 0.2  # of the first-time keys, routed before the others are timed
GOAL = 1.25  # the default engine within this factor of the best, per measure
# Measures where higher is better (rates) and lower is better (times), for the gaps.
RATES = ("route_first_per_s", "route_repeat_per_s", "ids_first_batch_per_s",
         "ids_new_keys_per_s", "ids_repeat_per_s", "batch_router_per_s")
TIMES = ("match_first_us", "match_repeat_us")

Report = Callable[[str], None]


def run(shapes: Sequence[str] = tuple(SHAPES), engines: Sequence[str] = ENGINES,
        report: Report = lambda line: None) -> dict[str, Any]:
    """The whole experiment: ``{"meta", "shapes": [...], "gaps": [...]}``."""
    results: dict[str, Any] = {"meta": _meta(shapes, engines), "shapes": []}
    warm_kernels()  # numba imported and its kernels loaded: no shape pays for the process's first
    for name in shapes:
        shape = SHAPES[name]()
        report(f"{name}: {len(shape.bindings):,} bindings")
        results["shapes"].append(one_shape(shape, engines, report))
        gc.collect()
    results["gaps"] = gaps(results) if "auto" in engines else []
    results["meta"]["load_after"] = load_average()
    return results


def one_shape(shape: Shape, engines: Sequence[str], report: Report) -> dict[str, Any]:
    """Every measure of every engine on one shape."""
    check = (shape.first_keys[:CHECKED_KEYS] + shape.repeat_keys[:5]
             + [shape.first_keys[0] + ".extra", "nothing.bound.here"])
    truth = _matcher("reference", shape.bindings).match_many(check)
    entry: dict[str, Any] = {"shape": shape.name, "anchor": shape.anchor,
                             "bindings": len(shape.bindings), "queues": len(shape.queues),
                             "first_keys": len(shape.first_keys), "fanout": shape.fanout,
                             "notes": shape.notes, "load": load_average(), "engines": {},
                             "peers": {}}
    for spec in engines:
        report(f"{shape.name}: {spec}")
        entry["engines"][spec] = _measure(spec, shape, check, truth)
        gc.collect()
    if len(shape.bindings) <= PEER_MAX_BINDINGS:
        for name in PEERS:
            peer, skipped = build_peer(name, shape.bindings)
            keys = shape.first_keys[:PEER_KEYS]
            seconds = _time(lambda: [peer.match(key) for key in keys])
            entry["peers"][name] = {
                "match_us": 1e6 * seconds / len(keys),
                "wrong_routes": wrong_routes(truth[:10], [peer.match(k) for k in check[:10]]),
                "checked_keys": 10, "skipped_bindings": skipped}
    return entry


def _measure(spec: str, shape: Shape, check: list[str], truth: list[frozenset]) -> dict[str, Any]:
    # An engine in use: single keys are timed after WARM_SHARE of the keys went through
    # first (DFA states that many keys share are built, as in a running broker); each timed
    # key is still routed for the first time.
    warm = shape.first_keys[: int(WARM_SHARE * len(shape.first_keys))]
    first = shape.first_keys[len(warm):]
    repeat = shape.repeat_keys
    result: dict[str, Any] = {}
    began = time.perf_counter()
    matcher = _matcher(spec, shape.bindings)
    result["build_s"] = time.perf_counter() - began
    for key in warm:
        matcher.match(key)
    result["match_first_us"] = 1e6 * _time(lambda: [matcher.match(k) for k in first]) / len(first)
    check_same(f"{spec} match", check, truth, [matcher.match(k) for k in check])
    for key in repeat:
        matcher.match(key)
    result["match_repeat_us"] = 1e6 * _time(lambda: [matcher.match(k) for k in repeat]) / len(
        repeat)
    # Batches: a fresh matcher's first batch (flattening inside it), then new keys, repeated.
    arrow_first = pa.array(first, pa.string())
    fresh = _matcher(spec, shape.bindings)
    result["ids_first_batch_per_s"] = len(first) / _time(lambda: fresh.match_many_ids(arrow_first))
    decoded = _decode(fresh, *fresh.match_many_ids(pa.array(check, pa.string())))
    check_same(f"{spec} match_many_ids", check, truth, decoded)
    other = _matcher(spec, shape.bindings)
    arrow_repeat = pa.array(repeat, pa.string())
    other.match_many_ids(arrow_repeat)  # an engine in use: its flat trie built
    result["ids_new_keys_per_s"] = len(first) / _time(lambda: other.match_many_ids(arrow_first))
    other.match_many_ids(arrow_repeat)
    result["ids_repeat_per_s"] = len(repeat) / _time(lambda: other.match_many_ids(arrow_repeat))
    engine = other._engine
    if hasattr(engine, "flat"):
        engine._flat = None
        began = time.perf_counter()
        engine.flat()
        result["flatten_s"] = time.perf_counter() - began
    del matcher, fresh, other
    gc.collect()
    # Topology: one topic exchange, one queue per destination of the shape.
    began = time.perf_counter()
    topology = _topology(spec, shape)
    result["topology_build_s"] = time.perf_counter() - began
    for key in warm:
        topology.route(EXCHANGE, key)
    seconds = _time(lambda: [topology.route(EXCHANGE, k) for k in first])
    result["route_first_per_s"] = len(first) / seconds
    result["route_first_ms"] = 1e3 * seconds / len(first)
    # The bench's destinations are queue names: the matcher's truth is the route's.
    check_same(f"{spec} Topology.route", check, truth,
               [topology.route(EXCHANGE, k) for k in check])
    for key in repeat:
        topology.route(EXCHANGE, key)
    result["route_repeat_per_s"] = len(repeat) / _time(
        lambda: [topology.route(EXCHANGE, k) for k in repeat])
    router = BatchRouter(topology)
    router.route(EXCHANGE, arrow_repeat)
    result["batch_router_per_s"] = len(repeat) / _time(lambda: router.route(EXCHANGE,
                                                                            arrow_repeat))
    return result


def _matcher(spec: str, bindings: Sequence[tuple[str, str]]) -> TopicMatcher:
    matcher = TopicMatcher(engine=spec)
    for pattern, destination in bindings:
        matcher.add(pattern, destination)
    return matcher


def _topology(spec: str, shape: Shape) -> Topology:
    topology = Topology(engine=spec)
    topology.declare_exchange(EXCHANGE, "topic")
    for queue in shape.queues:
        topology.declare_queue(queue)
    for pattern, queue in shape.bindings:
        topology.bind(EXCHANGE, queue, pattern)
    return topology


def _decode(matcher: TopicMatcher, offsets: Any, ids: Any) -> list[frozenset]:
    names = matcher.destinations()
    bounds, ids = offsets.tolist(), ids.tolist()
    return [frozenset(names[j] for j in ids[a:b]) for a, b in zip(bounds, bounds[1:])]


def _time(call: Callable[[], Any]) -> float:
    gc.disable()
    try:
        began = time.perf_counter()
        call()
        return max(time.perf_counter() - began, 1e-9)
    finally:
        gc.enable()


def gaps(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per shape and measure: auto's figure, the best engine's, and the ratio (>= 1)."""
    found = []
    for entry in results["shapes"]:
        engines = entry["engines"]
        if "auto" not in engines:
            continue
        for measure in RATES + TIMES:
            values = {spec: e[measure] for spec, e in engines.items() if measure in e}
            lower = measure in TIMES
            best = (min if lower else max)(values, key=values.__getitem__)
            ratio = values["auto"] / values[best] if lower else values[best] / values["auto"]
            found.append({"shape": entry["shape"], "measure": measure, "auto": values["auto"],
                          "best": best, "best_value": values[best], "ratio": ratio,
                          "met": ratio <= GOAL})
    return found


def _meta(shapes: Sequence[str], engines: Sequence[str]) -> dict[str, Any]:
    import sys

    model = ""
    try:
        with open("/proc/cpuinfo") as info:
            model = next((line.split(":", 1)[1].strip() for line in info
                          if line.startswith("model name")), "")
    except OSError:
        pass
    return {"experiment": "shapes", "shapes": list(shapes), "engines": list(engines),
            "python": sys.version.split()[0], "cpus": os.cpu_count(),
            "cpu_model": model or platform.processor(), "load_before": load_average(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "machine_note": "2 cores shared with other helpers' work: compare engines within "
                            "this run only; the load average is recorded per shape"}
