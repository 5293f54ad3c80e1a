"""One driver process (so one SparkContext, one driver JVM and one executor on the worker) that
runs several steps on a Spark master and writes what each gave to a JSON file:

    python split_driver.py MASTER STEPS_JSON RESULTS_JSON

STEPS_JSON holds ``{"name": {"route": [DEFINITIONS_URI, COUNT, SEED]}}`` (`xroute.spark.route`
on `tests.pipeline.data.messages(COUNT, SEED)`, made on the driver), ``{"name": {"cli":
[ARG, ...]}}`` (the command line, in this process: `xroute.spark.session.start_spark` hands
every step the session the first one started on MASTER) or ``{"name": {"probe": [DRIVER_FILE,
BUCKET_URI, HIDDEN_FOLDERS]}}`` (what the executors see, `tests.services.executor_probe`, as
JSON on standard output). RESULTS_JSON gets, per step, its exit code, its standard output and,
if it raised, the traceback. Starting a driver and an executor costs 20-40 s on 2 cores; the
split-cluster tests pay it once (tests/pipeline/test_split_cluster.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback
from typing import Any

from tests.pipeline import data
from xroute.spark import route
from xroute.spark.session import start_spark

SCHEMA = "message_id string, exchange string, routing_key string, headers string, size long"


def route_rows(spark: Any, definitions: str, count: int, seed: int) -> None:
    """Print one JSON object per record: its id, queues and error."""
    records = data.messages(count, seed)
    frame = spark.createDataFrame(
        [tuple(r[c] for c in ("message_id", "exchange", "routing_key", "headers", "size"))
         for r in records],
        SCHEMA,
    ).repartition(4)
    for row in route(frame, definitions).collect():
        print(json.dumps({"id": row["message_id"], "queues": row["queues"], "error": row["error"]}))


def probe_executors(spark: Any, driver_file: str, bucket: str, hidden: list[str]) -> None:
    """Print, as JSON, what the executors see (`tests.services.executor_probe.run_probe`)."""
    from pyspark import cloudpickle

    from tests.services import executor_probe

    # The namespaced worker cannot import tests/: its task functions travel by value.
    cloudpickle.register_pickle_by_value(executor_probe)
    print(json.dumps(executor_probe.run_probe(spark, driver_file, bucket, hidden)))


def run_step(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    """One step's exit code, standard output and traceback (None if it raised nothing)."""
    from xroute.cli import cli

    out, code, error = io.StringIO(), 0, None
    try:
        with contextlib.redirect_stdout(out):
            if "route" in step:
                route_rows(spark, *step["route"])
            elif "probe" in step:
                probe_executors(spark, *step["probe"])
            else:
                cli.main(args=step["cli"], prog_name="xroute", standalone_mode=False)
    except SystemExit as stop:  # the command line's own exit code
        code = stop.code if isinstance(stop.code, int) else 1
    except Exception:  # noqa: BLE001 - reported to the test, which names the step
        code, error = 1, traceback.format_exc()
    return {"exit": code, "stdout": out.getvalue(), "error": error}


def main(master: str, steps_file: str, results_file: str) -> None:
    with open(steps_file) as source:
        steps = json.load(source)
    spark = start_spark(master, app_name="xroute-split-driver")
    try:
        results = {name: run_step(spark, step) for name, step in steps.items()}
    finally:
        spark.stop()
    with open(results_file, "w") as sink:
        json.dump(results, sink)


if __name__ == "__main__":
    main(*sys.argv[1:4])
