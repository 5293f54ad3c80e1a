"""The few Erlang/OTP functions RabbitMQ's exchange types route by, bit for bit: `phash2`
(``erlang:phash2/1,2``), the ``exs1024`` generator of OTP's ``rand`` seeded as
``rand:seed_s(exs1024, {K, K, K})``, and the standard order of terms (`term_key`).

Terms are Python values: `bytes` is a binary, `int` an integer, `float` a float, `Atom` an
atom, `tuple` a tuple and `list` a list. `str` is taken as its UTF-8 binary, as RabbitMQ
holds every string it routes on.

Written from OTP 25's ``erts/emulator/beam/utils.c`` (``make_hash2``), ``atom.c``
(``atom_hash``) and ``lib/stdlib/src/rand.erl``; the tests compare them with ``erl``.
"""

from __future__ import annotations

import struct
from typing import Any

_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B9  # HCONST: (HCONST * n) mod 2**32 are the constants below


def _hconst(n: int) -> int:
    return (_GOLDEN * n) & _MASK32


_HCONST_2, _HCONST_3, _HCONST_4 = _hconst(2), _hconst(3), _hconst(4)
_HCONST_9, _HCONST_10, _HCONST_11 = _hconst(9), _hconst(10), _hconst(11)
_HCONST_12, _HCONST_13, _HCONST_15 = _hconst(12), _hconst(13), _hconst(15)
_NIL_DEF = 2  # erl_term.h: the tag number of []
_EMPTY_LIST_HASH = 3468870702  # the hash of [] alone
_SMALL_BITS = 60  # a 64-bit VM's immediate integers


