"""A/B of the plain-Python path before and after typed values (issue 34): the same measures in
alternating processes, one importing xroute from ``--base`` (a source folder, e.g. main's
``git archive``), the other from ``--new``; writes OUT/results.json and OUT/ratios.png.

Measures (CPU time; each the median over the rounds of each process's best): per shape of `xroute.bench.shapes` (the seed mix and the
other brokers' workloads), binding every pattern, a first route of each key (``Topology.route``
missing its cache, as ``xroute bench engines --shapes``' route first) and repeated routes (cache
hits); a headers exchange routing plain header values; on the new side only, the same headers
as typed values (what they cost where they are used).

    python scripts/typed_values_ab.py --base /tmp/base/src --new src --rounds 3
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

SHAPES = ("seed-10k", "unicast", "nats", "literal")
HEADERS_BINDINGS = 1_000
HEADERS_MESSAGES = 20_000


# CPU time of this process, not wall time: on a machine shared with other work, a process
# waiting for a core is not charged for the wait (the spread of wall times was 3x here).
clock = time.process_time


def _best(call, repeats: int = 3) -> float:
    """The fastest of ``repeats`` runs of ``call``, CPU seconds, the collector off."""
    gc.collect()
    gc.disable()
    try:
        times = []
        for _ in range(repeats):
            start = clock()
            call()
            times.append(clock() - start)
        return min(times)
    finally:
        gc.enable()


def child(typed: bool) -> dict:
    """The measures in this process (xroute from sys.path)."""
    from xroute import Topology
    from xroute.bench.shapes import SHAPES as MAKERS

    out: dict[str, float] = {}
    for name in SHAPES:
        shape = MAKERS[name]()

        def build(shape=shape):
            t = Topology()
            t.declare_exchange("x", "topic")
            for queue in shape.queues:
                t.declare_queue(queue)
            for pattern, queue in shape.bindings:
                t.bind("x", queue, pattern)
            return t

        out[f"{name}: bind, µs a binding"] = _best(build, 1) / len(shape.bindings) * 1e6
        holder = {}

        def first(shape=shape):
            t = holder["t"] = build()
            route = t.route
            gc.disable()
            start = clock()
            for key in shape.first_keys:
                route("x", key)
            holder["s"] = clock() - start
            gc.enable()

        times = []
        for _ in range(3):
            gc.collect()
            first()
            times.append(holder["s"])
        out[f"{name}: route first, µs"] = min(times) / len(shape.first_keys) * 1e6
        t = holder["t"]
        for key in shape.repeat_keys:
            t.route("x", key)

        def repeat(t=t, keys=shape.repeat_keys):
            route = t.route
            for key in keys:
                route("x", key)

        out[f"{name}: route repeat, µs"] = _best(repeat) / len(shape.repeat_keys) * 1e6
    # A headers exchange with plain values: every header canonicalised on each route.
    t = Topology()
    t.declare_exchange("h", "headers")
    for i in range(HEADERS_BINDINGS):
        t.declare_queue(f"q{i}")
        mode = "any" if i % 2 else "all"
        t.bind("h", f"q{i}", "", {"x-match": mode, f"k{i % 50}": i % 97, f"s{i % 7}": f"v{i % 5}"})
    plain = [{f"k{i % 50}": i % 97, f"s{i % 7}": f"v{i % 3}", "other": i}
             for i in range(HEADERS_MESSAGES)]

    def headers(tables=plain):
        route = t.route
        for table in tables:
            route("h", "", table)

    out["headers (plain values): route, µs"] = _best(headers) / len(plain) * 1e6
    if typed:
        from xroute.values import long, longstr, short

        typed_tables = [{f"k{i % 50}": short(i % 97), f"s{i % 7}": longstr(f"v{i % 3}"),
                         "other": long(i)} for i in range(HEADERS_MESSAGES)]
        out["headers (typed values): route, µs"] = (
            _best(lambda: headers(typed_tables)) / len(typed_tables) * 1e6
        )
    return out


def machine() -> dict:
    info = {"cpu": "?", "cores": os.cpu_count(), "load": os.getloadavg()}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            info["cpu"] = line.split(":", 1)[1].strip()
            break
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=False)
    parser.add_argument("--new", required=False)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="docs/results/typed-values-ab")
    parser.add_argument("--child", choices=["base", "new"])
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child == "new")))
        return
    runs: dict[str, list[dict]] = {"base": [], "new": []}
    for turn in range(args.rounds):
        for side in (("base", "new") if turn % 2 == 0 else ("new", "base")):
            source = os.path.abspath(getattr(args, side))
            env = {**os.environ, "PYTHONPATH": source}
            done = subprocess.run(
                [sys.executable, __file__, "--child", side], env=env, check=True,
                capture_output=True, text=True,
            )
            runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {turn + 1} {side} done", file=sys.stderr)
    # Each figure: the median of the rounds (each round's figure is already its process's best).
    best = {side: {k: statistics.median(r[k] for r in results) for k in results[0]}
            for side, results in runs.items()}
    ratios = {k: best["new"][k] / best["base"][k] for k in best["base"]}
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "rounds": args.rounds,
        "note": "alternating processes base/new; CPU time (time.process_time); each figure "
                "the median over rounds of each process's best; ratio = new / base time "
                "(below 1: faster)",
        "base": best["base"],
        "new": best["new"],
        "ratio_new_over_base": ratios,
        "runs": runs,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    plot(result, out / "ratios.png")
    for key, ratio in ratios.items():
        print(f"{key:45s} base {best['base'][key]:9.3f}  new {best['new'][key]:9.3f}  "
              f"x{ratio:.3f}")
    typed = [k for k in best["new"] if k not in best["base"]]
    for key in typed:
        print(f"{key:45s} new {best['new'][key]:9.3f}")


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["ratio_new_over_base"])
    values = [result["ratio_new_over_base"][n] for n in names]
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(names) + 1.4))
    ax.barh(names, values, color=["#4c72b0" if v <= 1.05 else "#c44e52" for v in values])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_xlabel("time after / time before (typed values, issue 34); 1 = unchanged")
    machine_ = result["machine"]
    ax.set_title(f"Plain-Python path, {result['when'][:16]} UTC, {machine_['cpu']}, "
                 f"load {machine_['load'][0]:.1f}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
