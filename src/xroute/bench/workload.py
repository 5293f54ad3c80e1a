"""The seed article's workload (000/003), generated once for benchmarks, tests and samples.

Binding keys have 1 to 8 parts; each part is a word 70% of the time, ``*`` 20% and ``#`` 10%,
never two ``#`` in a row. Routing keys are made from binding keys, each wildcard replaced by a
random word, so a route walks at least as deep as the binding it came from.
"""

from __future__ import annotations

import random
import string

from xroute.core.keys import HASH, STAR

WORD_SHARE, STAR_SHARE = 0.70, 0.20  # '#' takes the remaining 10%
VOCABULARY = 1000  # literal words are drawn from w0 .. w999


def random_word(rng: random.Random, length: int = 6) -> str:
    """A random lowercase word, unlikely to equal a vocabulary word."""
    return "".join(rng.choices(string.ascii_lowercase, k=length))


def seed_pattern(
    rng: random.Random,
    parts: int,
    vocabulary: int = VOCABULARY,
    shares: tuple[float, float] = (WORD_SHARE, STAR_SHARE),
) -> str:
    """One binding key of ``parts`` parts in the seed mix, with no ``#.#``.

    ``shares`` is (word, ``*``) per part, ``#`` taking the rest: seed 002 used (0.89, 0.10).
    """
    word_share, star_share = shares
    words: list[str] = []
    for _ in range(parts):
        draw = rng.random()
        if draw < word_share:
            words.append(f"w{rng.randrange(vocabulary)}")
        elif draw < word_share + star_share or (words and words[-1] == HASH):
            words.append(STAR)
        else:
            words.append(HASH)
    return ".".join(words)


def seed_patterns(
    count: int,
    seed: int = 0,
    min_parts: int = 1,
    max_parts: int = 8,
    vocabulary: int = VOCABULARY,
    shares: tuple[float, float] = (WORD_SHARE, STAR_SHARE),
) -> list[str]:
    """``count`` binding keys of the seed mix, lengths uniform in [min_parts, max_parts]."""
    rng = random.Random(seed)
    return [
        seed_pattern(rng, rng.randint(min_parts, max_parts), vocabulary, shares)
        for _ in range(count)
    ]


def key_from_pattern(pattern: str, rng: random.Random) -> str:
    """A routing key built from a binding key: each ``*`` and ``#`` becomes a random word."""
    return ".".join(
        random_word(rng) if word in (STAR, HASH) else word for word in pattern.split(".")
    )


def seed_keys(patterns: list[str], count: int, seed: int = 1, length: int | None = None) -> list[str]:
    """``count`` routing keys made from ``patterns`` (of ``length`` parts only, if given)."""
    rng = random.Random(seed)
    pool = patterns if length is None else [p for p in patterns if p.count(".") + 1 == length]
    if not pool:
        raise ValueError(f"no binding key of {length} parts to build keys from")
    return [key_from_pattern(rng.choice(pool), rng) for _ in range(count)]
