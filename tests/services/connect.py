"""The Spark Connect server of the tests: the `ConnectServer` of ``xroute.bench.connect``,
which the benchmarks use too (one implementation)."""

from __future__ import annotations

from xroute.bench.connect import ConnectServer, ConnectUnavailable, spark_home

__all__ = ["ConnectServer", "ConnectUnavailable", "spark_home"]
