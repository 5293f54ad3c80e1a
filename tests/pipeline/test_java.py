"""A clear, typed error when Java is missing or too old (no Spark is started here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.pipeline import data
from xroute.core.errors import JavaUnavailable
from xroute.spark.session import find_java

HINT = "apt-get install openjdk-17-jre-headless"


def fake_java(folder: Path, banner: str) -> Path:
    """A ``java`` that prints a version banner the way Java does (on stderr)."""
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho '{banner}' >&2\n")
    java.chmod(0o755)
    return java


def test_no_java_at_all(tmp_path):
    with pytest.raises(JavaUnavailable, match="none was found") as raised:
        find_java({"PATH": str(tmp_path)})
    assert HINT in str(raised.value)


def test_java_home_without_java(tmp_path):
    with pytest.raises(JavaUnavailable, match="JAVA_HOME") as raised:
        find_java({"JAVA_HOME": str(tmp_path), "PATH": ""})
    assert HINT in str(raised.value) and str(tmp_path) in str(raised.value)


@pytest.mark.parametrize(
    "banner, version",
    [('openjdk version "11.0.22" 2024-01-16', 11), ('java version "1.8.0_392"', 8)],
)
def test_java_too_old(tmp_path, banner, version):
    fake_java(tmp_path, banner)
    with pytest.raises(JavaUnavailable, match=f"is Java {version};") as raised:
        find_java({"JAVA_HOME": str(tmp_path)})
    assert HINT in str(raised.value)


def test_java_17_on_path_is_accepted(tmp_path):
    java = fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')
    assert find_java({"PATH": str(java.parent)}) == str(java)


def test_the_command_says_so_and_writes_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYSPARK_GATEWAY_PORT")}
    env["PATH"] = str(tmp_path / "empty")
    out = tmp_path / "out"
    # Valid input: it is checked before Spark starts, and Java only then.
    (tmp_path / "defs.json").write_text(json.dumps(data.definitions()))
    pq.write_table(pa.table({"routing_key": ["a"], "exchange": ["topic"]}), tmp_path / "messages.parquet")
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from xroute.cli import main; main()",
            "pipeline",
            "-d",
            "defs.json",
            "-m",
            "messages.parquet",
            "-o",
            str(out),
            "--no-progress",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "xroute: error: Spark needs Java 17 or later" in result.stderr
    assert HINT in result.stderr
    assert not out.exists()
