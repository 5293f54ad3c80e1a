"""Where a read starts or ends in a stream: ``first``, ``last``, ``next``, an offset, or a
time.

- ``first``: the first offset the stream still holds;
- ``last``: the first message of the stream's last chunk (RabbitMQ's own meaning) as a start;
  as an end, the tail (everything stored when the read is planned; also ``latest``);
- ``next``: only what is stored after the query starts (the tail, as a start);
- an integer: that offset;
- a time (ISO 8601 with a zone, or ``@`` and milliseconds since 1970): the first chunk stored
  at or after it, as RabbitMQ resolves ``timestamp`` offsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from xroute.core.errors import StreamURIError

KINDS = ("first", "last", "next", "offset", "timestamp")


@dataclass(frozen=True)
class OffsetSpec:
    """A parsed position: ``kind`` one of `KINDS`, ``value`` the offset or the milliseconds."""

    kind: str
    value: int | None = None

    def __str__(self) -> str:
        if self.kind == "offset":
            return str(self.value)
        if self.kind == "timestamp":
            return "@" + str(self.value)
        return self.kind


def parse_offset(text: str | int | None, default: str, what: str = "startingOffset") -> OffsetSpec:
    """``text`` as an `OffsetSpec` (``default`` when None); `StreamURIError` naming ``what``."""
    if text is None:
        text = default
    if isinstance(text, int):
        return _offset(text, what)
    word = str(text).strip().lower()
    if word in ("first", "earliest"):
        return OffsetSpec("first")
    if word in ("last", "next", "latest"):
        return OffsetSpec("last" if word == "last" else "next")
    if word.lstrip("-").isdigit():
        return _offset(int(word), what)
    if word.startswith("@") and word[1:].isdigit():
        return OffsetSpec("timestamp", int(word[1:]))
    try:
        moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise StreamURIError(
            f"{what} {text!r} is not first, last, next, an offset, an ISO time or @milliseconds"
        ) from None
    if moment.tzinfo is None:
        raise StreamURIError(f"{what} {text!r} has no time zone (add +00:00 or Z)")
    return OffsetSpec("timestamp", int(moment.astimezone(timezone.utc).timestamp() * 1000))


def _offset(value: int, what: str) -> OffsetSpec:
    if value < 0:
        raise StreamURIError(f"{what} {value} is negative: offsets start at 0")
    return OffsetSpec("offset", value)
