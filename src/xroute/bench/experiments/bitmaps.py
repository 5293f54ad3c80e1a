"""Experiment 3, seed 001 (OpenAMQ's "Rapid Message Matching" test program): inverted bitmaps.

Topics are five words drawn from the paper's five tables; 2,000 subscriptions are compiled
against 2,000 topics, then 1,000,000 messages, each one of those topics at random, are matched
and every matching subscription counted (the paper's hit counter). The paper gives no rule for
its subscriptions; ours put ``*`` at a level about half of the time and sometimes end in ``#``,
which gives about as many matches per message as the paper's 170M for 1M messages says.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any

import numpy as np

from xroute.bench.experiments.common import (
    CheckFailed,
    Context,
    check_same,
    seconds_of,
    table,
    traced_bytes,
)
from xroute.bench.experiments.peers import peer_rows
from xroute.engines import ENGINES, TopicMatcher

NUMBER = 3
KEY = "bitmaps"
TITLE = "Inverted bitmaps: OpenAMQ's matching test program"
WORD_TABLES = (
    ("gold", "oil", "pork", "chips", "bonds", "debt"),
    ("lon", "ny", "hk", "jo", "tk", "sg", "mo"),
    ("usd", "eur", "gbp", "jpy", "chy", "aud"),
    ("buy", "sell", "hold", "short", "long"),
    ("spot", "early", "late", "open", "close", "future"),
)
SEED = {
    "source": (
        "001, OpenAMQ Matching - Rapid Message Matching (iMatix, 2007), kernel/amq_test_matching.c"
    ),
    "setup": (
        "Topics of five words, one from each table (gold oil pork chips bonds debt / lon ny hk "
        "jo tk sg mo / usd eur gbp jpy chy aud / buy sell hold short long / spot early late "
        "open close future). 2,000 subscriptions compiled against 2,000 topics into inverted "
        "bitmaps, then 1,000,000 messages, each a random known topic, matched, every "
        "matching subscription's hit counter incremented. C on a 2 GHz workstation."
    ),
    "figures": [
        ["compile 2,000 subscriptions x 2,000 topics (4M comparisons)", "12 s"],
        ["match 1,000,000 messages (170M matches)", "26 s"],
        ["matches per second per GHz", "about 3M (170M / 26 s / 2 GHz = 3.27M)"],
    ],
}
SEED_GHZ, SEED_COMPILE_S, SEED_MATCH_S, SEED_MATCHES = 2.0, 12.0, 26.0, 170_000_000
STAR_SHARE = 0.49  # a level is '*' this often: with the '#' tails, about the paper's 170 matches
HASH_TAIL_SHARE = 0.10  # a subscription ends in '#' after one of its first four levels
RNG_SEED = 3000

PARAMETERS: dict[str, dict[str, Any]] = {
    "full": {
        "subscriptions": 2_000,
        "topics": 2_000,
        "messages": 1_000_000,
        "slow_sample": 10_000,
        "check_topics": 2_000,
    },
    "quick": {
        "subscriptions": 2_000,
        "topics": 2_000,
        "messages": 100_000,
        "slow_sample": 300,
        "check_topics": 200,
    },
    "tiny": {
        "subscriptions": 200,
        "topics": 200,
        "messages": 2_000,
        "slow_sample": 100,
        "check_topics": 200,
    },
}


def steps(scale: str) -> int:
    """How many progress steps `run` reports at this scale."""
    return 2 + len(_variants()) + 1


def topics(count: int, rng: random.Random) -> list[str]:
    """``count`` distinct five-word topics from the paper's tables."""
    every = [".".join(words) for words in itertools.product(*WORD_TABLES)]
    return rng.sample(every, min(count, len(every)))


def subscription(rng: random.Random) -> str:
    """One subscription: per level a table word or ``*``; sometimes cut short by a ``#``."""
    levels = [rng.choice(words) if rng.random() >= STAR_SHARE else "*" for words in WORD_TABLES]
    if rng.random() < HASH_TAIL_SHARE:
        levels = levels[: rng.randint(1, 4)] + ["#"]
    return ".".join(levels)


def _variants() -> list[tuple[str, str, bool | None, bool]]:
    """(label, engine, route cache, flat batch call) for each xroute row."""
    found: list[tuple[str, str, bool | None, bool]] = []
    for engine in sorted(ENGINES):
        if engine == "reference":
            continue
        found.append((engine, engine, None, False))
        if engine == "trie":
            found.append(("trie (no route cache)", "trie", False, False))
        if engine == "compiled":
            found.append(("compiled (match_many_ids + bincount)", "compiled", None, True))
    return found


def _build(engine: str, subscriptions: list[str], cache: bool | None = None) -> TopicMatcher:
    matcher = TopicMatcher(engine=engine, cache=cache)
    for number, pattern in enumerate(subscriptions):
        matcher.add(pattern, number)  # destinations are subscription numbers, as in the paper
    return matcher


