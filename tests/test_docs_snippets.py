"""The Python examples of docs/ run as written (each in a fresh namespace, in an empty folder);
the few that need a live service or Spark are listed with the reason and the test that runs
their kind instead."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

DOCS = Path(__file__).parents[1] / "docs"
# (page, the block's first line) -> why it is not run here
NOT_RUN = {
    ("diff.md", 'Topology.from_definitions("http://ops@rabbit:15672", vhost="/", password=secret)'):
        "needs a broker's management API (tests/test_management.py)",
    ("engines.md", "offsets, ids = m.match_many_ids(keys)   # keys: list of str, or a pyarrow (Large)StringArray"):
        "a fragment of the block before it",
    ("pipeline.md", "from pyspark.sql import functions as F"):
        "needs Spark and a DataFrame (tests/pipeline/test_spark_route.py)",
    ("pipeline.md", "from pyspark.sql import SparkSession"):
        "needs Spark Connect and a RabbitMQ stream (tests/conformance/test_rabbitmq_stream.py)",
}
BLOCKS = [
    (page.name, block)
    for page in sorted(DOCS.glob("*.md"))
    if page.name != "kombu.md"  # run against a real Redis by tests/test_kombu_docs.py
    for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
]


@pytest.mark.parametrize(
    "page, block", BLOCKS, ids=[f"{page}:{block.splitlines()[0][:40]}" for page, block in BLOCKS]
)
def test_the_docs_examples_run(page, block, tmp_path, monkeypatch):
    if (page, block.splitlines()[0].rstrip()) in NOT_RUN:
        pytest.skip(NOT_RUN[(page, block.splitlines()[0].rstrip())])
    monkeypatch.chdir(tmp_path)
    exec(compile(block, f"docs/{page}", "exec"), {"__name__": "docs_example"})


def test_the_struct_headers_example_writes_typed_headers(tmp_path, monkeypatch):
    block = next(b for page, b in BLOCKS if page == "pipeline.md" and "pa.struct" in b)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/pipeline.md", "exec"), {})
    [row] = pq.read_table("messages.parquet").to_pylist()
    assert row["headers"]["price"].as_tuple().exponent == -2
    assert row["headers"]["sent"].tzinfo is not None and row["headers"]["where"] is None
