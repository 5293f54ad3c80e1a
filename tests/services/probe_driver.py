"""A Spark driver run as a script (its own process, so its own SparkContext) by
test_services.py against the split cluster: each task reports what it can see and writes an
object to S3, and the driver reads the objects back.

    python probe_driver.py MASTER_URL DRIVER_FILE BUCKET_URI HIDDEN_FOLDERS_JSON

prints one JSON object: ``tasks`` (one report per task) and ``read_back`` (object key -> text as
the driver read it). Run as ``__main__`` on purpose: cloudpickle then ships the task function by
value, so the executors need nothing of this checkout to run it.
"""

from __future__ import annotations

import json
import sys

from xroute.spark.session import start_spark

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


def main(master: str, driver_file: str, bucket: str, hidden: list[str]) -> dict[str, object]:
    """Run the probe on ``master`` and read back what the tasks wrote."""
    from pyarrow import fs

    spark = start_spark(master, app_name="xroute-split-probe")
    try:
        context = spark.sparkContext
        tasks = (
            context.parallelize(range(TASKS), TASKS)
            .map(lambda i: probe(i, driver_file, bucket, hidden))
            .collect()
        )
    finally:
        spark.stop()
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


if __name__ == "__main__":
    master_url, driver_path, bucket_uri, hidden_json = sys.argv[1:5]
    print(json.dumps(main(master_url, driver_path, bucket_uri, json.loads(hidden_json))))
