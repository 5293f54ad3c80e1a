"""Experiment 1, seeds 000/003 ("RabbitMQ's Anatomy"): route time against routing-key length
and against the number of bindings, with and without one ``#.#`` binding.

The article timed RabbitMQ's ``route/2`` 50 times per point on bindings of the seed mix (word
70%, ``*`` 20%, ``#`` 10%, no ``##``) with keys made from binding keys of the same length. Its
curves were straight in key length until one ``#.#`` binding was added; then the 100k curve
bent upwards, because its trie restarts the search below a ``#`` for every tail of the key.
xroute's trie walks breadth-first and keeps each node once per position, so its curve must stay
straight: the straightness is measured (R² of a line, and the slope of the last five lengths
over that of the first five).
"""

from __future__ import annotations

import random
from typing import Any

from xroute.bench.experiments.common import (
    Context,
    Progress,
    check_same,
    linear_fit,
    quiet_gc,
    seconds_per_item,
    spread,
    table,
    us,
)
from xroute.bench.experiments.peers import peer_rows
from xroute.bench.workload import key_from_pattern, seed_patterns
from xroute.engines import TopicMatcher

NUMBER = 1
KEY = "anatomy"
TITLE = "Trie anatomy: route time against key length and number of bindings"
SEED = {
    "source": "000/003, Rabbit's Anatomy - Understanding Topic Exchanges (Erlang Solutions)",
    "setup": (
        "One RabbitMQ node; time of rabbit_exchange_type_topic:route/2, averaged over 50 "
        "measurements. Binding keys random, each part a word 70%, `*` 20%, `#` 10%, never two "
        "`#` in a row; a routing key of length n is made from a binding key of length n with "
        "its wildcards replaced by random words. Series at 1k, 10k and 100k bindings, key "
        "lengths 1 to 10; then again with one `#.#` binding added; then key length fixed and "
        "the number of bindings varied."
    ),
    "figures": [
        ["route time vs key length", "linear (figure; no numbers in the text)"],
        ["same with one `#.#` added", "the 100k curve bends upwards, the 10k one slightly"],
        ["route time vs number of bindings", "logarithmic (Mnesia ordered_set lookups)"],
    ],
}
HASH_HASH = "#.#"
SWEEP_LENGTH = 5
# A curve is called straight when a line explains it (R²) and its slope over the longer keys is
# not much more than over the shorter ones; the article's bent curve fails both.
STRAIGHT_R2, STRAIGHT_SLOPE_RATIO = 0.95, 1.5
PATTERN_SEED, KEY_SEED = 1000, 1001

PARAMETERS: dict[str, dict[str, Any]] = {
    "full": {
        "sizes": (1_000, 10_000, 100_000),
        "lengths": tuple(range(1, 11)),
        "repetitions": 50,
        "keys_per_repetition": 20,
        "check_keys_per_length": 5,
        "sweep_sizes": (1_000, 3_000, 10_000, 30_000, 100_000),
        "sweep_keys": 1_000,
        "peer_keys": 200,
    },
    "quick": {
        "sizes": (1_000, 10_000),
        "lengths": tuple(range(1, 11)),
        "repetitions": 20,
        "keys_per_repetition": 10,
        "check_keys_per_length": 3,
        "sweep_sizes": (1_000, 3_000, 10_000),
        "sweep_keys": 300,
        "peer_keys": 60,
    },
    "tiny": {
        "sizes": (300, 1_000),
        "lengths": tuple(range(1, 11)),
        "repetitions": 5,
        "keys_per_repetition": 3,
        "check_keys_per_length": 1,
        "sweep_sizes": (300, 1_000),
        "sweep_keys": 40,
        "peer_keys": 10,
    },
}


def steps(scale: str) -> int:
    """How many progress steps `run` reports at this scale."""
    p = PARAMETERS[scale]
    return 2 * len(p["sizes"]) + len(p["sweep_sizes"])


def _keys_by_length(
    patterns: list[str], lengths: tuple[int, ...], count: int
) -> dict[int, list[str]]:
    """``count`` keys per length, each from a binding key of that length (as the article)."""
    rng = random.Random(KEY_SEED)
    by_length: dict[int, list[str]] = {n: [] for n in lengths}
    for pattern in patterns:
        size = pattern.count(".") + 1
        if size in by_length:
            by_length[size].append(pattern)
    return {
        n: [key_from_pattern(rng.choice(pool), rng) for _ in range(count)]
        for n, pool in by_length.items()
    }


def _matcher(engine: str, patterns: list[str], extra: tuple[str, ...] = ()) -> TopicMatcher:
    matcher = TopicMatcher(engine=engine, cache=False)
    for number, pattern in enumerate(patterns):
        matcher.add(pattern, f"q{number}")
    for pattern in extra:
        matcher.add(pattern, "q-" + pattern)
    return matcher


