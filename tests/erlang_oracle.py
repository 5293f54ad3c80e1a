"""Erlang/OTP (``erl``, Debian's erlang-base) as an oracle: evaluate expressions over terms that
xroute.erlang builds, and read the results back."""

from __future__ import annotations

import ast
import shutil
import subprocess
from typing import Any

import pytest

from xroute.erlang import format_term


def erl() -> str:
    """The erl program, or a skip that says how to get it."""
    found = shutil.which("erl")
    if found is None:
        pytest.skip("erl not found: apt-get install erlang-base (the oracle for phash2 and rand)")
    return found


term_text = format_term  # ``term`` written as Erlang source


def evaluate(expression: str) -> Any:
    """The value of an Erlang expression whose result prints (``~w``) as a Python literal:
    integers, floats and (nested) lists of them."""
    code = f"io:format(\"~w~n\", [{expression}]), halt()."
    done = subprocess.run(
        [erl(), "-noshell", "-eval", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr or done.stdout
    return ast.literal_eval(done.stdout.strip())
