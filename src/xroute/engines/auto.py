"""``auto``, the default engine: the lazy DFA for single keys, the compiled kernel for batches.

One trie serves both (the DFA engine is a trie; the kernel flattens the same one), so a user
never chooses and never pays twice for bindings. The rule, also in docs/engines.md:

- ``match`` (one key, as `Topology.route` asks): the DFA (`xroute.engines.dfa`).
- ``match_many`` / ``match_many_ids`` with fewer than `AUTO_BATCH_MIN` keys: the DFA, key by key.
- larger batches: the numba kernel (`xroute.engines.compiled`) if its flat copy of the trie is
  current; otherwise only once the keys of such batches since the last binding change reach
  `AUTO_FLATTEN_AFTER`, because flattening the trie costs about as much as routing that many
  new keys with the Python DFA. Bindings that change between every small batch thus keep the
  DFA; a stable topology with a stream of batches moves to the kernel.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from xroute.engines.base import Words, register
from xroute.engines.compiled import BatchKernel
from xroute.engines.dfa import DfaEngine

# Below this many keys a batch costs less through the warm DFA than the Arrow conversion and
# kernel call (about 20 µs) plus the per-key sets that `match_many` must build anyway.
AUTO_BATCH_MIN = 256
# Flattening costs about 5 µs per trie node, and on keys it has not seen the Python DFA costs
# about as much per key as flattening does per 10-100 nodes (both grow with the bindings; see
# `xroute bench engines`): after about this many batch keys a fresh flat trie has paid for itself.
AUTO_FLATTEN_AFTER = 4096


@register
class AutoEngine(BatchKernel, DfaEngine):
    """The DFA for single keys and small batches; the compiled kernel for large batches."""

    name = "auto"
    route_cache_default = False  # the DFA remembers per state already

    def __init__(self) -> None:
        super().__init__()
        self._batch_keys_since_change = 0
        self._kernel_batches = self._dfa_batches = 0

    def add(self, words: Words, destination: Hashable) -> None:
        super().add(words, destination)
        self._batch_keys_since_change = 0

    def remove(self, words: Words, destination: Hashable) -> None:
        super().remove(words, destination)
        self._batch_keys_since_change = 0

    def match_many(self, keys: Sequence[str]) -> list[frozenset]:
        if self._use_kernel(len(keys)):
            return self.kernel_match_many(keys)
        return super().match_many(keys)

    def match_many_ids(self, keys: Any) -> tuple[np.ndarray, np.ndarray] | None:
        # None hands a small batch back to TopicMatcher's generic path (DFA key by key).
        return super().match_many_ids(keys) if self._use_kernel(len(keys)) else None

    def stats(self) -> dict[str, Any]:
        return {
            **super().stats(),
            "engine": self.name,
            **self.kernel_stats(),
            "auto_kernel_batches": self._kernel_batches,
            "auto_dfa_batches": self._dfa_batches,
        }

    def _use_kernel(self, keys: int) -> bool:
        if keys >= AUTO_BATCH_MIN:
            self._batch_keys_since_change += keys
            if self._flat is not None or self._batch_keys_since_change >= AUTO_FLATTEN_AFTER:
                self._kernel_batches += 1
                return True
        self._dfa_batches += 1
        return False
