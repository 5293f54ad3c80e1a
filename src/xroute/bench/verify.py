"""``xroute bench verify``: `verify` on a trace beside the pipeline on the same messages, in
one Spark session.

The workload is `xroute.bench.pipeline`'s (the seed mix on one topic exchange, round robin to
the queues). Its messages are written once more as a trace (`xroute.traces.records.SCHEMA`),
with the queues each reached as the broker's ``routed_queues`` (routed here, in one process,
by `BatchRouter`: the figure is verify's own cost, every message agreeing), in files of
``FILE_ROWS`` records as `xroute capture` rolls them. Both jobs read Parquet from local disk
and publish their outputs by the pipeline's commit.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from xroute.bench.experiments.machine import load_average
from xroute.bench.pipeline import EXCHANGE, Workload, ensure_workload
from xroute.core.batch import BatchRouter
from xroute.core.topology import Topology
from xroute.pipeline.transform import route_records
from xroute.traces.records import PUBLISH, SCHEMA

FILE_ROWS = 500_000


def ensure_trace(defs: Path, messages: Path, say: Any = print) -> Path:
    """The workload's messages as a trace folder, made once beside them."""
    folder = messages.parent / "trace"
    if folder.is_dir() and any(folder.glob("part-*.parquet")):
        return folder
    partial = folder.with_suffix(".tmp")
    partial.mkdir(parents=True, exist_ok=True)
    router = BatchRouter(Topology.from_definitions(str(defs), engine="compiled"))
    names = pa.array(router.queues, pa.string())
    seq = 0
    for batch in pq.ParquetFile(messages).iter_batches(FILE_ROWS, columns=["routing_key"]):
        keys = batch.column(0)
        size = len(keys)
        exchanges = pa.array([EXCHANGE] * size, pa.string())
        outcome = route_records(router, keys, exchanges)
        offsets = np.zeros(size + 1, dtype=np.int32)
        np.cumsum(np.bincount(outcome.delivery_rows, minlength=size), out=offsets[1:])
        routed = pa.ListArray.from_arrays(pa.array(offsets), names.take(pa.array(outcome.queue_ids)))
        columns = {
            "seq": pa.array(range(seq, seq + size), pa.int64()),
            "record_type": pa.array([PUBLISH] * size, pa.string()),
            "exchange": exchanges,
            "routing_key": keys,
            "routing_keys": pa.ListArray.from_arrays(pa.array(range(size + 1), pa.int32()), keys),
            "headers": pa.array(["{}"] * size, pa.string()),
            "routed_queues": routed,
        }
        table = pa.table(
            {f.name: columns.get(f.name, pa.nulls(size, f.type)) for f in SCHEMA}, schema=SCHEMA
        )
        pq.write_table(table, partial / f"part-{seq:012d}-{seq + size - 1:012d}.parquet")
        seq += size
        say(f"trace: {seq:,} records")
    partial.rename(folder)
    return folder


def run_benchmark(workload: Workload, master: str, data: Path, out: Path, say: Any = print) -> dict[str, Any]:
    """Verify and the pipeline, side by side; results.json and verify.png in ``out``."""
    from xroute.spark.job import PipelineOptions, run_pipeline
    from xroute.spark.session import start_spark
    from xroute.spark.verify import VerifyOptions, run_verify

    defs, messages = ensure_workload(data, workload, say)
    trace = ensure_trace(defs, messages, say)
    spark = start_spark(master)
    try:
        started = time.perf_counter()
        run_pipeline(spark, PipelineOptions(
            definitions=str(defs), messages=str(messages), out=str(data / "pipeline-out"),
            exchange=EXCHANGE, overwrite=True,
        ))
        pipeline_s = time.perf_counter() - started
        started = time.perf_counter()
        result = run_verify(spark, VerifyOptions(
            definitions=str(defs), traces=str(trace), out=str(data / "verify-out"), overwrite=True,
        ))
        verify_s = time.perf_counter() - started
    finally:
        spark.stop()
    assert result.agrees and result.published == workload.messages, result.to_dict()["counts"]
    results = {
        "workload": {"messages": workload.messages, "bindings": workload.bindings,
                     "queues": workload.queues, "master": master},
        "machine": {"cpus": os.cpu_count(), "load_average": load_average()},
        "pipeline": {"seconds": round(pipeline_s, 2), "messages_per_s": round(workload.messages / pipeline_s)},
        "verify": {"seconds": round(verify_s, 2), "messages_per_s": round(workload.messages / verify_s)},
        "verify_over_pipeline": round(verify_s / pipeline_s, 2),
        "goal": "verify costs at most 1.3x the pipeline (issue 23)",
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    _plot(results, out / "verify.png")
    return results


def _plot(results: dict[str, Any], path: Path) -> None:
    from xroute.pipeline.figures import pyplot, save

    plt = pyplot()

    labels = ["xroute pipeline", "xroute verify"]
    rates = [results["pipeline"]["messages_per_s"], results["verify"]["messages_per_s"]]
    figure, axes = plt.subplots(figsize=(7, 2.6))
    axes.barh(labels, rates, color=["#37a", "#3a7"])
    for y, rate in enumerate(rates):
        axes.text(rate, y, f" {rate:,.0f}/s", va="center", fontsize=8)
    w, m = results["workload"], results["machine"]
    axes.set_title(
        f"{w['messages']:,} messages, {w['bindings']:,} bindings, {w['queues']} queues, "
        f"{w['master']}\n{m['cpus']} cores, load {m['load_average']}; verify/pipeline "
        f"{results['verify_over_pipeline']}x", fontsize=8,
    )
    axes.set_xlabel("messages per second")
    figure.tight_layout()
    save(figure, path)