def _compile(
    engine: str, subscriptions: list[str], known: list[str], cache: bool | None
) -> TopicMatcher:
    """Build, then route every known topic once: the paper's compile step."""
    matcher = _build(engine, subscriptions, cache)
    matcher.match_many(known)
    return matcher


def _match_each(matcher: TopicMatcher, messages: list[str]) -> int:
    """The paper's message loop: match, then add one to each matching subscription's hit
    counter (Counter.update counts in C); the total number of hits."""
    # hot: `xroute bench seeds --only 3`, every set-returning engine
    match = matcher.match
    hits: Counter[int] = Counter()
    count = hits.update
    for topic in messages:
        count(match(topic))
    return hits.total()


def _match_flat(matcher: TopicMatcher, messages: list[str], subscriptions: int) -> int:
    _, ids = matcher.match_many_ids(messages)
    per_subscription = np.bincount(ids, minlength=subscriptions)  # the paper's hit counters
    return int(per_subscription.sum())


def run(context: Context) -> dict[str, Any]:
    """Measure; the context's clock gives matches per second per GHz (None when unknown)."""
    p = PARAMETERS[context.scale]
    progress = context.progress
    ghz = context.ghz
    rng = random.Random(RNG_SEED)
    progress.step("generating topics, subscriptions and messages")
    known = topics(p["topics"], rng)
    subscriptions = [subscription(rng) for _ in range(p["subscriptions"])]
    picks = np.random.default_rng(RNG_SEED).integers(0, len(known), p["messages"])
    messages = [known[i] for i in picks.tolist()]
    sample = messages[: p["slow_sample"]]
    scale_up = len(messages) / len(sample)

    progress.step("reference answers")
    # The reference tests every subscription (about 1.5 µs each): it answers the checked
    # topics and those of the sample, which are all the topics in a full run.
    reference = _build("reference", subscriptions, cache=False)  # timed below: no route cache
    checked = list(dict.fromkeys(known[: p["check_topics"]] + sample))
    truth = reference.match_many(checked)
    truth_of = dict(zip(checked, truth))
    naive_seconds, _ = seconds_of(lambda: _match_each(reference, sample))
    expected_hits = sum(len(truth_of[t]) for t in messages) if len(truth_of) == len(known) else None

    rows: list[dict[str, Any]] = []
    for label, engine, cache, flat in _variants():
        progress.step(f"{label}: compile and {len(messages):,} messages")
        compile_seconds, matcher = seconds_of(lambda: _compile(engine, subscriptions, known, cache))
        check_same(f"engine {label}", checked, truth, matcher.match_many(checked))
        if flat:
            seconds, hits = seconds_of(lambda: _match_flat(matcher, messages, len(subscriptions)))
        else:
            seconds, hits = seconds_of(lambda: _match_each(matcher, messages))
        if expected_hits is None:
            expected_hits = hits  # every later engine must agree with the first
        if hits != expected_hits:
            raise CheckFailed("hit total over all messages", label, expected_hits, hits)
        memory = None
        if not flat:
            memory, _ = traced_bytes(lambda: _compile(engine, subscriptions, known, cache))
        rows.append(
            _row(
                label, "xroute", compile_seconds, seconds, hits, ghz, False, memory, matcher.cached
            )
        )
    rows.append(
        _row(
            "naive (reference engine)",
            "naive",
            None,
            naive_seconds * scale_up,
            expected_hits,
            ghz,
            scale_up > 1,
            None,
            False,
        )
    )

    progress.step("peers on a sample")
    bound = [(pattern, number) for number, pattern in enumerate(subscriptions)]
    sample_truth = [truth_of[t] for t in sample]
    for peer in peer_rows(bound, sample, sample_truth):
        seconds = peer["us_per_route"] * 1e-6 * len(messages) if peer["us_per_route"] else None
        row = _row(peer["peer"], "peer", None, seconds, expected_hits, ghz, True, None, False)
        row.update(wrong=peer["wrong"], wrong_of=peer["keys"], bindings=peer["bindings"])
        rows.append(row)

    return {
        "setup": {
            "topics": f"{len(known):,} distinct, five words from the paper's tables",
            "subscriptions": f"{len(subscriptions):,}: each level * with probability "
            f"{STAR_SHARE}, else a table word; {HASH_TAIL_SHARE:.0%} end in # after 1-4 levels",
            "messages": f"{len(messages):,}, each a known topic drawn uniformly",
            "matches per message": round(expected_hits / len(messages), 1),
            "compile": "add every subscription, then route each known topic once "
            "(TopicMatcher.match_many)",
            "match": "one TopicMatcher.match per message, then each matching subscription's "
            "hit counter incremented (collections.Counter.update), as the paper's loop does; "
            "compiled (flat): one match_many_ids call, hit counters by numpy.bincount",
            "clock": f"{ghz} GHz" if ghz else "unknown: matches per second per GHz not computed",
        },
        "scaling": [
            (
                f"The naive matcher and the peers were timed on {len(sample):,} messages and "
                f"scaled "
                f"by {scale_up:g}."
            )
        ]
        if scale_up > 1
        else [],
        "ghz": ghz,
        "matches": expected_hits,
        "messages": len(messages),
        "rows": rows,
        "checks": {
            "topics checked against reference": len(checked),
            "hit totals equal (every engine, and the reference when it saw every topic)": True,
        },
        "comparison": _comparison(rows, ghz, expected_hits, len(messages)),
        "tables": [_table(rows)],
    }


