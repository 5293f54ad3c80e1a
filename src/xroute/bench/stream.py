"""``xroute bench stream``: the streaming pipeline's sustained throughput with a backlog, and
its end-to-end latency at half that rate, beside the batch job on the same files.

The workload is `xroute.bench.pipeline`'s: the seed mix of binding keys on one topic exchange,
bound round robin to ``queues`` queues (a key reaches nearly every queue, so the fan-out is
about ``queues`` deliveries per message), keys drawn from the same patterns.

Measured in one Spark session (``local[2]``), in this order:
1. **Backlog.** ``files`` Parquet files are in SOURCE before the stream starts; it runs with
   ``--available-now`` and ``max_files`` files per batch. Sustained rate: the messages of every
   batch but the first (which pays for worker start and compilation) over the time from the
   first batch's commit to the last one's.
2. **The peer, in the same run:** the batch job (`run_pipeline`) over the same files.
3. **Latency.** A fresh stream; a writer lands one file of ``latency_file`` messages at a
   steady rate of half the sustained rate (messages/s), for ``latency_seconds``. Latency of a
   file: from its rename into SOURCE to its batch's marker written (its deliveries committed).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from xroute.bench.experiments.machine import machine_note
from xroute.bench.pipeline import EXCHANGE, Workload, definitions, machine
from xroute.bench.workload import seed_keys


@dataclass(frozen=True)
class StreamBench:
    """The sizes of one run."""

    files: int = 12
    per_file: int = 50_000
    max_files: int = 3
    bindings: int = 10_000
    queues: int = 10
    latency_file: int = 20_000
    latency_seconds: float = 40.0
    master: str = "local[2]"


def run_benchmark(
    bench: StreamBench, out: Path, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Run the three measurements; write ``results.json`` and ``stream.png`` into ``out``."""
    from xroute.pipeline.stream_commit import committed_batches
    from xroute.spark.job import PipelineOptions, run_pipeline
    from xroute.spark.session import start_spark
    from xroute.spark.stream import StreamOptions, run_stream

    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="xroute-bench-stream-"))
    results: dict[str, Any] = {
        "setup": asdict(bench),
        "command": f"xroute bench stream --files {bench.files} --per-file {bench.per_file} "
        f"--max-files {bench.max_files} --latency-seconds {bench.latency_seconds:g}",
        "machine": machine_note(),  # measured: cores, CPU, load average at the start
        "machine_before": machine(),
    }
    try:
        workload = Workload(bench.files * bench.per_file, bench.bindings, bench.queues)
        spec = definitions(workload)
        defs = work / "definitions.json"
        defs.write_text(json.dumps(spec))
        patterns = [b["routing_key"] for b in spec["bindings"]]
        backlog = work / "backlog"
        backlog.mkdir()
        say(f"writing {bench.files} files of {bench.per_file:,} keys")
        for i in range(bench.files):
            _land(backlog, f"f{i:04d}.parquet", seed_keys(patterns, bench.per_file, seed=i + 1))
        started = time.perf_counter()
        spark = start_spark(bench.master)
        results["session_start_s"] = round(time.perf_counter() - started, 1)

        say(f"1. backlog: --available-now, {bench.max_files} files per batch")
        options = StreamOptions(
            definitions=str(defs),
            source=str(backlog),
            out=str(work / "out-backlog"),
            checkpoint=str(work / "ckpt-backlog"),
            exchange=EXCHANGE,
            max_files=bench.max_files,
            available_now=True,
        )
        run_stream(spark, options, say=say)
        markers = list(committed_batches(options.out).values())
        results["backlog"] = _sustained(markers)
        results["deliveries_per_message"] = round(
            sum(m["counts"]["deliveries"] for m in markers)
            / max(sum(m["counts"]["input"] for m in markers), 1),
            2,
        )
        rate = results["backlog"]["messages_per_s"]
        say(f"   sustained {rate:,.0f} messages/s")

        say("2. the batch job over the same files (peer)")
        mark = time.perf_counter()
        summary = run_pipeline(
            spark,
            PipelineOptions(
                definitions=str(defs),
                messages=str(backlog),
                out=str(work / "out-batch"),
                exchange=EXCHANGE,
            ),
        )
        results["batch_job"] = {
            "messages": summary["counts"]["input"],
            "wall_time_s": round(time.perf_counter() - mark, 3),
            "messages_per_s": summary["messages_per_s"],
            "deliveries": summary["counts"]["deliveries"],
        }
        if summary["counts"]["deliveries"] != sum(m["counts"]["deliveries"] for m in markers):
            raise AssertionError("the stream and the batch job disagree on the deliveries")
        results["stream_vs_batch_job"] = round(rate / summary["messages_per_s"], 3)

        arrival = rate / 2
        say(f"3. latency: files of {bench.latency_file:,} messages at {arrival:,.0f} messages/s")
        results["latency"] = _latency(
            spark, bench, work, defs, patterns, arrival, run_stream, StreamOptions, say
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["machine_after"] = machine()
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    plot(results, out / "stream.png")
    return results


def _land(folder: Path, name: str, keys: list[str]) -> float:
    """Write a file whole and rename it into ``folder``; when it landed (``time.time``)."""
    partial = folder / f".{name}.tmp"
    pq.write_table(pa.table({"routing_key": pa.array(keys, pa.string())}), partial)
    os.replace(partial, folder / name)
    return time.time()


def _sustained(markers: list[dict[str, Any]]) -> dict[str, Any]:
    """Messages/s and delivery rows/s over the batches after the first (warm-up) one."""
    if len(markers) < 2:
        raise AssertionError("the backlog made fewer than 2 batches: give more files")
    steady = markers[1:]
    seconds = steady[-1]["committed_at"] - markers[0]["committed_at"]
    messages = sum(m["counts"]["input"] for m in steady)
    deliveries = sum(m["counts"]["deliveries"] for m in steady)
    return {
        "batches": len(markers),
        "first_batch_s": markers[0]["seconds"],
        "steady_batches": len(steady),
        "messages": messages,
        "seconds": round(seconds, 3),
        "messages_per_s": round(messages / seconds, 1),
        "delivery_rows_per_s": round(deliveries / seconds, 1),
        "batch_seconds": [m["seconds"] for m in markers],
    }


def _latency(
    spark: Any,
    bench: StreamBench,
    work: Path,
    defs: Path,
    patterns: list[str],
    arrival: float,
    run_stream: Any,
    options_class: Any,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Land files at ``arrival`` messages/s while a stream runs; each file's latency."""
    from xroute.pipeline.stream_commit import committed_batches

    source = work / "live"
    source.mkdir()
    every = bench.latency_file / arrival
    count = max(2, int(bench.latency_seconds / every))
    keys = [seed_keys(patterns, bench.latency_file, seed=1000 + i) for i in range(count + 1)]
    landed: dict[str, float] = {}
    stop = threading.Event()
    # One file first: the schema comes from it, and its batch warms the stream up (not timed).
    _land(source, "warm.parquet", keys[0])
    options = options_class(
        definitions=str(defs),
        source=str(source),
        out=str(work / "out-live"),
        checkpoint=str(work / "ckpt-live"),
        exchange=EXCHANGE,
        max_files=1000,
    )

    def writer() -> None:
        out = Path(options.out) / "_batches"
        while not (out / "0.json").exists():
            time.sleep(0.05)
        start = time.time()
        for i in range(count):
            time.sleep(max(0.0, start + i * every - time.time()))
            name = f"f{i:04d}.parquet"
            landed[name] = _land(source, name, keys[i + 1])
        while sum(len(m["inputs"]) for m in committed_batches(options.out).values()) < count + 1:
            time.sleep(0.1)
        stop.set()  # the measurement is done: the stream stops after this batch

    thread = threading.Thread(target=writer, name="xroute-bench-writer", daemon=True)
    thread.start()
    run_stream(spark, options, say=say, stop=stop)
    thread.join(60)
    latencies = []
    for marker in committed_batches(options.out).values():
        for uri in marker["inputs"]:
            name = uri.rsplit("/", 1)[-1]
            if name in landed:
                latencies.append(marker["committed_at"] - landed[name])
    if len(latencies) != count:
        raise AssertionError(f"{count} files landed, {len(latencies)} were committed")
    latencies.sort()
    return {
        "files": count,
        "messages_per_file": bench.latency_file,
        "arrival_messages_per_s": round(arrival, 1),
        "file_every_s": round(every, 3),
        "p50_s": round(statistics.median(latencies), 3),
        "p99_s": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))], 3),
        "max_s": round(latencies[-1], 3),
        "latencies_s": [round(x, 3) for x in latencies],
        "note": "p99 of this few files is nearly their maximum",
    }


