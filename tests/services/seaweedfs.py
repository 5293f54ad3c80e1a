"""The S3 store of the tests: the `SeaweedFS` of ``xroute.bench.seaweedfs``, which the
benchmarks use too (one implementation; see its docstring for what an S3 client must set), and
the glue that makes its variables reach a local Spark that is already running."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping

from xroute.bench.seaweedfs import SeaweedFS, StoreUnavailable, free_ports, weed_binary

__all__ = ["SeaweedFS", "StoreUnavailable", "free_ports", "share_with_spark", "weed_binary"]


@contextlib.contextmanager
def share_with_spark(env: Mapping[str, str]) -> Iterator[None]:
    """Give ``env`` to the Python workers of a SparkContext already running in this process,
    and take it back afterwards.

    Setting ``os.environ`` is enough for a Spark started later (its JVM inherits it), not for one
    started earlier: its JVM's environment is fixed. PySpark sends ``SparkContext.environment``
    with every Python function it ships, and the JVM sets those variables on the Python workers
    it starts for it (a new set of variables gets new workers), so updating that dict reaches
    every job submitted from now on."""
    context = None
    if "pyspark" in sys.modules:
        from pyspark import SparkContext

        context = SparkContext._active_spark_context
    if context is None:
        yield
        return
    saved = dict(context.environment)
    context.environment.update(env)
    try:
        yield
    finally:
        context.environment.clear()
        context.environment.update(saved)
