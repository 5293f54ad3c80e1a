"""The broker's memory watermark: what it holds in messages, and the alarm that blocks
publishers above a limit (RabbitMQ's ``vm_memory_high_watermark``).

RabbitMQ compares the Erlang VM's whole memory with its watermark. A Python process rarely
gives freed memory back to the system, so its resident size would keep the alarm on long after
the queues drained; the gauge counts instead what the broker holds for clients and can free:
the bytes (properties and body) of every message in a queue or delivered and not yet acked,
and of every message a publisher is still sending. Everything else a connection holds is
bounded on its own (frames by ``frame_max``, output by the transport's flow control).
"""

from __future__ import annotations

from collections.abc import Callable


class MemoryWatermark:
    """Bytes held, against an optional ``limit``; ``on_alarm(True/False)`` hears each crossing.

    The alarm goes on when ``held`` passes ``limit`` and off when it is back at or under it,
    as RabbitMQ's memory alarm does."""

    __slots__ = ("limit", "held", "alarm", "on_alarm")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.held = 0
        self.alarm = False
        self.on_alarm: Callable[[bool], None] | None = None

    def hold(self, size: int) -> None:
        """``size`` more bytes are held."""
        self.held += size
        if self.limit is not None and not self.alarm and self.held > self.limit:
            self._set(True)

    def release(self, size: int) -> None:
        """``size`` bytes held before are freed."""
        self.held -= size
        if self.alarm and self.held <= self.limit:
            self._set(False)

    def _set(self, on: bool) -> None:
        self.alarm = on
        if self.on_alarm is not None:
            self.on_alarm(on)


def parse_size(text: str) -> int:
    """A size as ``--memory-limit`` takes it: bytes, or a number with KB, MB, GB (powers of
    1000) or KiB, MiB, GiB (powers of 1024). ValueError names what was wrong."""
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
    cleaned = text.strip().upper().replace(" ", "")
    number = cleaned.rstrip("KMGIB")
    unit = cleaned[len(number):]
    if unit not in units or not number:
        raise ValueError(f"{text!r} is not a size: give bytes, or a number with KB, MB, GB, "
                         "KiB, MiB or GiB")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"{text!r} is not a size") from None
    if value <= 0:
        raise ValueError(f"{text!r}: a memory limit must be positive")
    return int(value * units[unit])
