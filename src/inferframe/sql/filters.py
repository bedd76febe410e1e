"""A DuckDB filter over a DataFrame's scan, as an inferframe expression: the rows a query drops are never computed.

DuckDB reads a DataFrame as an Arrow stream and applies its ``WHERE`` to the rows it reads; it
passes no filter into the stream. Its plan (``EXPLAIN``) shows the filter it puts right above the
scan, as text: :func:`pushable` turns the parts of that text that read only columns no model or UDF
computes into an inferframe predicate, which the DataFrame applies before its AI columns (the
optimizer moves a relational filter below them). DuckDB still applies its whole filter, so a part
that is not pushed (an AI column in it, or syntax this module does not read) only costs calls.

Only the conjuncts (the parts joined by a top-level ``AND``) are pushed, each whole: comparisons of a
column with a literal or another column, ``IS [NOT] NULL``, ``AND``/``OR``/``NOT`` of those
(inferframe's ``&``/``|`` use SQL's three-valued logic, as DuckDB does), and ``contains``,
``prefix`` and ``suffix`` of a string column. Anything else is left to DuckDB.

Example:
    >>> pushable("((stars >= 4) AND (label = 'x'))", {"stars", "label"})
    and(ge(col(stars), lit(4)), eq(col(label), lit('x')))
    >>> pushable("((stars >= 4) AND (summary = 'x'))", {"stars"})     # summary: an AI column
    ge(col(stars), lit(4))
    >>> pushable("(stars::DOUBLE > 3.5)", {"stars"}) is None          # a cast: left to DuckDB
    True
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any, Collection

from inferframe.expressions.expression import Expression, col, lit

_TOKEN = re.compile(r"""\s*(?:
    (?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
  | (?P<str>'(?:[^']|'')*')
  | (?P<qid>"(?:[^"]|"")*")
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,)
  | (?P<other>\S)
)""", re.X)
_COMPARE = MappingProxyType({"=": "__eq__", "==": "__eq__", "<>": "__ne__", "!=": "__ne__", "<": "__lt__",
                             "<=": "__le__", ">": "__gt__", ">=": "__ge__"})
_STRING_FUNCTIONS = MappingProxyType({"contains": "contains", "prefix": "startswith", "suffix": "endswith"})


class _Unsupported(Exception):
    """Syntax this module does not turn into an expression: that part stays DuckDB's alone."""


def pushable(text: str, columns: Collection[str]) -> Expression | None:
    """The conjuncts of DuckDB's filter ``text`` that read only ``columns``, as one predicate (None: none).

    Parameters:
        text: the filter as DuckDB's plan prints it (a FILTER's ``Expression``, a scan's ``Filters``).
        columns: the columns that may be read before the AI columns are computed.
    """
    try:
        tokens = _tokens(text)
    except _Unsupported:
        return None
    pushed = []
    for conjunct in _split_and(tokens):
        try:
            expr, used = _Parser(conjunct).parse()
        except _Unsupported:
            continue
        if used <= set(columns):
            pushed.append(expr)
    if not pushed:
        return None
    out = pushed[0]
    for expr in pushed[1:]:
        out = out & expr
    return out


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise _Unsupported(text[pos:])
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _split_and(tokens: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The parts joined by AND at the top level, after removing parentheses around the whole."""
    while tokens and tokens[0] == ("op", "(") and _closing(tokens, 0) == len(tokens) - 1:
        tokens = tokens[1:-1]
    parts, depth, start = [], 0, 0
    for i, (kind, value) in enumerate(tokens):
        if value == "(":
            depth += 1
        elif value == ")":
            depth -= 1
        elif depth == 0 and kind == "id" and value.upper() == "AND":
            parts.append(tokens[start:i])
            start = i + 1
    parts.append(tokens[start:])
    return [p for p in parts if p]


def _closing(tokens: list[tuple[str, str]], i: int) -> int:
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j][1] == "(":
            depth += 1
        elif tokens[j][1] == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


class _Parser:
    """Recursive descent over one conjunct: or > and > not > comparison > atom."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.i, self.used = tokens, 0, set()

    def parse(self) -> tuple[Expression, set[str]]:
        expr = self._or()
        if self.i != len(self.tokens):
            raise _Unsupported(self.tokens[self.i])
        return expr, self.used

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _keyword(self, word: str) -> bool:
        tok = self._peek()
        if tok is not None and tok[0] == "id" and tok[1].upper() == word:
            self.i += 1
            return True
        return False

    def _expect(self, value: str) -> None:
        tok = self._peek()
        if tok is None or tok[1] != value:
            raise _Unsupported(tok)
        self.i += 1

    def _or(self) -> Expression:
        expr = self._and()
        while self._keyword("OR"):
            expr = expr | self._and()
        return expr

    def _and(self) -> Expression:
        expr = self._not()
        while self._keyword("AND"):
            expr = expr & self._not()
        return expr

    def _not(self) -> Expression:
        if self._keyword("NOT"):
            return ~self._not()
        return self._comparison()

    def _comparison(self) -> Expression:
        left, is_column = self._atom()
        if self._keyword("IS"):
            negated = self._keyword("NOT")
            if not self._keyword("NULL") or not is_column:
                raise _Unsupported("IS")
            return left.not_null() if negated else left.is_null()
        tok = self._peek()
        if tok is not None and tok[0] == "op" and tok[1] in _COMPARE:
            self.i += 1
            right, right_is_column = self._atom()
            if not (is_column or right_is_column):
                raise _Unsupported("a comparison of two literals")
            return getattr(left, _COMPARE[tok[1]])(right)
        if not is_column:
            raise _Unsupported("a literal alone")
        return left  # a boolean column

    def _atom(self) -> tuple[Any, bool]:
        tok = self._peek()
        if tok is None:
            raise _Unsupported("end")
        kind, value = tok
        self.i += 1
        if value == "(":
            expr = self._or()
            self._expect(")")
            return expr, True
        if kind == "num":
            return lit(float(value) if any(c in value for c in ".eE") else int(value)), False
        if kind == "str":
            return lit(value[1:-1].replace("''", "'")), False
        if kind == "qid":
            return self._column(value[1:-1].replace('""', '"')), True
        if kind == "id":
            upper = value.upper()
            if upper in ("TRUE", "FALSE"):
                return lit(upper == "TRUE"), False
            if value.lower() in _STRING_FUNCTIONS and self._peek() == ("op", "("):
                return self._string_function(value.lower()), True
            if upper in ("AND", "OR", "NOT", "IS", "NULL", "CAST", "LIKE", "IN", "BETWEEN", "CASE"):
                raise _Unsupported(value)
            if self._peek() == ("op", "("):
                raise _Unsupported(f"function {value}")
            return self._column(value), True
        raise _Unsupported(value)

    def _column(self, name: str) -> Expression:
        self.used.add(name)
        return col(name)

    def _string_function(self, name: str) -> Expression:
        self._expect("(")
        target, is_column = self._atom()
        self._expect(",")
        kind, value = self._peek() or ("", "")
        if not is_column or kind != "str":
            raise _Unsupported(name)
        self.i += 1
        self._expect(")")
        return getattr(target.str, _STRING_FUNCTIONS[name])(value[1:-1].replace("''", "'"))