class Atom(str):
    """An Erlang atom (``undefined``, ``true``, ``longstr``...), as opposed to a binary."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Atom({str(self)!r})"


UNDEFINED = Atom("undefined")


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    # Bob Jenkins' lookup2 mix, on 32-bit words.
    a = (a - b - c) & _MASK32
    a ^= c >> 13
    b = (b - c - a) & _MASK32
    b ^= (a << 8) & _MASK32
    c = (c - a - b) & _MASK32
    c ^= b >> 13
    a = (a - b - c) & _MASK32
    a ^= c >> 12
    b = (b - c - a) & _MASK32
    b ^= (a << 16) & _MASK32
    c = (c - a - b) & _MASK32
    c ^= b >> 5
    a = (a - b - c) & _MASK32
    a ^= c >> 3
    b = (b - c - a) & _MASK32
    b ^= (a << 10) & _MASK32
    c = (c - a - b) & _MASK32
    c ^= b >> 15
    return a, b, c


def _uint32_hash_2(x: int, y: int, const: int, hash_: int) -> int:
    return _mix((const + x) & _MASK32, (const + y) & _MASK32, hash_)[2]


def _block_hash(data: bytes, initval: int) -> int:
    a = b = _GOLDEN
    c = initval
    full = len(data) - len(data) % 12
    for i in range(0, full, 12):
        a = (a + int.from_bytes(data[i : i + 4], "little")) & _MASK32
        b = (b + int.from_bytes(data[i + 4 : i + 8], "little")) & _MASK32
        c = (c + int.from_bytes(data[i + 8 : i + 12], "little")) & _MASK32
        a, b, c = _mix(a, b, c)
    rest = data[full:]
    c = (c + len(data)) & _MASK32
    # The last bytes: a and b take 4 each, c the 3 after its low byte (the length's).
    a = (a + int.from_bytes(rest[0:4], "little")) & _MASK32
    b = (b + int.from_bytes(rest[4:8], "little")) & _MASK32
    c = (c + (int.from_bytes(rest[8:11], "little") << 8)) & _MASK32
    return _mix(a, b, c)[2]


def atom_hash(name: str) -> int:
    """``atom_hash`` of erts' atom table (hashpjw over the atom's bytes)."""
    data = name.encode("utf-8")
    h = 0
    i, n = 0, len(data)
    while i < n:
        v = data[i]
        i += 1
        # OTP's "latin1 clutch": a two-byte UTF-8 sequence for U+0080..U+00FF counts as one.
        if i < n and (v & 0xFE) == 0xC2 and (data[i] & 0xC0) == 0x80:
            v = ((v << 6) | (data[i] & 0x3F)) & 0xFF
            i += 1
        h = ((h << 4) + v) & _MASK32
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
            h ^= g
    return h


def _int_hash(value: int, hash_: int) -> int:
    if -(1 << 27) <= value < (1 << 27):
        y = value & _MASK32
        if value < 0:
            hash_ = _uint32_hash_2((-value) & _MASK32, 0, _GOLDEN, hash_)
        return _uint32_hash_2(y, 0, _GOLDEN, hash_)
    const = _HCONST_10 if value < 0 else _HCONST_11
    magnitude = -value if value < 0 else value
    # A bignum's 64-bit digits, least significant first; a small beyond 28 bits is one digit.
    while True:
        digit = magnitude & _MASK64
        hash_ = _uint32_hash_2(digit & _MASK32, digit >> 32, const, hash_)
        magnitude >>= 64
        if not magnitude:
            return hash_


def make_hash2(term: Any) -> int:
    """erts' ``make_hash2``: the 32-bit hash under ``erlang:phash2``."""
    hash_ = 0
    stack: list[Any] = []
    while True:
        kind = type(term)
        if kind is bytes or kind is bytearray or kind is str:
            data = term.encode("utf-8") if kind is str else bytes(term)
            const = (_HCONST_13 + hash_) & _MASK32
            hash_ = _block_hash(data, const) if data else const
        elif kind is Atom:
            value = atom_hash(term)
            hash_ = value if hash_ == 0 else _uint32_hash_2(value, 0, _HCONST_3, hash_)
        elif kind is bool:
            value = atom_hash("true" if term else "false")
            hash_ = value if hash_ == 0 else _uint32_hash_2(value, 0, _HCONST_3, hash_)
        elif kind is int:
            hash_ = _int_hash(term, hash_)
        elif kind is float:
            bits = struct.unpack("<Q", struct.pack("<d", 0.0 if term == 0.0 else term))[0]
            hash_ = _uint32_hash_2(bits >> 32, bits & _MASK32, _HCONST_12, hash_)
        elif kind is tuple:
            hash_ = _uint32_hash_2(len(term), 0, _HCONST_9, hash_)
            if term:
                stack.extend(reversed(term[1:]))
                term = term[0]
                continue
        elif kind is list:
            if not term:
                hash_ = _EMPTY_LIST_HASH if hash_ == 0 else _uint32_hash_2(
                    _NIL_DEF, 0, _HCONST_2, hash_
                )
            else:
                # Leading small integers 0..255 (a string) are packed four to a word.
                count = shift = 0
                i = 0
                while i < len(term) and type(term[i]) is int and 0 <= term[i] <= 255:
                    shift = ((shift << 8) + term[i]) & _MASK32
                    if count == 3:
                        hash_ = _uint32_hash_2(shift, 0, _HCONST_4, hash_)
                        count = shift = 0
                    else:
                        count += 1
                    i += 1
                if count > 0:
                    hash_ = _uint32_hash_2(shift, 0, _HCONST_4, hash_)
                if i < len(term):
                    # [Head | Tail]: the head now, the tail after it.
                    stack.append(term[i + 1 :])
                    term = term[i]
                    continue
                term = []  # the list's end, hashed as [] below
                hash_ = _EMPTY_LIST_HASH if hash_ == 0 else _uint32_hash_2(
                    _NIL_DEF, 0, _HCONST_2, hash_
                )
        else:
            raise TypeError(f"phash2: no Erlang term for {type(term).__name__}")
        if not stack:
            return hash_
        term = stack.pop()


def phash2(term: Any, range_: int | None = None) -> int:
    """``erlang:phash2(Term)`` (27 bits), or ``erlang:phash2(Term, Range)``."""
    hash_ = make_hash2(term)
    if range_ is None:
        return hash_ & ((1 << 27) - 1)
    return hash_ if range_ == 1 << 32 else hash_ % range_


# ----------------------------------------------------------------- rand's exs1024


