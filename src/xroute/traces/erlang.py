"""Erlang term text, as RabbitMQ prints it with ``~p``/``~tp``: the tracing plugin's ``text``
log format (routing keys, properties) and the event exchange's binding arguments
(``{<<"x-match">>,longstr,<<"all">>}``). Only the term kinds those printers produce are read:
lists, tuples, binaries, atoms, integers, floats and strings (lists of character codes)."""

from __future__ import annotations

import re
from typing import Any

from xroute.errors import TraceFormatError


class Atom(str):
    """An Erlang atom (``true``, ``longstr``, ``undefined``): a `str` that remembers it was one."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Atom({str.__repr__(self)})"


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<open><<|\[|\{)
    | (?P<close>>>|\]|\})
    | (?P<comma>,)
    | (?P<slash>/utf8)
    | (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<quoted>'(?:[^'\\]|\\.)*')
    | (?P<float>-?\d+\.\d+(?:[eE][-+]?\d+)?)
    | (?P<integer>-?\d+(?:\#[0-9a-zA-Z]+)?)
    | (?P<atom>[a-z][A-Za-z0-9_@]*)
    | (?P<dollar>\$(?:\\.|.))
    )""",
    re.VERBOSE | re.DOTALL,
)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "s": " ", "e": "\x1b", "f": "\f", "b": "\b",
            "v": "\v", "d": "\x7f", "0": "\0"}


def _unescape(body: str) -> str:
    """The text of an Erlang string literal's body (between the quotes)."""
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        nxt = body[i + 1]
        octal = re.match(r"[0-7]{1,3}", body[i + 1 :])
        if octal:
            out.append(chr(int(octal.group(), 8)))
            i += 1 + len(octal.group())
        elif nxt == "x":
            hexa = re.match(r"\{([0-9a-fA-F]+)\}|([0-9a-fA-F]{2})", body[i + 2 :])
            if not hexa:
                raise TraceFormatError(f"bad \\x escape in Erlang text {body!r}")
            out.append(chr(int(hexa.group(1) or hexa.group(2), 16)))
            i += 2 + len(hexa.group())
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = self._tokens(text)
        self.at = 0

    @staticmethod
    def _tokens(text: str) -> list[tuple[str, str]]:
        tokens: list[tuple[str, str]] = []
        position = 0
        end = len(text.rstrip().rstrip("."))
        while position < end:
            found = _TOKEN.match(text, position)
            if not found or found.end() == position:
                raise TraceFormatError(
                    f"not Erlang term text at offset {position}: {text[position:position + 40]!r}"
                )
            position = found.end()
            kind = found.lastgroup or ""
            tokens.append((kind, found.group(kind)))
        return tokens

    def next(self) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise TraceFormatError(f"Erlang term text ends too soon: {self.text[:80]!r}")
        token = self.tokens[self.at]
        self.at += 1
        return token

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.at] if self.at < len(self.tokens) else ("", "")

    def term(self) -> Any:
        kind, value = self.next()
        if kind == "open":
            return {"[": self._list, "{": self._tuple, "<<": self._binary}[value]()
        if kind == "string":  # an Erlang string is a list of character codes
            return [ord(c) for c in _unescape(value[1:-1])]
        if kind == "quoted":
            return Atom(_unescape(value[1:-1]))
        if kind == "atom":
            return Atom(value)
        if kind == "integer":
            base, _, digits = value.lstrip("-").partition("#")
            number = int(digits, int(base)) if digits else int(base)
            return -number if value.startswith("-") else number
        if kind == "float":
            return float(value)
        if kind == "dollar":
            return ord(_unescape(value[1:]))
        raise TraceFormatError(f"unexpected {value!r} in Erlang term text {self.text[:80]!r}")

    def _items(self, close: str) -> list[Any]:
        items: list[Any] = []
        if self.peek() == ("close", close):
            self.next()
            return items
        while True:
            items.append(self.term())
            kind, value = self.next()
            if (kind, value) == ("close", close):
                return items
            if kind != "comma":
                raise TraceFormatError(f"expected ',' or {close!r}, got {value!r}")

    def _list(self) -> list[Any]:
        return self._items("]")

    def _tuple(self) -> tuple[Any, ...]:
        return tuple(self._items("}"))

    def _binary(self) -> bytes:
        # <<"text">>, <<"te" "xt">> (a long binary split by the pretty printer), <<"é"/utf8>>,
        # or <<104,105>> (bytes that are not printable text). The text is read as Latin-1, one
        # character a byte (`parse_term`), so a binary's characters are its bytes either way.
        out = bytearray()
        while True:
            kind, value = self.next()
            if (kind, value) == ("close", ">>"):
                return bytes(out)
            if kind == "string":
                out += _unescape(value[1:-1]).encode("latin-1", "replace")
                if self.peek()[0] == "slash":
                    self.next()
            elif kind == "integer":
                out.append(int(value) & 0xFF)
            elif kind != "comma":
                raise TraceFormatError(f"unexpected {value!r} in an Erlang binary")


def parse_term(text: str) -> Any:
    """The Python value of one Erlang term printed as text (a trailing ``.`` is allowed):
    lists (strings too: lists of character codes) are `list`, tuples `tuple`, binaries
    `bytes`, atoms `Atom`.

    Give text decoded as Latin-1 (one character a byte), as RabbitMQ writes a binary's UTF-8
    bytes as they are: a binary then holds exactly the bytes between its quotes."""
    reader = _Reader(text)
    value = reader.term()
    if reader.at != len(reader.tokens):
        raise TraceFormatError(f"text after the Erlang term: {text[:80]!r}")
    return value


def typed_value(kind: Any, value: Any) -> Any:
    """The Python value of one AMQP field as RabbitMQ's ``{Type, Value}`` pair holds it
    (``longstr`` binaries become `str` when they are UTF-8, `bytes` otherwise)."""
    kind = str(kind)
    if kind in ("longstr", "shortstr", "binary"):
        if kind != "binary":
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                return bytes(value)
        return bytes(value)
    if kind == "bool":
        return value == "true"
    if kind == "void":
        return None
    if kind == "table":
        return typed_table(value)
    if kind == "array":
        return [typed_value(k, v) for k, v in value]
    if kind in ("double", "float"):
        return float(value)
    if kind == "decimal":
        from decimal import Decimal

        scale, digits = value
        return Decimal(digits).scaleb(-scale)
    if kind == "timestamp":
        from datetime import datetime, timezone

        return datetime.fromtimestamp(value, tz=timezone.utc)
    return int(value)  # signedint, long, short, byte, unsignedbyte, unsignedshort, unsignedint


def typed_table(fields: list[tuple[bytes, Any, Any]]) -> dict[str, Any]:
    """An AMQP table printed by RabbitMQ (``[{<<"name">>,type,value}, ...]``) as a dict."""
    return {name.decode("utf-8"): typed_value(kind, value) for name, kind, value in fields}