def _row(
    name: str,
    kind: str,
    compile_s: float | None,
    match_s: float | None,
    hits: int,
    ghz: float | None,
    scaled: bool,
    memory: int | None,
    cache: bool,
) -> dict[str, Any]:
    rate = hits / match_s if match_s else None
    return {
        "name": name,
        "kind": kind,
        "compile_seconds": compile_s,
        "match_seconds": match_s,
        "matches_per_second": rate,
        "matches_per_second_per_ghz": rate / ghz if rate and ghz else None,
        "scaled": scaled,
        "memory_bytes": memory,
        "cache": cache,
    }


def _table(rows: list[dict[str, Any]]) -> dict:
    def r(value: float | None, scale: float = 1.0) -> float | None:
        return None if value is None else value / scale

    return table(
        "Compile and match, per matcher",
        [
            "matcher",
            "compile s",
            "match s",
            "M matches/s",
            "M matches/s/GHz",
            "memory MB",
            "route cache",
            "wrong routes",
        ],
        [
            [
                row["name"] + (" *" if row["scaled"] else ""),
                r(row["compile_seconds"]),
                r(row["match_seconds"]),
                r(row["matches_per_second"], 1e6),
                r(row["matches_per_second_per_ghz"], 1e6),
                r(row["memory_bytes"], 2**20),
                "on" if row["cache"] else "off",
                f"{row['wrong']} of {row['wrong_of']}" if "wrong" in row else 0,
            ]
            for row in rows
        ],
        "* timed on a sample of messages and scaled. A match is one (message, subscription) pair.",
    )


def _comparison(rows: list[dict[str, Any]], ghz: float | None, hits: int, messages: int) -> dict:
    bitmap = next((row for row in rows if row["name"] == "bitmap"), None)
    best = max(
        (row for row in rows if row["kind"] == "xroute"), key=lambda row: row["matches_per_second"]
    )
    per_million = 1_000_000 / messages

    def per_ghz(row: dict[str, Any] | None) -> str:
        if row is None or row["matches_per_second_per_ghz"] is None:
            return "unknown clock" if row else "no bitmap engine"
        return f"{row['matches_per_second_per_ghz'] / 1e6:.2f}M ({row['name']})"

    return table(
        "The seed beside ours",
        ["measure", "seed (C, 2 GHz)", "xroute (this run)"],
        [
            [
                "compile 2,000 x 2,000",
                "12 s",
                f"{bitmap['compile_seconds']:.3g} s (bitmap engine)" if bitmap else "n/a",
            ],
            [
                "match 1M messages",
                "26 s",
                f"{bitmap['match_seconds'] * per_million:.3g} s (bitmap engine)"
                if bitmap
                else "n/a",
            ],
            ["matches per message", 170, round(hits / messages, 1)],
            ["matches/s/GHz", "3M", per_ghz(bitmap)],
            ["best matches/s/GHz", "3M", per_ghz(best)],
        ],
        "match seconds are per 1,000,000 messages (scaled if this run sent fewer).",
    )


def plot(result: dict[str, Any], path: str) -> None:
    """Match throughput per GHz beside the paper's 3M, and compile times beside its 12 s."""
    from xroute.bench.experiments.figures import figure, marked_barh, save

    fig, (rate, compile_ax) = figure(2, "Experiment 3: inverted bitmaps (seed 001, OpenAMQ)")
    rows = [row for row in result["rows"] if row["matches_per_second"]]
    per_ghz = result["ghz"] is not None
    marked_barh(
        rate, rows,
        [(row["matches_per_second_per_ghz"] if per_ghz else row["matches_per_second"]) / 1e6
         for row in rows],
        ["tab:blue" if row["kind"] == "xroute" else "tab:orange" for row in rows],
        extra=[("seed: OpenAMQ (C)",
                SEED_MATCHES / SEED_MATCH_S / (SEED_GHZ if per_ghz else 1) / 1e6, "tab:grey")],
        kinds={"xroute": "tab:blue", "naive and peers": "tab:orange", "the seed": "tab:grey"},
    )
    rate.set_xscale("log")
    rate.set_xlabel("million matches per second" + (" per GHz" if per_ghz else " (clock unknown)"))
    rate.invert_yaxis()
    compiled = [row for row in result["rows"] if row["compile_seconds"] is not None]
    compile_ax.barh(
        [row["name"] for row in compiled] + ["seed: OpenAMQ (C)"],
        [row["compile_seconds"] for row in compiled] + [SEED_COMPILE_S],
        color=["tab:blue"] * len(compiled) + ["tab:grey"],
    )
    compile_ax.set_xscale("log")
    compile_ax.set_xlabel("seconds to compile subscriptions x topics")
    compile_ax.invert_yaxis()
    save(fig, path)
