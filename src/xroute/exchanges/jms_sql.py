"""A JMS message selector (SQL) compiled to the Erlang term the JMS client sends as
``rjms_erlang_selector``: an xroute extension, so that a binding can be written as SQL.

``sql_selector("colour = 'blue' AND weight > 2")`` gives the term text for
``Topology.bind(..., arguments={"rjms_erlang_selector": ...})``. The grammar is JMS 1.1's:
OR, AND, NOT; comparisons; ``[NOT] BETWEEN a AND b``; ``[NOT] IN ('a', ...)``;
``[NOT] LIKE 'pattern' [ESCAPE 'c']``; ``IS [NOT] NULL``; ``+ - * /``; string, numeric and
boolean literals; identifiers.
"""

from __future__ import annotations

import re
from typing import Any

from xroute.core.errors import SelectorError
from xroute.erlang import Atom, format_term

_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)"
    r"|(?P<string>'(?:[^']|'')*')|(?P<op><>|<=|>=|[=<>+\-*/(),])"
    r"|(?P<word>[A-Za-z_$][A-Za-z0-9_$.]*))"
)
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "LIKE", "ESCAPE", "IS", "NULL", "TRUE", "FALSE"}


def _tokens(text: str) -> list[tuple[str, str]]:
    found, at = [], 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise SelectorError(f"cannot read the selector at {text[at:at + 20]!r}", text)
        kind = match.lastgroup or ""
        value = match.group(kind)
        if kind == "word" and value.upper() in _KEYWORDS:
            kind, value = "keyword", value.upper()
        found.append((kind, value))
        at = match.end()
    return found


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self, *wanted: str) -> bool:
        return self.at < len(self.tokens) and self.tokens[self.at][1] in wanted

    def take(self, *wanted: str) -> str:
        if not self.peek(*wanted):
            seen = self.tokens[self.at][1] if self.at < len(self.tokens) else "the end"
            raise SelectorError(f"expected {' or '.join(wanted)}, found {seen!r}", self.text)
        self.at += 1
        return self.tokens[self.at - 1][1]

    def expression(self) -> Any:
        left = self.conjunction()
        while self.peek("OR"):
            self.at += 1
            left = (Atom("or"), left, self.conjunction())
        return left

    def conjunction(self) -> Any:
        left = self.negation()
        while self.peek("AND"):
            self.at += 1
            left = (Atom("and"), left, self.negation())
        return left

    def negation(self) -> Any:
        if self.peek("NOT"):
            self.at += 1
            return (Atom("not"), self.negation())
        return self.predicate()

    def predicate(self) -> Any:
        left = self.sum()
        negated = False
        if self.peek("IS"):
            self.at += 1
            negated = bool(self.peek("NOT")) and bool(self.take("NOT"))
            self.take("NULL")
            return (Atom("not_null" if negated else "is_null"), left)
        if self.peek("NOT"):
            self.at += 1
            negated = True
        prefix = "not_" if negated else ""
        if self.peek("BETWEEN"):
            self.at += 1
            low = self.sum()
            self.take("AND")
            return (Atom(prefix + "between"), left, (Atom("range"), low, self.sum()))
        if self.peek("IN"):
            self.at += 1
            self.take("(")
            items = [self.string()]
            while self.peek(","):
                self.at += 1
                items.append(self.string())
            self.take(")")
            return (Atom(prefix + "in"), left, items)
        if self.peek("LIKE"):
            self.at += 1
            pattern = self.string()
            escape: Any = Atom("no_escape")
            if self.peek("ESCAPE"):
                self.at += 1
                escape = self.string()
            return (Atom(prefix + "like"), left, pattern, escape)
        if negated:
            raise SelectorError("NOT must be followed by BETWEEN, IN or LIKE here", self.text)
        if self.peek("=", "<>", "<", ">", "<=", ">="):
            op = self.take("=", "<>", "<", ">", "<=", ">=")
            return (Atom(op), left, self.sum())
        return left

    def sum(self) -> Any:
        left = self.product()
        while self.peek("+", "-"):
            op = self.take("+", "-")
            left = (Atom(op), left, self.product())
        return left

    def product(self) -> Any:
        left = self.unary()
        while self.peek("*", "/"):
            op = self.take("*", "/")
            left = (Atom(op), left, self.unary())
        return left

    def unary(self) -> Any:
        if self.peek("+", "-"):
            op = self.take("+", "-")
            return (Atom(op), self.unary())
        return self.primary()

    def string(self) -> bytes:
        if self.at < len(self.tokens) and self.tokens[self.at][0] == "string":
            self.at += 1
            return self.tokens[self.at - 1][1][1:-1].replace("''", "'").encode("utf-8")
        raise SelectorError("expected a string literal", self.text)

    def primary(self) -> Any:
        if self.at >= len(self.tokens):
            raise SelectorError("the selector ends too soon", self.text)
        kind, value = self.tokens[self.at]
        if value == "(":
            self.at += 1
            inner = self.expression()
            self.take(")")
            return inner
        self.at += 1
        if kind == "number":
            return float(value) if any(c in value for c in ".eE") else int(value)
        if kind == "string":
            return value[1:-1].replace("''", "'").encode("utf-8")
        if value in ("TRUE", "FALSE"):
            return Atom(value.lower())
        if kind == "word":
            return (Atom("ident"), value.encode("utf-8"))
        raise SelectorError(f"unexpected {value!r}", self.text)


def sql_selector(sql: str) -> str:
    """The ``rjms_erlang_selector`` text of a JMS SQL selector; `SelectorError` if it is not
    one."""
    parser = _Parser(sql)
    term = parser.expression()
    if parser.at != len(parser.tokens):
        raise SelectorError(f"unexpected {parser.tokens[parser.at][1]!r}", sql)
    return format_term(term) + "."
