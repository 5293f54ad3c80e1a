"""docs/kombu.md's before/after example runs (on the memory transport instead of Redis) and
prints what the page says, both ways."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import xroute.kombu

PAGE = (Path(__file__).parent.parent / "docs" / "kombu.md").read_text()
INSTALL = 'import xroute.kombu\nxroute.kombu.install()  # "after"; without these two lines, "before"\n'


def example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PAGE, re.S)
    (program,) = [b for b in blocks if INSTALL in b]
    return program.replace('"redis://localhost:6379/0"', '"memory://"')


def documented(label: str) -> str:
    match = re.search(rf"{label} \(.*?\):\n\n```\n(.*?)```", PAGE, re.S)
    assert match, f"no {label!r} output block in docs/kombu.md"
    return match.group(1)


def run(program: str) -> str:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(program, "docs/kombu.md", "exec"), {"__name__": "kombu_example"})
    finally:
        xroute.kombu.uninstall()
    return out.getvalue()


def test_before_prints_kombus_own_routing():
    assert run(example().replace(INSTALL, "")) == documented("Before")


def test_after_prints_rabbitmqs_routing():
    assert run(example()) == documented("After")