def _curve(matcher: TopicMatcher, keys: dict[int, list[str]], p: dict[str, Any]) -> dict[int, dict]:
    """Per key length: the spread over repetitions of the mean time of one route (µs)."""
    per = p["keys_per_repetition"]
    curve = {}
    with quiet_gc():  # one collection for the whole curve, none between repetitions
        for length, pool in keys.items():
            samples = [
                seconds_per_item(matcher.match, pool[r * per : (r + 1) * per]) * 1e6
                for r in range(p["repetitions"])
            ]
            curve[length] = spread(samples)
    return curve


def _shape(curve: dict[int, dict]) -> dict[str, float]:
    lengths = sorted(curve)
    means = [curve[n]["mean"] for n in lengths]
    half = len(lengths) // 2
    early = linear_fit(lengths[:half], means[:half])["slope"]
    late = linear_fit(lengths[half:], means[half:])["slope"]
    fit = linear_fit(lengths, means)
    return {
        "r2": round(fit["r2"], 4),
        "us_per_word": round(fit["slope"], 3),
        "late_over_early_slope": round(late / early, 2) if early > 0 else None,
    }


def run(context: Context) -> dict[str, Any]:
    """Measure; return the experiment's result (JSON values only)."""
    p = PARAMETERS[context.scale]
    progress = context.progress
    biggest = max(max(p["sizes"]), max(p["sweep_sizes"]))
    every = seed_patterns(biggest, seed=PATTERN_SEED, max_parts=max(p["lengths"]))
    need = p["repetitions"] * p["keys_per_repetition"]
    curves: dict[str, dict[str, Any]] = {}
    checked = 0
    for size in p["sizes"]:
        patterns = every[:size]
        keys = _keys_by_length(patterns, p["lengths"], need)
        sample = [k for n in p["lengths"] for k in keys[n][: p["check_keys_per_length"]]]
        entry: dict[str, Any] = {}
        for label, extra in (("plain", ()), ("with #.#", (HASH_HASH,))):
            progress.step(f"{size:,} bindings{' + #.#' if extra else ''}: key lengths")
            trie = _matcher("trie", patterns, extra)
            reference = _matcher("reference", patterns, extra)
            checked += check_same(
                f"trie, {size} bindings {label}",
                sample,
                reference.match_many(sample),
                trie.match_many(sample),
            )
            curve = _curve(trie, keys, p)
            entry[label] = {"curve": {str(n): s for n, s in curve.items()}, "shape": _shape(curve)}
        curves[str(size)] = entry

    sweep, peers = _sweep(every, p, progress)
    return {
        "setup": {
            "binding sizes": list(p["sizes"]),
            "key lengths": f"{min(p['lengths'])}..{max(p['lengths'])}",
            "repetitions per point": p["repetitions"],
            "keys per repetition": p["keys_per_repetition"],
            "engine": "trie (TopicMatcher(engine='trie', cache=False): every route walks)",
            "binding parts": "word 70%, * 20%, # 10%, no ## (xroute.bench.workload, 1 to 10 parts)",
            "sweep": f"{len(p['sweep_sizes'])} sizes at key length {SWEEP_LENGTH}, "
            f"{p['sweep_keys']} keys per engine, {p['peer_keys']} per peer",
        },
        "curves": curves,
        "sweep": sweep,
        "checks": {"keys checked against reference": checked + sweep["checked"]},
        "comparison": _comparison(curves, sweep),
        "tables": [_curve_table(curves), _sweep_table(sweep), *peers],
    }


def _sweep(every: list[str], p: dict[str, Any], progress: Progress) -> tuple[dict, list[dict]]:
    """Route time against the number of bindings at one key length, engines and peers."""
    series: dict[str, dict[str, float]] = {}
    peer_tables: list[dict] = []
    checked = 0
    for size in p["sweep_sizes"]:
        progress.step(f"{size:,} bindings: engines and peers at key length {SWEEP_LENGTH}")
        patterns = every[:size]
        keys = _keys_by_length(patterns, (SWEEP_LENGTH,), p["sweep_keys"])[SWEEP_LENGTH]
        truth_keys = keys[: p["peer_keys"]]
        truth = _matcher("reference", patterns).match_many(truth_keys)
        for name, engine, extra in (
            ("trie", "trie", ()),
            ("trie + #.#", "trie", (HASH_HASH,)),
            ("dfa (warm)", "dfa", ()),
        ):
            matcher = _matcher(engine, patterns, extra)
            expected = truth if not extra else [t | {"q-" + HASH_HASH} for t in truth]
            checked += check_same(
                f"{name}, {size} bindings", truth_keys, expected, matcher.match_many(truth_keys)
            )
            matcher.match_many(keys)  # warm: the dfa builds its states on first sight
            series.setdefault(name, {})[str(size)] = us(seconds_per_item(matcher.match, keys))
        bound = [(pattern, f"q{n}") for n, pattern in enumerate(patterns)]
        rows = peer_rows(bound, truth_keys, truth)
        for row in rows:
            series.setdefault(row["peer"], {})[str(size)] = row["us_per_route"]
        peer_tables.append(
            table(
                f"Peers at {size:,} bindings, key length {SWEEP_LENGTH}",
                ["peer", "µs per route", "wrong routes", "keys", "bindings it could take"],
                [
                    [r["peer"], r["us_per_route"], r["wrong"], r["keys"], r["bindings"]]
                    for r in rows
                ],
                "wrong routes: answers that differ from xroute's reference engine",
            )
        )
    return {"length": SWEEP_LENGTH, "series": series, "checked": checked}, peer_tables


