"""What the split cluster's executors see: each task reports what it can see and writes an
object to S3, and the driver reads the objects back (`run_probe`: ``tasks``, one report per
task, and ``read_back``, object key -> text as the driver read it). Run as the "probe" step of
`tests/pipeline/split_driver.py`, in the driver the split-cluster tests share, which has
cloudpickle ship this module's functions by value: the executors need nothing of this checkout.
"""

from __future__ import annotations

import sys
from typing import Any

TASKS = 2


def probe(index: int, driver_file: str, bucket: str, hidden: list[str]) -> dict[str, object]:
    """What one executor's Python worker sees; writes ``task-<index>.txt`` into ``bucket``."""
    import os

    from pyarrow import fs

    report: dict[str, object] = {
        "index": index,
        "pid": os.getpid(),
        "driver_file_exists": os.path.exists(driver_file),
        "driver_folder_exists": os.path.exists(os.path.dirname(driver_file)),
        # Folders the worker must not see into (the checkout's src, the venv's xroute, the
        # driver's cache): those that show any entry but the numba cache that this executor
        # itself makes in its private copy of ~/.cache/xroute when it imports xroute.
        "visible_hidden": [
            folder
            for folder in hidden
            if os.path.isdir(folder) and set(os.listdir(folder)) - {"numba"}
        ],
    }
    try:
        import xroute

        report["xroute_file"] = xroute.__file__
    except ImportError as error:
        report["xroute_file"] = None
        report["xroute_error"] = repr(error)
    key = f"task-{index}.txt"
    try:
        store, path = fs.FileSystem.from_uri(f"{bucket}/{key}")  # the AWS_* of the worker
        with store.open_output_stream(path) as sink:
            sink.write(f"written by task {index} in pid {os.getpid()}".encode())
        report["wrote"] = key
    except OSError as error:
        report["wrote"] = None
        report["write_error"] = str(error)
    return report


def run_probe(spark: Any, driver_file: str, bucket: str, hidden: list[str]) -> dict[str, object]:
    """Run the probe on ``spark``'s executors and read back what the tasks wrote."""
    from pyarrow import fs

    context = spark.sparkContext
    tasks = (
        context.parallelize(range(TASKS), TASKS)
        .map(lambda i: probe(i, driver_file, bucket, hidden))
        .collect()
    )
    read_back: dict[str, str | None] = {}
    store, root = fs.FileSystem.from_uri(bucket)
    for index in range(TASKS):
        key = f"task-{index}.txt"
        try:
            with store.open_input_stream(f"{root}/{key}") as source:
                read_back[key] = source.read().decode()
        except OSError as error:
            read_back[key] = None
            print(f"cannot read {key}: {error}", file=sys.stderr)
    return {"tasks": tasks, "read_back": read_back}
