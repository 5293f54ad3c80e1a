"""Experiment 2, seed 002 (RabbitMQ's 2011 study "Very fast and scalable topic routing"): a trie
against a DFA against a naive per-pattern matcher, 2,000 patterns and 1,000,000 topics.

Every registered xroute engine routes the same topics through `TopicMatcher.match_many` as a
user would call it (each engine with its own route-cache default), the ``compiled`` engine also
through its flat batch call; the naive matcher is xroute's ``reference`` engine (each pattern
tested in turn, as the blog's naive baseline). Slow matchers (the naive one and the peers) are
timed on a sample and scaled to the full topic count; the report says so. Memory is the
Python heap held after building and routing a warm-up sample, measured on a separate build.
"""

from __future__ import annotations

from typing import Any

from xroute.bench.experiments.common import (
    CheckFailed,
    Context,
    check_same,
    seconds_of,
    table,
    traced_bytes,
)
from xroute.bench.experiments.peers import peer_memory, peer_rows
from xroute.bench.workload import seed_keys, seed_patterns
from xroute.engines import ENGINES, TopicMatcher

NUMBER = 2
KEY = "trie_dfa"
TITLE = "Trie versus DFA versus naive: 2,000 patterns, 1,000,000 topics"
SEED = {
    "source": "002, RabbitMQ blog: Very fast and scalable topic routing, parts 1 and 2 (2010-2011)",
    "setup": (
        "2,000 binding patterns (10% of words `*`, 1% `#`) against 1,000,000 topics, in "
        "Erlang on a 2.3 GHz machine: the trie, the DFA variants they built, and a naive "
        "matcher testing every pattern. The DFA was the fastest idea on paper but cost more "
        "memory and a rebuild on every binding change; RabbitMQ kept the trie."
    ),
    "figures": [
        ["trie", "11.7 s"],
        ["best DFA", "15.2 s"],
        ["naive (every pattern)", "about 15 times the trie (about 175 s)"],
        ["machine", "2.3 GHz"],
    ],
}
SEED_SECONDS = {"trie": 11.7, "dfa": 15.2, "naive": 11.7 * 15}
SHARES = (0.89, 0.10)  # word, '*'; '#' takes the remaining 1%
PATTERNS, PATTERN_SEED, TOPIC_SEED = 2_000, 2000, 2001
CHUNK = 100_000  # topics per match_many call, so a million results never sit in memory at once

PARAMETERS: dict[str, dict[str, Any]] = {
    "full": {"topics": 1_000_000, "check": 2_000, "slow_sample": 10_000, "memory_keys": 20_000},
    "quick": {"topics": 100_000, "check": 300, "slow_sample": 1_000, "memory_keys": 5_000},
    "tiny": {"topics": 3_000, "check": 50, "slow_sample": 100, "memory_keys": 300},
}


def engine_names() -> list[str]:
    """Every registered engine but the reference (which is the naive matcher here)."""
    return [name for name in sorted(ENGINES) if name != "reference"]


def steps(scale: str) -> int:
    """How many progress steps `run` reports at this scale."""
    return 3 + 2 * len(engine_names()) + 2


def _build(engine: str, patterns: list[str], cache: bool | None = None) -> TopicMatcher:
    matcher = TopicMatcher(engine=engine, cache=cache)
    for number, pattern in enumerate(patterns):
        matcher.add(pattern, f"q{number}")
    return matcher


def _route_all(matcher: TopicMatcher, topics: list[str]) -> int:
    """match_many over all topics in chunks; the number of (topic, queue) deliveries."""
    delivered = 0
    for start in range(0, len(topics), CHUNK):
        delivered += sum(map(len, matcher.match_many(topics[start : start + CHUNK])))
    return delivered


def _route_all_ids(matcher: TopicMatcher, topics: list[str]) -> int:
    delivered = 0
    for start in range(0, len(topics), CHUNK):
        _, ids = matcher.match_many_ids(topics[start : start + CHUNK])
        delivered += len(ids)
    return delivered