class Exs1024:
    """OTP ``rand``'s ``exs1024`` (xorshift1024*), seeded as ``rand:seed_s(exs1024, {A, B, C})``."""

    def __init__(self, seed: tuple[int, int, int]) -> None:
        a1, a2, a3 = seed
        b1 = (((a1 & 0x1FFFFF) + 1) * 2097131) & 0x1FFFFF
        b2 = (((a2 & 0x1FFFFF) + 1) * 2097133) & 0x1FFFFF
        b3 = (((a3 & 0x1FFFFF) + 1) * 2097143) & 0x1FFFFF
        r = (b1 << 43) | (b2 << 22) | (b3 << 1) | 1
        words = []
        for _ in range(16):  # 16 words of xorshift64* from the seed, the last first
            r ^= r >> 12
            r ^= (r << 25) & _MASK64
            r ^= r >> 27
            words.append((r * 2685821657736338717) & _MASK64)
        words.reverse()
        self._state = words  # rand's {L, RL}: L then reversed RL
        self._p = 0

    def next(self) -> int:
        """The next 64-bit output."""
        state, p = self._state, self._p
        s0 = state[p]
        p = (p + 1) & 15
        s1 = state[p]
        s1 ^= (s1 << 31) & _MASK64
        s1 ^= s1 >> 11
        s0 ^= s0 >> 30
        state[p] = s0 ^ s1
        self._p = p
        return (state[p] * 1181783497276652981) & _MASK64

    def uniform(self) -> float:
        """``rand:uniform_s/1`` of OTP 25 for exs1024: ``V / (Max + 1)`` in floats."""
        return float(self.next()) / 18446744073709551616.0


# ----------------------------------------------------------------- the standard order of terms

# number < atom < reference < fun < port < pid < tuple < map < nil < list < bit string
_NUMBER, _ATOM, _TUPLE, _NIL, _LIST, _BINARY = 0, 1, 6, 8, 9, 10


def term_key(term: Any) -> tuple:
    """A Python sort key that orders terms as Erlang's standard order (``<``, ``lists:sort``)."""
    kind = type(term)
    if kind is bool:
        return (_ATOM, "true" if term else "false")
    if kind is int or kind is float:
        return (_NUMBER, term)
    if kind is Atom:
        return (_ATOM, str(term))
    if kind is bytes or kind is bytearray:
        return (_BINARY, bytes(term))
    if kind is str:
        return (_BINARY, term.encode("utf-8"))
    if kind is tuple:
        return (_TUPLE, len(term), tuple(term_key(t) for t in term))
    if kind is list:
        return (_LIST, [term_key(t) for t in term]) if term else (_NIL,)
    raise TypeError(f"no Erlang term for {type(term).__name__}")


# ----------------------------------------------------------------- reading a term from text


class TermSyntaxError(ValueError):
    """Text that ``erl_scan:string`` + ``erl_parse:parse_term`` would not read as one term."""


_ESCAPES = {"n": 10, "r": 13, "t": 9, "v": 11, "b": 8, "f": 12, "e": 27, "s": 32, "d": 127}


