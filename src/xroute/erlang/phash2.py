"""``erlang:phash2/1,2`` bit for bit: erts' ``make_hash2`` (OTP 25 ``utils.c``) and the atom
table's ``atom_hash`` (``atom.c``), over the terms of `xroute.erlang.terms`."""

from __future__ import annotations

import struct
from typing import Any

from xroute.erlang.terms import Atom

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
