"""Reads that outlive a broker restart: an attempt that fails because the node is away is
tried again, after a growing pause, until the reader's ``reconnectTimeout`` runs out; then
`StreamUnreachable` names the stream, the node and the last error.

What counts as "away" (`is_transient`): a connection refused, reset or closed
(`StreamDisconnected`, any `ConnectionError`), a timeout, the node still recovering its
streams after a start (rstream's ``StreamNotAvailable``, ``LeaderNotAvailable``), and a
management API that does not answer (it stops and starts with the node). A refused password, a
stream that does not exist, or offsets retention removed are not retried: waiting would not
change them.

The caller makes each attempt whole (a fresh connection) and idempotent: a range read resumes
from the first offset it has not yet got, so nothing is read twice across a reconnection.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from xroute.core.errors import ManagementAuthFailed, StreamUnreachable

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 60.0  # a node's stop_app/start_app, or a restart, takes a few seconds
FIRST_DELAY_S = 0.25
MAX_DELAY_S = 5.0
# rstream's own kinds of "not yet": the node is up but has not recovered the stream.
_NOT_YET = ("StreamNotAvailable", "LeaderNotAvailable", "ConnectionClosed")


def delays(first: float = FIRST_DELAY_S, most: float = MAX_DELAY_S) -> Iterator[float]:
    """The pauses between attempts: doubling from ``first``, at most ``most`` each."""
    delay = first
    while True:
        yield delay
        delay = min(delay * 2, most)


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` says the node is away for now (see the module's docstring)."""
    if isinstance(error, ManagementAuthFailed):
        return False
    if isinstance(error, (ConnectionError, TimeoutError)):
        return True
    return type(error).__name__ in _NOT_YET and type(error).__module__.startswith("rstream")


def retrying(
    attempt: Callable[[], T],
    *,
    timeout_s: float,
    what: str,
    endpoint: str,
    stream: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``attempt()``'s result, trying again while it fails with a transient error and
    ``timeout_s`` seconds have not passed since the first failure. With ``timeout_s`` 0 the
    first error is raised as it is (a preflight says at once what is wrong)."""
    deadline: float | None = None
    tries = 0
    pauses = delays()
    while True:
        try:
            return attempt()
        except Exception as error:
            if not is_transient(error):
                raise
            tries += 1
            if timeout_s <= 0:
                raise
            now = clock()
            deadline = now + timeout_s if deadline is None else deadline
            pause = next(pauses)
            if now + pause > deadline:
                raise StreamUnreachable(
                    f"{what}: the node at {endpoint} did not answer for {timeout_s:g} s "
                    f"({tries} tries; last: {type(error).__name__}: {error}); the reader "
                    "waits reconnectTimeout seconds for a node to come back (the source's "
                    "option, reconnect= in the URI)",
                    stream,
                    endpoint,
                ) from None
            sleep(pause)
