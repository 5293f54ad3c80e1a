"""Erlang/OTP (``erl``, Debian's erlang-base) as an oracle: evaluate expressions over terms that
xroute.erlang builds, and read the results back."""

from __future__ import annotations

import ast
import shutil
import subprocess
from typing import Any

import pytest

from xroute.erlang import Atom


def erl() -> str:
    """The erl program, or a skip that says how to get it."""
    found = shutil.which("erl")
    if found is None:
        pytest.skip("erl not found: apt-get install erlang-base (the oracle for phash2 and rand)")
    return found


def term_text(term: Any) -> str:
    """``term`` written as Erlang source."""
    if type(term) is Atom:
        return "'" + str(term).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if type(term) is bool:
        return "true" if term else "false"
    if isinstance(term, (bytes, bytearray)):
        return "<<" + ",".join(str(b) for b in term) + ">>"
    if isinstance(term, str):
        return term_text(term.encode("utf-8"))
    if type(term) is int:
        return str(term)
    if type(term) is float:
        return repr(term) if "." in repr(term) and "e" not in repr(term) else "%.17e" % term
    if isinstance(term, tuple):
        return "{" + ",".join(term_text(t) for t in term) + "}"
    if isinstance(term, list):
        return "[" + ",".join(term_text(t) for t in term) + "]"
    raise TypeError(type(term))


def evaluate(expression: str) -> Any:
    """The value of an Erlang expression whose result prints (``~w``) as a Python literal:
    integers, floats and (nested) lists of them."""
    code = f"io:format(\"~w~n\", [{expression}]), halt()."
    done = subprocess.run(
        [erl(), "-noshell", "-eval", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr or done.stdout
    return ast.literal_eval(done.stdout.strip())
