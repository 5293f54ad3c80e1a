"""Experiment 1, seeds 000/003 ("RabbitMQ's Anatomy"): route time against routing-key length
and against the number of bindings, with and without one ``#.#`` binding.

The article timed RabbitMQ's ``route/2`` 50 times per point on bindings of the seed mix (word
70%, ``*`` 20%, ``#`` 10%, no ``##``) with keys made from binding keys of the same length. Its
curves were straight in key length until one ``#.#`` binding was added; then the 100k curve
bent upwards, because its trie restarts the search below a ``#`` for every tail of the key.
xroute's trie walks breadth-first and keeps each node once per position, so its curve must stay
straight. Two figures say whether it does, both on the median of the repetitions (a process
that shares the CPU makes a few repetitions slow and the mean with them): the R² of a line
through the curve, and the bend, what ``#.#`` costs on the longest keys over what it costs on
the shortest (route time with it over route time without, three lengths each). RabbitMQ's
bend grows with the trie; a bend near 1 means that ``#.#`` adds a constant share per word.
"""

from __future__ import annotations

import random
import statistics
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
# `#.#` "does not bend" the curve when the share of route time it adds on the longest keys is at
# most this many times its share on the shortest (1.0: exactly the same share).
BEND_LIMIT = 1.5
ENDS = 3  # lengths at each end of the curve that the bend compares
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
    return len(p["sizes"]) + len(p["sweep_sizes"])


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


def _curves(
    matchers: dict[str, TopicMatcher], keys: dict[int, list[str]], p: dict[str, Any]
) -> tuple[dict[str, dict[int, dict]], dict[int, float]]:
    """Per matcher and key length, the spread over repetitions of the mean time of one route
    (µs); and per length, the median over repetitions of the first matcher's time over the
    second's on the same keys.

    The matchers take turns on each group of keys, so that a change in the machine's load
    during the run weighs on both alike and their ratio stays fair.
    """
    per = p["keys_per_repetition"]
    samples: dict[str, dict[int, list[float]]] = {name: {} for name in matchers}
    ratios: dict[int, float] = {}
    first, second = list(matchers)[:2]
    with quiet_gc():  # one collection for all the curves, none between repetitions
        for length, pool in keys.items():
            for name in matchers:
                samples[name][length] = []
            for r in range(p["repetitions"]):
                group = pool[r * per : (r + 1) * per]
                for name, matcher in matchers.items():
                    samples[name][length].append(seconds_per_item(matcher.match, group) * 1e6)
            pairs = zip(samples[first][length], samples[second][length])
            ratios[length] = statistics.median(a / b for a, b in pairs)
    curves = {
        name: {length: spread(values) for length, values in by_length.items()}
        for name, by_length in samples.items()
    }
    return curves, ratios


def _shape(curve: dict[int, dict]) -> dict[str, float]:
    """A line through the medians: its R² and slope (µs per word)."""
    lengths = sorted(curve)
    fit = linear_fit(lengths, [curve[n]["median"] for n in lengths])
    return {"r2": round(fit["r2"], 3), "us_per_word": round(fit["slope"], 3)}


