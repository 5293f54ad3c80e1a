"""The shape of the package (issue 39): no import circles, function-level imports included,
read from the source as import-linter reads it (``from package import module`` imports that
module; imports under ``if TYPE_CHECKING:`` are for type checkers only)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import xroute

PACKAGE = Path(xroute.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for inner in ast.walk(node))
    return skipped


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The xroute modules that module ``name`` imports, anywhere in its code."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_nodes(tree)
    is_package = path.name == "__init__.py"
    named: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                named.add(submodule if submodule in modules else source)
    found = set()
    for target in named:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def import_circles() -> list[list[str]]:
    """Every set of xroute modules that import each other, directly or through others
    (strongly connected components of the import graph, Tarjan's algorithm, iteratively)."""
    modules = _modules()
    graph = {name: sorted(_imports(name, path, modules)) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, edge = work.pop()
            if edge == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if edge < len(graph[node]):
                work.append((node, edge + 1))
                target = graph[node][edge]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return circles


def test_no_module_imports_one_that_imports_it_back():
    assert import_circles() == []


def test_the_checker_sees_a_circle(tmp_path, monkeypatch):
    # The check above could pass by finding nothing: it must see a planted circle.
    package = tmp_path / "xroute"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from xroute import b\n")
    (package / "b.py").write_text("from xroute.a import f\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from xroute import a\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    assert import_circles() == [["xroute.a", "xroute.b"]]
