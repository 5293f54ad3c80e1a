"""Erlang terms in Python: `Atom`, the standard order of terms (`term_key`), and terms read
from text (`parse_term`, as ``erl_scan`` + ``erl_parse:parse_term``) and written as text
(`format_term`).

Terms are Python values: `bytes` is a binary, `int` an integer, `float` a float, `Atom` an
atom (``True``/``False`` stand for ``true``/``false``), `tuple` a tuple and `list` a list.
`str` is taken as its UTF-8 binary, as RabbitMQ holds every string it routes on.
"""

from __future__ import annotations

import re
from typing import Any


class Atom(str):
    """An Erlang atom (``undefined``, ``true``, ``longstr``...), as opposed to a binary."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Atom({str(self)!r})"


UNDEFINED = Atom("undefined")


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

    def strings(self) -> list[int]:
        # Adjacent string literals are one string ("ab" "cd"), as the pretty printer splits
        # a long string or binary over several lines.
        out = self.chars('"')
        while self.peek('"'):
            out += self.chars('"')
        return out

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
        found = re.compile(
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
            return self.strings()
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
                data = self.strings()
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


def parse_term(text: str, full_stop: bool = True) -> Any:
    """The term in ``text``, which must end with ``.`` as ``erl_parse:parse_term`` wants
    (``full_stop=False``: may end without one, as ``~p`` prints terms); `TermSyntaxError`
    otherwise."""
    reader = _Reader(text)
    term = reader.term()
    if full_stop or reader.peek("."):
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


def io_format(value: Any, unicode: bool = True) -> str:
    """A field value as RabbitMQ's texts print it with ``~p`` (``unicode``: ``~tp``, from
    4.0): text and bytes as a binary (``<<"any">>``), integers and floats as numbers, booleans
    as atoms, void as ``undefined``, arrays as lists."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return _erlang_float(float(value))
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")
    if isinstance(value, (bytes, bytearray)):
        return _erlang_binary(bytes(value), unicode)
    if value is None:
        return "undefined"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(io_format(v, unicode) for v in value) + "]"
    return repr(value)


def _erlang_float(value: float) -> str:
    # Erlang prints the shortest form that reads back, always with a fraction: 1.0, 1.0e16.
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}e{int(exponent)}"
    return text if "." in text else text + ".0"


def _erlang_binary(data: bytes, unicode: bool) -> str:
    def printable(text: str) -> bool:
        return all(ch in "\n\t\r\x0b\x0c\x08\x1b" or 32 <= ord(ch) != 127 for ch in text)

    if not data:
        return "<<>>"  # as ~p prints the empty binary
    if all(32 <= b < 127 or b in b"\n\t\r" for b in data):
        escaped = data.decode("ascii").replace("\\", "\\\\").replace('"', '\\"')
        escaped = escaped.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
        return '<<"' + escaped + '">>'
    if unicode:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and printable(text):
            escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
            return '<<"' + escaped + '"/utf8>>'
    return "<<" + ",".join(str(b) for b in data) + ">>"