def _curve_table(curves: dict[str, Any]) -> dict:
    rows = []
    for size, entry in curves.items():
        for label, data in entry.items():
            curve = data["curve"]
            first, last = curve[min(curve, key=int)], curve[max(curve, key=int)]
            shape = data["shape"]
            rows.append(
                [
                    int(size),
                    label,
                    round(first["mean"], 2),
                    round(last["mean"], 2),
                    round(last["std"], 2),
                    shape["us_per_word"],
                    shape["r2"],
                    shape["late_over_early_slope"],
                ]
            )
    return table(
        "Trie route time against key length (µs per route, mean over repetitions)",
        [
            "bindings",
            "set",
            "len 1",
            "len 10",
            "std at 10",
            "µs per word",
            "R² of a line",
            "late/early slope",
        ],
        rows,
        "R² near 1 and a late/early slope ratio near 1 mean a straight line; a bending curve "
        "gives a ratio well above 1.",
    )


def _sweep_table(sweep: dict[str, Any]) -> dict:
    sizes = sorted({int(s) for values in sweep["series"].values() for s in values})
    rows = [
        [name, *[values.get(str(s)) for s in sizes]] for name, values in sweep["series"].items()
    ]
    return table(
        f"Route time (µs) against the number of bindings, key length {sweep['length']}",
        ["engine / peer", *[f"{s:,}" for s in sizes]],
        rows,
    )


def _verdict(shape: dict[str, float]) -> str:
    """'straight' only when the numbers say so: a line fits and the slope does not grow."""
    ratio = shape["late_over_early_slope"]
    if shape["r2"] >= STRAIGHT_R2 and ratio is not None and ratio <= STRAIGHT_SLOPE_RATIO:
        return "straight"
    return "not straight in this run"


def _comparison(curves: dict[str, Any], sweep: dict[str, Any]) -> dict:
    biggest = max(curves, key=int)
    plain, hashed = curves[biggest]["plain"]["shape"], curves[biggest]["with #.#"]["shape"]
    trie = sweep["series"].get("trie", {})
    sizes = sorted(trie, key=int)
    growth = (
        f"{trie[sizes[0]]} µs at {int(sizes[0]):,} to {trie[sizes[-1]]} µs at "
        f"{int(sizes[-1]):,} bindings"
        if sizes
        else "not measured"
    )
    return table(
        "The seed beside ours",
        ["measure", "seed (RabbitMQ, Mnesia trie)", "xroute trie (this run)"],
        [
            [
                "route time vs key length",
                SEED["figures"][0][1],
                (
                    f"{_verdict(plain)} at {int(biggest):,} bindings: R² {plain['r2']}, "
                    f"{plain['us_per_word']} µs per word"
                ),
            ],
            [
                "with one `#.#` added",
                SEED["figures"][1][1],
                (
                    f"{_verdict(hashed)}: R² {hashed['r2']}, late/early slope "
                    f"{hashed['late_over_early_slope']} "
                    f"(without `#.#`: {plain['late_over_early_slope']})"
                ),
            ],
            ["route time vs bindings", SEED["figures"][2][1], growth],
        ],
    )


def plot(result: dict[str, Any], path: str) -> None:
    """Three panels: key length without and with `#.#`, and the bindings sweep."""
    from xroute.bench.experiments.figures import figure, save

    fig, axes = figure(3, "Experiment 1: trie anatomy (seeds 000/003)")
    for ax, label in zip(axes[:2], ("plain", "with #.#")):
        for size, entry in result["curves"].items():
            curve = entry[label]["curve"]
            lengths = sorted(int(n) for n in curve)
            mean = [curve[str(n)]["mean"] for n in lengths]
            low = [curve[str(n)]["p5"] for n in lengths]
            high = [curve[str(n)]["p95"] for n in lengths]
            ax.plot(lengths, mean, marker="o", label=f"{int(size):,} bindings")
            ax.fill_between(lengths, low, high, alpha=0.2)
        ax.set_title("seed-mix bindings" + (" + one #.#" if label != "plain" else ""))
        ax.set_xlabel("routing key length (words)")
        ax.set_ylabel("µs per route (mean, 5-95% band)")
        ax.legend()
    ax = axes[2]
    for name, values in result["sweep"]["series"].items():
        sizes = sorted(int(s) for s in values if values[s] is not None)
        ax.plot(sizes, [values[str(s)] for s in sizes], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(f"key length {result['sweep']['length']}")
    ax.set_xlabel("bindings")
    ax.set_ylabel("µs per route")
    ax.legend(fontsize="small")
    save(fig, path)