def plot(results: dict[str, Any], path: Path) -> None:
    """Throughput of the stream beside the batch job; the latency distribution."""
    from xroute.pipeline.figures import legend_outside, pyplot, save

    plt = pyplot()

    figure, (rates, latency) = plt.subplots(1, 2, figsize=(13, 5))
    labels = ["stream, backlog\n(steady batches)", "batch job,\nsame files"]
    values = [results["backlog"]["messages_per_s"], results["batch_job"]["messages_per_s"]]
    bars = rates.bar(labels, values, color=["#47a", "#a74"])
    for bar, value in zip(bars, values):
        rates.annotate(
            f"{value:,.0f}/s", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom"
        )
    rates.set_ylabel("messages per second")
    rates.set_title(
        f"{results['setup']['files']} files x {results['setup']['per_file']:,} messages, "
        f"{results['deliveries_per_message']} deliveries/message; stream/batch = "
        f"{results['stream_vs_batch_job']:.2f}"
    )
    lat = results["latency"]
    latency.hist(lat["latencies_s"], bins=20, color="#85c")
    for name, color in (("p50_s", "#3a7"), ("p99_s", "#c33")):
        label = f"{name[:3]} {lat[name]:.2f} s"
        latency.axvline(lat[name], color=color, linestyle="--", label=label)
    latency.set_xlabel("seconds from a file landing to its deliveries committed")
    latency.set_ylabel("files")
    latency.set_title(
        f"{lat['files']} files of {lat['messages_per_file']:,} at "
        f"{lat['arrival_messages_per_s']:,.0f} messages/s (half the sustained rate)"
    )
    legend_outside(latency)
    figure.suptitle(f"xroute bench stream ({results['setup']['master']}; {results['machine']})")
    figure.tight_layout()
    save(figure, path)