class _Reader:
    """A reader for the term syntax selectors use: atoms, numbers (``16#ff``, ``$c``,
    floats), strings, binaries (``<<"text">>``, ``<<1,2>>``), lists and tuples, then ``.``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def fail(self, what: str) -> TermSyntaxError:
        return TermSyntaxError(f"{what} at character {self.at + 1}")

    def skip(self) -> None:
        text = self.text
        while self.at < len(text):
            if text[self.at].isspace():
                self.at += 1
            elif text[self.at] == "%":  # a comment, to the end of the line
                end = text.find("\n", self.at)
                self.at = len(text) if end < 0 else end
            else:
                return

    def peek(self, token: str) -> bool:
        self.skip()
        return self.text.startswith(token, self.at)

    def expect(self, token: str) -> None:
        if not self.peek(token):
            raise self.fail(f"expected {token!r}")
        self.at += len(token)

    def chars(self, quote: str) -> list[int]:
        # The characters of a quoted string or atom, escapes resolved (as code points).
        text, out = self.text, []
        self.at += 1
        while True:
            if self.at >= len(text):
                raise self.fail("unterminated quoted text")
            ch = text[self.at]
            self.at += 1
            if ch == quote:
                return out
            if ch != "\\":
                out.append(ord(ch))
                continue
            out.append(self.escape())

    def escape(self) -> int:
        text = self.text
        if self.at >= len(text):
            raise self.fail("unterminated escape")
        ch = text[self.at]
        self.at += 1
        if ch in "01234567":
            digits = ch
            while len(digits) < 3 and self.at < len(text) and text[self.at] in "01234567":
                digits += text[self.at]
                self.at += 1
            return int(digits, 8)
        if ch == "x":
            if text.startswith("{", self.at):
                end = text.index("}", self.at)
                value = int(text[self.at + 1 : end], 16)
                self.at = end + 1
                return value
            value = int(text[self.at : self.at + 2], 16)
            self.at += 2
            return value
        if ch == "^":
            value = ord(text[self.at]) & 31
            self.at += 1
            return value
        return _ESCAPES.get(ch, ord(ch))

    def number(self) -> int | float:
        import re as _re

        found = _re.compile(
            r"[0-9][0-9_]*#[0-9a-zA-Z_]+"
            r"|[0-9][0-9_]*\.[0-9][0-9_]*(?:[eE][+-]?[0-9]+)?"
            r"|[0-9][0-9_]*"
        ).match(self.text, self.at)
        assert found is not None
        token = found.group().replace("_", "")
        self.at = found.end()
        if "#" in token:
            base, digits = token.split("#")
            try:
                return int(digits, int(base))
            except ValueError:
                raise self.fail(f"bad number {token!r}") from None
        return float(token) if "." in token else int(token)

    def term(self) -> Any:
        self.skip()
        if self.at >= len(self.text):
            raise self.fail("unexpected end")
        ch = self.text[self.at]
        if ch == "{":
            self.at += 1
            return tuple(self.sequence("}"))
        if ch == "[":
            self.at += 1
            return self.sequence("]")
        if self.text.startswith("<<", self.at):
            self.at += 2
            return self.binary()
        if ch == '"':
            return self.chars('"')
        if ch == "'":
            return Atom("".join(map(chr, self.chars("'"))))
        if ch == "$":
            self.at += 1
            if self.at >= len(self.text):
                raise self.fail("unexpected end")
            if self.text[self.at] == "\\":
                self.at += 1
                return self.escape()
            self.at += 1
            return ord(self.text[self.at - 1])
        if ch in "+-":
            self.at += 1
            self.skip()
            if self.at < len(self.text) and self.text[self.at].isdigit():
                value = self.number()
                return -value if ch == "-" else value
            raise self.fail("a sign must be followed by a number")
        if ch.isdigit():
            return self.number()
        if ch.isalpha() and ch.islower():
            start = self.at
            while self.at < len(self.text) and (
                self.text[self.at].isalnum() or self.text[self.at] in "_@"
            ):
                self.at += 1
            return Atom(self.text[start : self.at])
        raise self.fail(f"unexpected {ch!r}")

    def sequence(self, close: str) -> list[Any]:
        items: list[Any] = []
        if self.peek(close):
            self.at += 1
            return items
        while True:
            items.append(self.term())
            if self.peek(","):
                self.at += 1
                continue
            if close == "]" and self.peek("|"):
                raise self.fail("improper lists are not supported")
            self.expect(close)
            return items

    def binary(self) -> bytes:
        out = bytearray()
        if self.peek(">>"):
            self.at += 2
            return bytes(out)
        while True:
            self.skip()
            if self.peek('"'):
                data = self.chars('"')
                if self.peek("/utf8"):
                    self.at += len("/utf8")
                    out += "".join(map(chr, data)).encode("utf-8")
                else:
                    out += bytes(c & 0xFF for c in data)
            else:
                value = self.term()
                if type(value) is not int:
                    raise self.fail("a binary holds integers and strings")
                out.append(value & 0xFF)
            if self.peek(","):
                self.at += 1
                continue
            self.expect(">>")
            return bytes(out)


def parse_term(text: str) -> Any:
    """The term in ``text``, which must end with ``.`` as ``erl_parse:parse_term`` wants;
    `TermSyntaxError` otherwise."""
    reader = _Reader(text)
    term = reader.term()
    reader.expect(".")
    reader.skip()
    if reader.at != len(text):
        raise reader.fail("text after the term")
    return term


def format_term(term: Any) -> str:
    """``term`` as Erlang source text (binaries as byte lists, floats exact)."""
    kind = type(term)
    if kind is Atom:
        return "'" + str(term).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if kind is bool:
        return "true" if term else "false"
    if kind is bytes or kind is bytearray:
        if all(32 <= b < 127 and b not in b'"\\' for b in term):
            return '<<"' + bytes(term).decode("ascii") + '">>'
        return "<<" + ",".join(str(b) for b in term) + ">>"
    if kind is str:
        return format_term(term.encode("utf-8"))
    if kind is int:
        return str(term)
    if kind is float:
        return repr(term) if "." in repr(term) and "e" not in repr(term) else "%.17e" % term
    if kind is tuple:
        return "{" + ",".join(format_term(t) for t in term) + "}"
    if kind is list:
        return "[" + ",".join(format_term(t) for t in term) + "]"
    raise TypeError(f"no Erlang term for {type(term).__name__}")
