"""The topic engine a pipeline uses unless told otherwise.

A pipeline routes millions of keys against bindings that never change during the run: the
case the ``compiled`` batch kernel is made for. ``auto`` would also end on the kernel, but
only after routing about ten keys per trie node through the DFA first, in every Python worker
process of every executor, which on the seed mix costs more than the whole rest of a run.
"""

from __future__ import annotations

from xroute.engines import DEFAULT_ENGINE, ENGINES

PIPELINE_ENGINE = "compiled" if "compiled" in ENGINES else DEFAULT_ENGINE