def run(context: Context) -> dict[str, Any]:
    """Measure; return the experiment's result (JSON values only)."""
    p = PARAMETERS[context.scale]
    progress = context.progress
    progress.step("generating patterns and topics")
    patterns = seed_patterns(PATTERNS, seed=PATTERN_SEED, shares=SHARES)
    topics = seed_keys(patterns, p["topics"], seed=TOPIC_SEED)
    sample = topics[: p["slow_sample"]]
    scale_up = len(topics) / len(sample)

    progress.step("naive matcher (reference engine) on a sample")
    naive = _build("reference", patterns, cache=False)
    naive_seconds, sample_truth = seconds_of(lambda: naive.match_many(sample))
    check_keys, truth = sample[: p["check"]], sample_truth[: p["check"]]
    naive_memory, _ = traced_bytes(lambda: _build("reference", patterns))

    rows: list[dict[str, Any]] = []
    delivered_by: dict[str, int] = {}
    variants: list[tuple[str, str, bool | None, bool]] = []
    for engine in engine_names():
        variants.append((engine, engine, None, False))
        if engine == "trie":
            variants.append(("trie (no route cache)", "trie", False, False))
        if engine == "compiled":
            variants.append(("compiled (match_many_ids)", "compiled", None, True))
    for label, engine, cache, flat in variants:
        progress.step(f"{label}: {len(topics):,} topics")
        build_seconds, matcher = seconds_of(lambda: _build(engine, patterns, cache))
        check_same(f"engine {label}", check_keys, truth, matcher.match_many(check_keys))
        route = _route_all_ids if flat else _route_all
        seconds, delivered = seconds_of(lambda: route(matcher, topics))
        delivered_by[label] = delivered
        memory = None
        if not flat and cache is None:
            progress.step(f"{label}: memory")
            warm = topics[: p["memory_keys"]]
            memory, _ = traced_bytes(lambda: _route_kept(_build(engine, patterns, cache), warm))
        rows.append(
            {
                "name": label,
                "kind": "xroute",
                "seconds": seconds,
                "scaled": False,
                "build_seconds": build_seconds,
                "memory_bytes": memory,
                "cache": matcher.cached,
                "stats": _plain(matcher.stats()),
            }
        )
    if len(set(delivered_by.values())) > 1:
        raise CheckFailed(
            "deliveries over all topics", "every engine", delivered_by, set(delivered_by.values())
        )
    rows.append(
        {
            "name": "naive (reference engine)",
            "kind": "naive",
            "seconds": naive_seconds * scale_up,
            "scaled": scale_up > 1,
            "build_seconds": None,
            "memory_bytes": naive_memory,
            "cache": False,
        }
    )

    progress.step("peers on a sample")
    bound = [(pattern, f"q{n}") for n, pattern in enumerate(patterns)]
    memories = peer_memory(bound, sample[:20])  # first: kombu caches its regexes class-wide
    peer_results = peer_rows(bound, sample, sample_truth)
    for row in peer_results:
        rows.append(
            {
                "name": row["peer"],
                "kind": "peer",
                "seconds": row["us_per_route"] * 1e-6 * len(topics)
                if row["us_per_route"]
                else None,
                "scaled": True,
                "build_seconds": None,
                "memory_bytes": memories.get(row["peer"]),
                "cache": False,
                "wrong": row["wrong"],
                "wrong_of": row["keys"],
                "bindings": row["bindings"],
            }
        )

    trie_seconds = next(r["seconds"] for r in rows if r["name"] == "trie (no route cache)")
    for row in rows:
        row["times_trie"] = round(row["seconds"] / trie_seconds, 2) if row["seconds"] else None
    return {
        "setup": {
            "patterns": f"{PATTERNS:,}, 1 to 8 parts, words {SHARES[0]:.0%}, * {SHARES[1]:.0%}, "
            f"# {1 - sum(SHARES):.0%} (xroute.bench.workload.seed_patterns)",
            "topics": f"{len(topics):,}, each made from a random pattern with wildcards replaced "
            f"by random words ({len(set(topics)):,} distinct)",
            "timed call": "TopicMatcher.match_many in chunks of 100,000 (validation included)",
            "checked": f"every engine equals the reference on the first {len(check_keys):,} topics",
            "memory": f"tracemalloc, after building and routing {p['memory_keys']:,} topics",
        },
        "scaling": [
            (
                f"The naive matcher and the peers were timed on {len(sample):,} topics and scaled "
                f"by {scale_up:g} to {len(topics):,}."
            )
        ]
        if scale_up > 1
        else [],
        "rows": rows,
        "topic_count": len(topics),
        "deliveries": next(iter(delivered_by.values())),
        "checks": {"topics checked against reference": len(check_keys)},
        "comparison": _comparison(rows, len(topics)),
        "tables": [_table(rows, len(topics))],
    }


