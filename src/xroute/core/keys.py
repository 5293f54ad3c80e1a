"""Splitting and validating routing keys and binding patterns: the one validation path that the
library, the CLI and the pipeline share."""

from __future__ import annotations

from typing import Any

from xroute.core.errors import InvalidPattern, InvalidRoutingKey

MAX_KEY_BYTES = 255  # an AMQP short string
STAR = "*"
HASH = "#"

# Each character is at most 4 UTF-8 bytes, so a key this short cannot exceed the limit
# and the hot path skips the encode.
ALWAYS_SHORT = MAX_KEY_BYTES // 4


def _problem(text: Any) -> str | None:
    if not isinstance(text, str):
        return f"expected str, got {type(text).__name__}"
    if len(text) <= ALWAYS_SHORT:
        if text.isascii():
            return None
    try:
        # Bytes that are not UTF-8 come from the wire as surrogate escapes
        # (``bytes.decode("utf-8", "surrogateescape")``): RabbitMQ takes any bytes in a
        # routing key, so they count as the bytes they stand for.
        size = len(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return "not valid UTF-8 text (it holds a lone surrogate that stands for no byte)"
    if size > MAX_KEY_BYTES:
        return f"{size} bytes in UTF-8, more than {MAX_KEY_BYTES}"
    return None


def key_bytes(text: str) -> bytes:
    """A routing key or binding key as the bytes it travels as (surrogate escapes as the bytes
    they stand for)."""
    return text.encode("utf-8", "surrogateescape")


def arrow_keys_fit(keys: Any) -> bool:
    """True if a pyarrow string array has no null and no key longer than `MAX_KEY_BYTES`
    (Arrow text is UTF-8, so no other key could fail `check_routing_key`): the longest key
    alone is compared, a per-key comparison only where this says no (it took twice as long)."""
    import pyarrow.compute as pc

    return not keys.null_count and (
        not len(keys) or pc.max(pc.binary_length(keys)).as_py() <= MAX_KEY_BYTES
    )


def check_routing_key(key: Any) -> str:
    """Return ``key`` if it is a valid routing key, else raise `InvalidRoutingKey`."""
    problem = _problem(key)
    if problem is not None:
        raise InvalidRoutingKey(key, problem)
    return key


def is_short_key(key: str) -> bool:
    """True if ``key`` is a routing key RabbitMQ accepts as one (a short string): CC and BCC
    keys may be longer, or bytes, and take the slower paths of the exchanges."""
    return _problem(key) is None


def check_pattern(pattern: Any) -> str:
    """Return ``pattern`` if it is a valid binding key, else raise `InvalidPattern`."""
    # hot: every bind checks its key (bind rate): a short ASCII str is told apart inline
    if pattern.__class__ is str and len(pattern) <= ALWAYS_SHORT and pattern.isascii():
        return pattern
    problem = _problem(pattern)
    if problem is not None:
        raise InvalidPattern(pattern, problem)
    return pattern


def split_words(text: str) -> tuple[str, ...]:
    """Split a key or pattern into words: ``""`` has none; empty words are kept (``a..b``)."""
    return tuple(text.split(".")) if text else ()
