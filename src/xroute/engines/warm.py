"""``python -m xroute.engines.warm``: compile every numba kernel of xroute into the on-disk cache.

`scripts/make-venv.sh` runs it once the package is installed, so that no process pays the
compile (15-25 s on a 2-core machine), neither the first ``xroute pipeline`` run nor its Spark
workers: they all read the same cache folder (`xroute.engines.numba_cache`), whether they
import xroute from the install or from the zip that Spark ships.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def warm() -> dict[str, float]:
    """Compile (or load from the cache) every kernel for every argument type used; seconds each."""
    import numpy as np
    import pyarrow as pa

    from xroute.core.batch import BatchRouter
    from xroute.core.keys import split_words
    from xroute.core.topology import Topology
    from xroute.engines import TopicMatcher, numba_cache
    from xroute.engines.flat_shapes import FlatShapes
    from xroute.engines.literal import LiteralIndex
    from xroute.engines.shapes import ShapeIndex

    numba_cache.prepare()
    seconds: dict[str, float] = {}
    matcher = TopicMatcher(engine="compiled")
    for pattern in ("a.*", "#.b", "a.#.c", "c"):
        matcher.add(pattern, pattern)
    keys = ["a.b", "x.b", "a.b.c", "c", ""]
    # Arrow strings have int32 offsets, large strings int64: the kernel compiles for each.
    for label, batch in (("strings", keys), ("large strings", pa.array(keys, pa.large_string()))):
        began = time.perf_counter()
        offsets, ids = matcher.match_many_ids(batch)
        seconds[f"topic kernel, {label}"] = time.perf_counter() - began
        if len(offsets) != len(keys) + 1:
            raise RuntimeError("the warmed kernel gave a malformed answer")
    # The key memo of `TopicMatcher.match_many_ids` (Arrow batches of `MEMO_MIN_BATCH` keys or
    # more): a first pass (the filter of keys seen), a second (keys kept), a third (probed
    # and copied), for both string types; and the memo's growth, which a small batch never
    # reaches.
    from xroute.engines import key_memo
    from xroute.engines.matcher import MEMO_MIN_BATCH

    keys = [f"a.{i}" for i in range(MEMO_MIN_BATCH)]
    for label, kind in (("strings", pa.string()), ("large strings", pa.large_string())):
        began = time.perf_counter()
        batch = pa.array(keys, kind)
        mixed = pa.array(keys[::2] + [f"b.{i}" for i in range(MEMO_MIN_BATCH)], kind)
        answers = [matcher.match_many_ids(keys) for keys in (batch, batch, batch, mixed)]
        seconds[f"key memo, {label}"] = time.perf_counter() - began
        if answers[0][0].tolist() != answers[2][0].tolist():
            raise RuntimeError("the warmed key memo gave another answer")
    tables = (np.full(4, -1, dtype=np.int64), np.zeros(4, dtype=np.int32),
              np.full(8, -1, dtype=np.int64), np.zeros(8, dtype=np.int32))
    key_memo.kernel().memo_rehash(*tables)
    # (answers taken apart: a batch of kept and new keys of several ids each)
    taken = key_memo.kernel().take_answers(np.array([0, 2, 3], dtype=np.int64),
                                           np.array([4, 5, 6], dtype=np.int32),
                                           np.array([1], dtype=np.int64))
    if taken[0].tolist() != [0, 1] or taken[1].tolist() != [6]:
        raise RuntimeError("the warmed answer copy gave another answer")
    # `auto`'s shape kernel (wildcards by shape, literal keys by table), for both as well.
    shapes, literal = ShapeIndex(), LiteralIndex()
    for pattern in ("a.*", "#.b"):
        shapes.add(split_words(pattern), pattern)
    literal.add("c", "c")
    flat = FlatShapes(shapes, literal, {"a.*": 0, "#.b": 1, "c": 2})
    keys = ["a.b", "x.b", "a.b.c", "c", ""]
    for label, batch in (("strings", keys), ("large strings", pa.array(keys, pa.large_string()))):
        began = time.perf_counter()
        offsets, ids = flat.route(batch)
        seconds[f"shape kernel, {label}"] = time.perf_counter() - began
        if offsets.tolist() != [0, 2, 3, 3, 4, 4] or sorted(ids[:2].tolist()) != [0, 1]:
            raise RuntimeError("the warmed shape kernel gave a wrong answer")
    # Every exchange type: the batch router's index arrays differ in type between them (and
    # between a list of keys and Arrow arrays), and numba compiles once per type.
    topology = Topology()
    topology.declare_queue("q")
    for kind in ("direct", "fanout", "topic", "headers", "x-delimiter"):
        topology.declare_exchange(f"warm.{kind}", kind)
        topology.bind(f"warm.{kind}", "q", "a.*" if kind == "topic" else "a.b",
                      {"x-match": "any", "k": 1} if kind == "headers" else None)
    topology.bind("warm.topic", "warm.fanout", "#", destination_type="exchange")
    router = BatchRouter(topology)
    keys = ["a.b", "b", "a.b", ".a.b"]
    headers = [{"k": 1}, None, {"CC": ["a.c"]}, None]
    began = time.perf_counter()
    for kind in ("direct", "fanout", "topic", "headers", "x-delimiter"):
        for batch in (keys, pa.array(keys, pa.string()), pa.array(keys, pa.large_string())):
            for tables in (None, headers):
                routes = router.route(f"warm.{kind}", batch, tables)
                expected = topology.route(f"warm.{kind}", "a.b", tables[0] if tables else None)
                if routes.queues(0) != expected:
                    raise RuntimeError("the warmed batch router disagrees with Topology.route")
    seconds["batch router"] = time.perf_counter() - began
    # The router's one-queue answers by identity (`AnswersById`): filled when a router is
    # made on a topology of literal bindings, and in its first passes; and its growth.
    from xroute.core.batch import AnswersById
    from xroute.engines.key_memo import MISSING, ONE_QUEUE

    began = time.perf_counter()
    by_id = AnswersById()
    sets = [frozenset((f"q{i}",)) for i in range(40)]
    by_id.add(sets[:1], [ONE_QUEUE], 100)
    by_id.add(sets[1:], [ONE_QUEUE - i for i in range(1, 40)], 100)
    if by_id.find([sets[7], frozenset(("q7",))]).tolist() != [ONE_QUEUE - 7, MISSING]:
        raise RuntimeError("the warmed answer table gave a wrong answer")
    seconds["answers by identity"] = time.perf_counter() - began
    return seconds


def main() -> int:
    """Warm the cache and say where it is."""
    from xroute.engines.numba_cache import prepare

    folder: Path = prepare()
    for what, spent in warm().items():
        print(f"xroute: numba {what}: ready in {spent:.1f} s")
    print(f"xroute: numba kernels cached in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