def bend(ratios: dict[int, float]) -> float:
    """What `#.#` costs on the longest keys over what it costs on the shortest: ``ratios`` is
    route time with it over route time without, per key length."""
    lengths = sorted(ratios)

    def share(picked: list[int]) -> float:
        return sum(ratios[n] for n in picked) / len(picked)

    return round(share(lengths[-ENDS:]) / share(lengths[:ENDS]), 2)


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
        progress.step(f"{size:,} bindings, with and without #.#: key lengths")
        tries = {}
        for label, extra in (("with #.#", (HASH_HASH,)), ("plain", ())):
            tries[label] = _matcher("trie", patterns, extra)
            reference = _matcher("reference", patterns, extra)
            checked += check_same(
                f"trie, {size} bindings {label}",
                sample,
                reference.match_many(sample),
                tries[label].match_many(sample),
            )
        del reference
        measured, ratios = _curves(tries, keys, p)
        entry: dict[str, Any] = {
            label: {"curve": {str(n): s for n, s in curve.items()}, "shape": _shape(curve)}
            for label, curve in measured.items()
        }
        entry["with/without by length"] = {str(n): round(r, 3) for n, r in ratios.items()}
        entry["bend"] = bend(ratios)
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
        for label in ("plain", "with #.#"):
            curve, shape = entry[label]["curve"], entry[label]["shape"]
            first, last = curve[min(curve, key=int)], curve[max(curve, key=int)]
            rows.append(
                [
                    int(size),
                    label,
                    first["median"],
                    last["median"],
                    last["mean"],
                    last["std"],
                    shape["us_per_word"],
                    shape["r2"],
                    entry["bend"] if label != "plain" else None,
                ]
            )
    return table(
        "Trie route time against key length (µs per route over the repetitions)",
        [
            "bindings",
            "set",
            "median, 1 word",
            "median, 10 words",
            "mean, 10 words",
            "std, 10 words",
            "µs per word (line)",
            "R² of the line",
            "bend of #.#",
        ],
        rows,
        "The line is fitted to the medians. Bend: route time with `#.#` over route time "
        "without (the median of the ratios of paired repetitions on the same keys), on the "
        f"{ENDS} longest lengths, divided by the same on the {ENDS} shortest; 1 means `#.#` "
        "costs the same share whatever the key length.",
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


def _verdict(bent: float) -> str:
    """Says 'does not bend' only when the measured bend is within `BEND_LIMIT`."""
    return "does not bend" if bent <= BEND_LIMIT else "BENDS in this run"


def _comparison(curves: dict[str, Any], sweep: dict[str, Any]) -> dict:
    biggest = max(curves, key=int)
    plain, hashed = curves[biggest]["plain"]["shape"], curves[biggest]["with #.#"]["shape"]
    bends = ", ".join(f"{entry['bend']} at {int(size):,}" for size, entry in curves.items())
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
                    f"line through the medians at {int(biggest):,} bindings: R² {plain['r2']}, "
                    f"{plain['us_per_word']} µs per word"
                ),
            ],
            [
                "with one `#.#` added",
                SEED["figures"][1][1],
                (
                    f"{_verdict(curves[biggest]['bend'])}: bend {bends} bindings "
                    f"(1 = no bend); R² {hashed['r2']} at {int(biggest):,}"
                ),
            ],
            ["route time vs bindings", SEED["figures"][2][1], growth],
        ],
    )


def plot(result: dict[str, Any], path: str) -> None:
    """Three panels: key length without and with `#.#`, and the bindings sweep."""
    from xroute.bench.experiments.figures import figure, save
    from xroute.pipeline.figures import legend_outside

    fig, axes = figure(3, "Experiment 1: trie anatomy (seeds 000/003)")
    for ax, label in zip(axes[:2], ("plain", "with #.#")):
        for size, entry in result["curves"].items():
            curve = entry[label]["curve"]
            lengths = sorted(int(n) for n in curve)
            middle = [curve[str(n)]["median"] for n in lengths]
            low = [curve[str(n)]["p25"] for n in lengths]
            high = [curve[str(n)]["p75"] for n in lengths]
            ax.plot(lengths, middle, marker="o", label=f"{int(size):,} bindings")
            ax.fill_between(lengths, low, high, alpha=0.2)
        ax.set_title("seed-mix bindings" + (" + one #.#" if label != "plain" else ""))
        ax.set_xlabel("routing key length (words)")
        ax.set_ylabel("µs per route (median, 25-75% band)")
        legend_outside(ax)
    ax = axes[2]
    for name, values in result["sweep"]["series"].items():
        sizes = sorted(int(s) for s in values if values[s] is not None)
        ax.plot(sizes, [values[str(s)] for s in sizes], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(f"key length {result['sweep']['length']}")
    ax.set_xlabel("bindings")
    ax.set_ylabel("µs per route")
    legend_outside(ax)
    save(fig, path)
