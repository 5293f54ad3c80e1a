"""``xroute bench engines --quick`` on tiny sizes: the harness runs, checks its answers and
writes sane results.json and PNGs. Timings are never asserted."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from xroute.bench.peers import build_peer, exact_regex, mqtt_filter
from xroute.cli import cli
from xroute.core.keys import split_words
from xroute.engines.reference import pattern_matches


def test_bench_engines_quick_writes_results_and_plots(tmp_path):
    out = tmp_path / "engines"
    result = CliRunner().invoke(
        cli, ["bench", "engines", "--quick", "--sizes", "40,120", "--out", str(out),
              "--engines", "trie,dfa,compiled,auto,bitmap+cache"],
    )
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    assert [entry["bindings"] for entry in results["sizes"]] == [41, 121]  # plus '#.#'
    for entry in results["sizes"]:
        assert set(entry["engines"]) == {"trie", "dfa", "compiled", "auto", "bitmap+cache"}
        for figures in entry["engines"].values():
            assert figures["warm_us"]["median"] >= 0 and figures["warm_us"]["calls"] > 0
            assert figures["match_many_ids_keys_per_s"] > 0 and figures["memory_bytes"] > 0
            assert set(figures["warm_us_by_length"]) == {str(n) for n in range(1, 11)}
        assert entry["peers"]["regex"]["wrong_routes"] == 0  # the exact regex peer is exact
        assert entry["peers"]["mqtt"]["skipped_bindings"] > 0  # at least '#.#'
        assert entry["peers"]["kombu"]["checked_keys"] > 0
    assert results["meta"]["command"].startswith("xroute bench engines")
    assert any(t["target"].startswith("dfa cells") for t in results["targets"])
    for name in ("latency_by_bindings", "latency_by_key_length", "batch_throughput", "memory"):
        png = out / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_engines_refuses_bad_sizes(tmp_path):
    result = CliRunner().invoke(cli, ["bench", "engines", "--sizes", "ten", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "binding counts" in result.output


@pytest.mark.parametrize(
    "pattern,key",
    [("a.#", "a"), ("#.b", "b"), ("a.#.b", "a.b"), ("*", ""), ("a..b", "a..b"), ("#", ""),
     ("*.*", "a."), ("a.*", "a.b.c"), ("a.b", "a.b"), ("#.#", "x.y.z"), ("", ""), ("", "a")],
)
def test_exact_regex_peer_agrees_with_the_definition(pattern, key):
    peer, _ = build_peer("regex", [(pattern, "q")])
    expected = pattern_matches(split_words(pattern), split_words(key))
    assert (peer.match(key) == {"q"}) is expected
    assert bool(exact_regex(pattern).fullmatch("." + key if key else "")) is expected


def test_mqtt_translation_skips_what_mqtt_cannot_say():
    assert mqtt_filter("a.*.#") == "a/+/#"
    assert mqtt_filter("#.a") is None and mqtt_filter("a/b") is None and mqtt_filter("a#") is None
    peer, skipped = build_peer("mqtt", [("a.*", "q1"), ("#.b", "q2"), ("a.#", "q3")])
    assert skipped == 1
    assert peer.match("a.b") == {"q1", "q3"}


def test_bench_engines_paths_measures_every_path_and_writes_plots(tmp_path):
    out = tmp_path / "paths"
    result = CliRunner().invoke(
        cli, ["bench", "engines", "--paths", "--sizes", "300", "--out", str(out),
              "--engines", "dfa,compiled,auto"],
    )
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    from xroute.bench.paths import PATHS, WORKLOADS

    (entry,) = results["sizes"]
    for figures in entry["engines"].values():
        for workload in WORKLOADS:
            assert set(figures[workload]) == set(PATHS)
            assert all(rate > 0 for rate in figures[workload].values())
    assert entry["peers"]["regex"]["wrong_routes"] == 0
    assert len(results["gaps"]) == len(PATHS) * len(WORKLOADS)
    assert {c["engine"] for c in results["churn"]} == {"dfa", "compiled", "auto"}
    assert all(c["after_over_fresh"] > 0 for c in results["churn"] if "after_over_fresh" in c)
    for name in ("paths_repeat", "paths_unique", "auto_vs_best", "churn"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_machine_note_says_only_what_was_measured():
    import os
    import re

    from xroute.bench.experiments.machine import cpu_model, machine_note

    note = machine_note()
    assert note.startswith(f"{os.cpu_count()} cores, {cpu_model()}, load average ")
    assert re.search(r"load average [\d.]+ / [\d.]+ / [\d.]+$", note), note
