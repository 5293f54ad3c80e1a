"""One SparkSession for the whole run (local[2,3]: two cores, a failed task tried up to 3 times,
as `xroute pipeline` runs by default): starting one costs 5 to 15 seconds."""

from __future__ import annotations

import os

import pytest

# Test data is a few thousand rows: Spark's 200 shuffle partitions (the diff's and the trace
# reader's group-bys) would be 200 near-empty tasks each; AQE coalesces them only after the
# shuffle has been written.
TEST_CONF = {"spark.sql.shuffle.partitions": "4"}


@pytest.fixture(scope="session")
def spark():
    """The shared SparkSession, started by the job's own `start_spark`."""
    os.environ.setdefault("SPARK_TESTING", "1")
    from xroute.spark.session import start_spark

    session = start_spark("local[2,3]", app_name="xroute-tests", config=TEST_CONF)
    yield session
    session.stop()
