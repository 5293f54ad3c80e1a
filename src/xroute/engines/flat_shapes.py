"""`auto`'s batch path while its wildcard patterns go by shape (`xroute.engines.shapes`): the
shape index and the exact-key index of the literal bindings laid out as arrays for the numba
kernel `route_shapes`.

A key then costs, per shape its length fits, one copy of its words at the shape's positions and
one hash probe, plus one probe of the exact-key table: no trie to flatten and no walk of its
words. While every wildcard pattern begins with a literal word, a key whose first word none
begins with skips the shapes (`heads`, one probe). EMQX's 80k ``device.{s}.*.{n}.#`` filters
are one shape, so a 10-word key is one probe, where the trie walk read five words and the lazy
DFA could save nothing (every key is new).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from typing import Any

import numpy as np

from xroute.engines.compiled import _kernel, _utf8_buffers, exact_key_table
from xroute.engines.literal import LiteralIndex
from xroute.engines.shapes import ShapeIndex


class FlatShapes:
    """A snapshot of a `ShapeIndex` and a `LiteralIndex` as the kernel's arrays."""

    def __init__(self, index: ShapeIndex, literal: LiteralIndex,
                 numbering: Mapping[Hashable, int]) -> None:
        kernel = _kernel()
        shapes = index.shapes()
        assert len(shapes) < 128  # MAX_SHAPES: each number is one byte in UTF-8
        names: list[str] = []
        found: list[Collection[Hashable]] = []
        position_starts = [0]
        positions: list[int] = []
        for number, shape in enumerate(shapes):
            positions += shape.positions
            position_starts.append(len(positions))
            # The two bytes the kernel writes: UTF-8 keeps characters below 128 as one byte.
            prefix = chr(number & 255) + chr(number >> 8)
            for words, destinations in shape.literal_entries():
                # The kernel's lookup bytes: the shape's number, then each word after a dot.
                names.append(prefix + "".join("." + word for word in words))
                found.append(destinations)
        self.shapes = (
            np.array([shape.min_words for shape in shapes], dtype=np.int64),
            np.array([shape.exact for shape in shapes], dtype=np.bool_),
            np.array(position_starts, dtype=np.int64),
            np.array(positions, dtype=np.int64),
        )
        self.entries, self.entry_ids = exact_key_table(names, found, numbering, kernel)
        self.literal_keys, self.literal_ids = exact_key_table(*literal.columns(), numbering,
                                                              kernel)
        heads = index.heads() or []  # none: every shape is tried
        self.heads = exact_key_table(heads, [()] * len(heads), numbering, kernel)[0]
        self._seen = np.zeros(max(numbering.values(), default=0) + 1, dtype=np.int64)
        self._stamp = np.zeros(1, dtype=np.int64)
        self._kernel = kernel

    def route(self, keys: Any) -> tuple[np.ndarray, np.ndarray]:
        """(offsets, destination ids) for valid keys (a list of str or Arrow strings)."""
        data, key_offsets = _utf8_buffers(keys)
        kernel = self._kernel
        offsets, single, side_start, side = kernel.route_shapes(
            data, key_offsets, self.shapes, self.heads, self.entries, self.entry_ids,
            self.literal_keys, self.literal_ids, self._seen, self._stamp)
        out = np.empty(offsets[-1], dtype=np.int32)
        kernel.write_shapes(offsets, single, side_start, side, self.entry_ids, self.literal_ids,
                            out)
        return offsets, out
