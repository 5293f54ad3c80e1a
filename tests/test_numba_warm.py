"""`python -m xroute.engines.warm` fills the numba cache that every process reads: a process
that imports xroute from a zip elsewhere (as Spark executors do) loads the kernels, compiles
nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import xroute
from xroute.engines import numba_cache
from xroute.engines.numba_cache import package_path

PROBE = """
import json, sys
import pyarrow as pa
from xroute import Topology
from xroute.core.batch import BatchRouter
from xroute.core import _batch_kernel
from xroute.engines import _memo_kernel
from xroute.engines import TopicMatcher
from xroute.engines import _kernel
import xroute
m = TopicMatcher(engine="compiled")
m.add("a.*", "q")
m.match_many_ids(["a.b", "c"])
m.match_many_ids(pa.array(["a.b"], pa.large_string()))
m.match_many_ids(pa.array([f"a.{i}" for i in range(40)]))  # the key memo's filter of keys seen
t = Topology(); t.declare_queue("q"); t.bind("amq.topic", "q", "a.*")
t.bind("amq.match", "q", "", {"x-match": "any", "k": 1})
router = BatchRouter(t)
router.route("amq.topic", ["a.b"])  # by key: the key memo's kernels (a key is kept
router.route("amq.topic", ["a.b"])  # once it repeats)
router.route("amq.match", ["a"], [{"k": 1}])  # headers decide: the batch walk's
kernels = {"route_batch": _kernel.route_batch, "expand_groups": _batch_kernel.expand_groups,
           "write_pairs": _batch_kernel.write_pairs, "memo_insert": _memo_kernel.memo_insert,
           "lay_out": _memo_kernel.lay_out,
           "mark_seen": _memo_kernel.mark_seen}
print(json.dumps({
    "file": xroute.__file__,
    "hits": {k: sum(f.stats.cache_hits.values()) for k, f in kernels.items()},
    "misses": {k: sum(f.stats.cache_misses.values()) for k, f in kernels.items()},
}))
"""


def run(code: str, cache: Path, path: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def test_package_path_is_found_in_folders_and_zips():
    assert str(package_path("/x/src/xroute/engines/_kernel.py")) == "xroute/engines/_kernel.py"
    assert str(package_path("/t/u/xroute-ab12.zip/xroute/core/batch.py")) == "xroute/core/batch.py"
    assert package_path("/somewhere/else.py") is None


def test_warm_cache_serves_a_process_that_imports_xroute_from_a_zip(tmp_path):
    cache = tmp_path / "numba"
    # Seeded with the cache make-venv.sh warmed (if any): the warm step then loads what that
    # compiled (a fresh cache costs 50 s of compiling on 2 cores, which make venv has already
    # paid) and compiles only what is missing or stale; the zip probe's zero misses are the
    # point here.
    installed = numba_cache.cache_dir()
    if installed.is_dir():
        shutil.copytree(installed, cache)
    source = Path(xroute.__file__).parent
    warmed = run("from xroute.engines.warm import main; main()", cache, str(source.parent))
    assert warmed.returncode == 0, warmed.stderr
    assert "numba kernels cached in" in warmed.stdout
    assert list(cache.glob("source-*/xroute/engines/_kernel.route_batch-*.nbi"))

    # The package as Spark ships it: a zip, somewhere else.
    shipped = tmp_path / "executor" / "xroute-test.zip"
    shipped.parent.mkdir()
    with zipfile.ZipFile(shipped, "w") as archive:
        for path in source.rglob("*.py"):
            archive.write(path, Path("xroute") / path.relative_to(source))
    probe = run(PROBE, cache, str(shipped))
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert found["file"].startswith(str(shipped)), found  # imported from the zip indeed
    assert set(found["misses"].values()) == {0}, found
    assert found["hits"]["route_batch"] >= 2, found
    assert found["hits"]["expand_groups"] >= 1 and found["hits"]["write_pairs"] >= 1, found
    assert found["hits"]["memo_insert"] >= 1 and found["hits"]["lay_out"] >= 1, found
    assert found["hits"]["mark_seen"] >= 1, found