def _route_kept(matcher: TopicMatcher, keys: list[str]) -> TopicMatcher:
    matcher.match_many(keys)
    return matcher  # returned so that what it built is still held when memory is read


def _plain(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stats.items() if isinstance(v, (int, float, str, bool)) or v is None}


def _table(rows: list[dict[str, Any]], topics: int) -> dict:
    return table(
        f"{topics:,} topics against {PATTERNS:,} patterns",
        [
            "matcher",
            "seconds",
            "× trie",
            "µs per topic",
            "build s",
            "memory MB",
            "route cache",
            "wrong routes",
        ],
        [
            [
                r["name"] + (" *" if r["scaled"] else ""),
                r["seconds"],
                r["times_trie"],
                r["seconds"] / topics * 1e6 if r["seconds"] else None,
                r["build_seconds"],
                r["memory_bytes"] / 2**20 if r["memory_bytes"] is not None else None,
                "on" if r["cache"] else "off",
                f"{r['wrong']} of {r['wrong_of']}" if "wrong" in r else 0,
            ]
            for r in rows
        ],
        "* timed on a sample and scaled to the full topic count. × trie is against the trie "
        "without route cache, the structure the blog measured.",
    )


def _comparison(rows: list[dict[str, Any]], topics: int) -> dict:
    by = {r["name"]: r for r in rows}
    trie = by["trie (no route cache)"]
    dfa = by.get("dfa")
    naive = by["naive (reference engine)"]
    fastest = min((r for r in rows if r["kind"] == "xroute"), key=lambda r: r["seconds"])
    return table(
        "The seed beside ours",
        ["measure", "seed (Erlang, 2.3 GHz)", "xroute (this run)"],
        [
            ["trie, seconds", "11.7 s", f"{trie['seconds'] * 1_000_000 / topics:.3g} s"],
            [
                "DFA, seconds",
                "15.2 s",
                f"{dfa['seconds'] * 1_000_000 / topics:.3g} s" if dfa else None,
            ],
            ["DFA / trie", round(15.2 / 11.7, 2), dfa["times_trie"] if dfa else None],
            ["naive / trie", "about 15", naive["times_trie"]],
            [
                "fastest",
                "trie",
                f"{fastest['name']} ({fastest['seconds'] * 1_000_000 / topics:.3g} s)",
            ],
        ],
        "seconds are per 1,000,000 topics (scaled if this run routed fewer).",
    )


def plot(result: dict[str, Any], path: str) -> None:
    """Seconds per 1M topics per matcher, the seed's three bars beside, and memory."""
    from xroute.bench.experiments.figures import figure, marked_barh, save

    fig, (ax, mem) = figure(2, "Experiment 2: trie vs DFA vs naive (seed 002)")
    rows = [r for r in result["rows"] if r["seconds"]]
    scale = 1_000_000 / result["topic_count"]
    marked_barh(
        ax, rows, [r["seconds"] * scale for r in rows],
        ["tab:blue" if r["kind"] == "xroute" else "tab:orange" for r in rows],
        extra=[("seed: trie", 11.7, "tab:grey"), ("seed: best DFA", 15.2, "tab:grey"),
               ("seed: naive", 11.7 * 15, "tab:grey")],
        kinds={"xroute": "tab:blue", "naive and peers": "tab:orange", "the seed": "tab:grey"},
    )
    ax.set_xscale("log")
    ax.set_xlabel("seconds per 1,000,000 topics (log)")
    ax.invert_yaxis()
    ax.set_title("time per matcher")
    with_memory = [r for r in result["rows"] if r.get("memory_bytes")]
    mem.barh([r["name"] for r in with_memory], [r["memory_bytes"] / 2**20 for r in with_memory])
    mem.set_xlabel("MB held (tracemalloc)")
    mem.invert_yaxis()
    mem.set_title("memory after build + warm-up")
    save(fig, path)
