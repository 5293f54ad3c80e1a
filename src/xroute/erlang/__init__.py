"""The few Erlang/OTP functions RabbitMQ's exchange types route by, bit for bit:
`phash2` (``erlang:phash2/1,2``), OTP ``rand``'s `Exs1024`, the standard order of terms
(`term_key`), and terms read from and written as text. The tests compare them with ``erl``."""

from xroute.erlang.phash2 import atom_hash, make_hash2, phash2
from xroute.erlang.rand import Exs1024
from xroute.erlang.terms import (
    UNDEFINED,
    Atom,
    TermSyntaxError,
    format_term,
    parse_term,
    term_key,
)

__all__ = [
    "UNDEFINED",
    "Atom",
    "Exs1024",
    "TermSyntaxError",
    "atom_hash",
    "format_term",
    "make_hash2",
    "parse_term",
    "phash2",
    "term_key",
]
