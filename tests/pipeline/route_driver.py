"""A driver script (its own process, so its own SparkContext) that runs `xroute.spark.route` on
a Spark master and prints, one JSON object per line, each record's id, queues and error:

    python route_driver.py MASTER_URL DEFINITIONS_URI COUNT SEED

The records are `tests.pipeline.data.messages(COUNT, SEED)`, made on the driver; the topology
is read from DEFINITIONS_URI (a local path or a storage URI) and travels by broadcast.
"""

from __future__ import annotations

import json
import sys

from tests.pipeline import data
from xroute.spark.session import start_spark
from xroute.spark import route

SCHEMA = "message_id string, exchange string, routing_key string, headers string, size long"


def main(master: str, definitions: str, count: int, seed: int) -> None:
    spark = start_spark(master, app_name="xroute-route-driver")
    try:
        records = data.messages(count, seed)
        frame = spark.createDataFrame(
            [tuple(r[c] for c in ("message_id", "exchange", "routing_key", "headers", "size"))
             for r in records],
            SCHEMA,
        ).repartition(4)
        for row in route(frame, definitions).collect():
            print(json.dumps({"id": row["message_id"], "queues": row["queues"], "error": row["error"]}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
