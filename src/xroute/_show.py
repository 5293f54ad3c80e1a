"""`short_repr`: a repr of any value, short enough for an error message."""

from __future__ import annotations

import reprlib
from typing import Any


class _ShortRepr(reprlib.Repr):
    # Bounded at every level, and safe on cycles: an error message about a hostile value (a
    # structure 2**40 leaves wide when printed, a cycle, a failing __repr__) stays short.
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxstring = self.maxother = self.maxlong = 60
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 4

    def repr_instance(self, obj: Any, level: int) -> str:
        try:
            text = repr(obj)
        except Exception:  # a hostile __repr__
            return f"<{type(obj).__name__}>"
        return text if len(text) <= self.maxother else text[: self.maxother - 3] + "..."

    def repr_int(self, obj: int, level: int) -> str:
        try:
            return super().repr_int(obj, level)
        except ValueError:  # more digits than Python prints
            return f"<int of {obj.bit_length()} bits>"


_SHORT = _ShortRepr()


def short_repr(value: Any) -> str:
    """A repr of ``value`` short enough for an error message, whatever the value is."""
    if type(value) in (str, bytes):
        # Keys and names: their start says the most (a repr of text is linear and safe).
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."
    return _SHORT.repr(value)


def console(**options: Any) -> Any:
    """A rich `Console` for output that holds user data (routing keys, names, file paths):
    what was sent is shown as it was. Markup is escaped where text is printed
    (``rich.markup.escape``), and emoji codes are never replaced: an x-delimiter key ``:a:c``
    must not print as an emoji. Every command and progress bar makes its console here."""
    from rich.console import Console

    return Console(emoji=False, **options)
