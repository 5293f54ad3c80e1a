"""The routing library and the commands route, explain, lint and diff work without the extras
(pyspark, pandas, matplotlib, kombu, redis): each runs in a subprocess where importing them
fails, as in a plain ``pip install xroute``; a command that needs an extra names the
``pip install`` to run. The packaging metadata says the same."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.test_definitions import EXPORT
from xroute.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = sorted(EXTRAS)
# Run first in the subprocess: any import of an extra's module fails, as if not installed.
BLOCK = f"""
import importlib.abc, sys
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Blocked())
"""


def lean(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCK + code], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def xroute(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    code = f"import sys; sys.argv = ['xroute', *{list(args)!r}]\nfrom xroute.cli import main; main()"
    return lean(code, cwd)


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    (tmp_path / "defs.json").write_text(json.dumps(EXPORT))
    return tmp_path


def test_the_library_imports_and_routes_without_the_extras(tmp_path):
    result = lean(
        "import xroute\n"
        "t = xroute.Topology()\n"
        "t.declare_exchange('x', 'topic'); t.declare_queue('q'); t.bind('x', 'q', 'a.#')\n"
        "print(sorted(t.route('x', 'a.b')))\n"
        f"print(sorted(m for m in {BLOCKED!r} if m in sys.modules))\n",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["['q']", "[]"]


def test_route_explain_lint_and_diff_run_without_the_extras(definitions):
    exchange = EXPORT["bindings"][0]["source"]
    for args in (
        ["route", "-d", "defs.json", "-e", exchange, "-k", "a.b.c"],
        ["explain", "-d", "defs.json", "-e", exchange, "-k", "a.b.c"],
        ["lint", "-d", "defs.json"],
        ["diff", "defs.json", "defs.json", "-o", "report"],
    ):
        result = xroute(*args, cwd=definitions)
        assert result.returncode == 0, (args, result.stderr)
    assert json.loads((definitions / "report" / "diff.json").read_text())["static"]


@pytest.mark.parametrize(
    "args, extra",
    [
        (["pipeline", "-d", "defs.json", "-m", "m.parquet", "-o", "out"], "spark"),
        (["diff", "defs.json", "defs.json", "-m", "m.parquet", "-o", "out"], "spark"),
        (["bench", "kombu"], None),
    ],
)
def test_a_command_whose_extra_is_missing_names_the_pip_install(definitions, args, extra):
    result = xroute(*args, cwd=definitions)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xroute: error: "), result.stderr
    assert f"pip install 'xroute[{extra or ''}" in lines[0]
    assert not (definitions / "out").exists()


def test_the_metadata_keeps_the_extras_out_of_the_core():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    for module in BLOCKED:
        assert module not in core
    extras = project["optional-dependencies"]
    assert {"spark", "plots", "kombu", "amqp", "all", "dev"} <= set(extras)
    assert "xroute[all]" in extras["dev"]  # make run and make test install everything
    for module, extra in EXTRAS.items():
        if module != "py4j":  # pyspark brings it
            assert any(req.startswith(module) for req in extras[extra]), module
    assert project["license"] == "Apache-2.0"
    assert "Apache License" in (ROOT / "LICENSE").read_text()


@pytest.mark.parametrize("module, extra", [("xroute.amqp", "amqp"), ("xroute.kombu", "kombu")])
def test_importing_a_part_whose_extra_is_missing_names_the_pip_install(tmp_path, module, extra):
    # Issue 38: xroute.amqp raised a bare ModuleNotFoundError for pamqp.
    result = lean(
        f"try:\n    import {module}\nexcept Exception as error:\n"
        "    print(type(error).__name__, error)\n", tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("MissingDependency"), result.stdout
    assert f"pip install 'xroute[{extra}]'" in result.stdout
