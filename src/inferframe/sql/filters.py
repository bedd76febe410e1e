"""A query's WHERE on a DataFrame, read off the syntax tree as an inferframe predicate: the rows it drops are never computed.

DuckDB reads a DataFrame as an Arrow stream and applies its ``WHERE`` to the rows it reads; it passes
no filter into the stream. :func:`tree_rows` finds, in the query's tree (``sql.tree``), each SELECT
that reads a DataFrame (alone, or in an inner join, or on the left of a left join) and the
conjuncts of its ``WHERE`` that read only that DataFrame's columns no model or UDF computes; they
become one inferframe predicate, which the DataFrame applies before its AI columns (the optimizer
moves a relational filter below them). DuckDB still applies its whole ``WHERE``, so a part that is
not pushed (an AI column in it, or syntax this module does not read) only costs calls.

Read: comparisons of a column with a literal of its own kind (a number with a number column, a string
with a string column) or with another column, ``IS [NOT] NULL``, ``AND``/``OR``/``NOT`` of those
(inferframe's ``&``/``|`` use SQL's three-valued logic, as DuckDB does), a boolean column, and
``contains``, ``prefix``/``starts_with`` and ``suffix``/``ends_with`` of a string column with a
string. Anything else (casts, LIKE patterns, arithmetic) is left to DuckDB.

Example:
    >>> import pyarrow as pa
    >>> schema = pa.schema([("stars", pa.int64()), ("label", pa.string()), ("summary", pa.string())])
    >>> tree_rows("select * from t where stars >= 4 and summary = 'x'", {"t": schema}, {"t": ["stars", "label"]})
    {'t': ge(col(stars), lit(4))}
"""

from __future__ import annotations

import functools
import operator
from types import MappingProxyType
from typing import Any, Collection

import pyarrow as pa

from inferframe.expressions.expression import Expression, col, lit
from inferframe.sql.tree import conjuncts, nodes, statement

_COMPARE = MappingProxyType({"COMPARE_EQUAL": "__eq__", "COMPARE_NOTEQUAL": "__ne__", "COMPARE_LESSTHAN": "__lt__",
                             "COMPARE_LESSTHANOREQUALTO": "__le__", "COMPARE_GREATERTHAN": "__gt__",
                             "COMPARE_GREATERTHANOREQUALTO": "__ge__"})
_FLIPPED = MappingProxyType({"__eq__": "__eq__", "__ne__": "__ne__", "__lt__": "__gt__", "__le__": "__ge__",
                             "__gt__": "__lt__", "__ge__": "__le__"})
_STRING_FUNCTIONS = MappingProxyType({"contains": "contains", "prefix": "startswith", "starts_with": "startswith",
                                      "suffix": "endswith", "ends_with": "endswith"})
_NUMBERS = frozenset({"INTEGER", "BIGINT", "HUGEINT", "DECIMAL", "DOUBLE", "FLOAT", "NUMERIC"})


class _Unsupported(Exception):
    """Syntax this module does not turn into an expression: that part stays DuckDB's alone."""


def tree_rows(query: str, schemas: dict[str, pa.Schema], cheap: dict[str, list[str]]) -> dict[str, Expression | None]:
    """For each DataFrame the query reads once, the predicate of its cheap WHERE conjuncts (None: none)."""
    found: dict[str, list[Expression]] = {}
    try:
        tree = statement(query)
    except Exception:  # noqa: BLE001 - no tree: push nothing, which is always right
        return {name: None for name in schemas}
    for node in nodes(tree):
        if node.get("type") != "SELECT_NODE":
            continue
        items = _filtered_items(node.get("from_table") or {})
        for item in items:
            name = item.get("table_name")
            if name not in schemas or item.get("schema_name"):
                continue
            others = {n for other in items if other is not item and other.get("table_name") in schemas
                      for n in schemas[other["table_name"]].names}
            mine = {item.get("alias") or name}
            for part in conjuncts(node.get("where_clause")):
                expr = pushable(part, cheap.get(name, []), schemas[name], mine, others)
                if expr is not None:
                    found.setdefault(name, []).append(expr)
    return {name: functools.reduce(operator.and_, found[name]) if found.get(name) else None for name in schemas}


def _filtered_items(item: dict) -> list[dict]:
    """The FROM's tables whose rows the WHERE filters directly: alone, in inner joins, on a left join's left."""
    if item.get("type") == "JOIN":
        kind = item.get("join_type")
        if kind == "INNER":
            return _filtered_items(item["left"]) + _filtered_items(item["right"])
        return _filtered_items(item["left"]) if kind == "LEFT" else []
    return [item] if item.get("type") == "BASE_TABLE" else []


def pushable(part: dict, columns: Collection[str], schema: pa.Schema, names: Collection[str] = (),
             others: Collection[str] = ()) -> Expression | None:
    """One WHERE conjunct (a tree node) as an inferframe predicate over ``columns`` (None: it reads anything else).

    Parameters:
        part: the conjunct's node.
        columns: the columns that may be read before the AI columns are computed.
        schema: the DataFrame's schema (a literal must be of its column's kind).
        names: the names the query reads the DataFrame by (a qualified column must use one).
        others: the other FROM items' columns (an unqualified one of them is not this DataFrame's).
    """
    try:
        return _Builder(set(columns), schema, set(names), set(others)).build(part)
    except _Unsupported:
        return None


class _Builder:
    def __init__(self, columns: set[str], schema: pa.Schema, names: set[str], others: set[str]) -> None:
        self.columns, self.schema, self.names, self.others = columns, schema, names, others

    def build(self, node: dict) -> Expression:
        kind = node.get("type", "")
        if kind in ("CONJUNCTION_AND", "CONJUNCTION_OR"):
            parts = [self.build(child) for child in node["children"]]
            return functools.reduce(operator.and_ if kind == "CONJUNCTION_AND" else operator.or_, parts)
        if kind == "OPERATOR_NOT":
            if node["children"][0].get("type") == "COMPARE_IN":  # NOT IN: a NULL x is dropped, ~is_in keeps it
                raise _Unsupported
            return ~self.build(node["children"][0])
        if kind in ("OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL"):
            target = self._column(node["children"][0])
            return target.is_null() if kind == "OPERATOR_IS_NULL" else target.not_null()
        if kind in _COMPARE:
            return self._compare(_COMPARE[kind], node["left"], node["right"])
        if kind == "COMPARE_IN":
            return self._in(node["children"][0], node["children"][1:])
        if node.get("class") == "FUNCTION" and str(node.get("function_name")).lower() in _STRING_FUNCTIONS:
            args = [a["expression"] for a in node.get("arguments", [])]
            if len(args) != 2 or self._kind(args[0]) != "string" or _literal(args[1])[0] != "STRING":
                raise _Unsupported
            method = _STRING_FUNCTIONS[str(node["function_name"]).lower()]
            return getattr(self._column(args[0]).str, method)(_literal(args[1])[1])
        if node.get("class") == "COLUMN_REF" and self._kind(node) == "bool":
            return self._column(node)
        raise _Unsupported

    def _compare(self, method: str, left: dict, right: dict) -> Expression:
        if left.get("class") != "COLUMN_REF":
            left, right, method = right, left, _FLIPPED[method]
        column = self._column(left)
        if right.get("class") == "COLUMN_REF":
            if self._kind(left) != self._kind(right):
                raise _Unsupported
            return getattr(column, method)(self._column(right))
        kind, value = _literal(right)
        wanted = {"number": _NUMBERS, "string": {"STRING"}, "bool": {"BOOLEAN"}}.get(self._kind(left), set())
        if kind not in wanted:
            raise _Unsupported
        return getattr(column, method)(lit(value))

    def _in(self, target: dict, values: list[dict]) -> Expression:
        """``x IN (constants)`` (``NOT IN`` is left to DuckDB: its NULLs differ from ``is_in``'s)."""
        wanted = {"number": _NUMBERS, "string": {"STRING"}}.get(self._kind(target), set())
        found = [_literal(v) for v in values]
        if not found or any(kind not in wanted for kind, _ in found):
            raise _Unsupported
        return self._column(target).is_in([value for _, value in found])

    def _name(self, node: dict) -> str:
        if node.get("class") != "COLUMN_REF":
            raise _Unsupported
        parts = node["column_names"]
        if len(parts) > 2 or (len(parts) == 2 and parts[0] not in self.names):
            raise _Unsupported
        if parts[-1] not in self.columns or (len(parts) == 1 and parts[-1] in self.others):
            raise _Unsupported
        return parts[-1]

    def _column(self, node: dict) -> Expression:
        return col(self._name(node))

    def _kind(self, node: dict) -> str:
        t = self.schema.field(self._name(node)).type
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
            return "number"
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return "string"
        return "bool" if pa.types.is_boolean(t) else "other"


def _literal(node: dict) -> tuple[str, Any]:
    """A constant's kind (DuckDB's) and value; _Unsupported for anything else."""
    if node.get("class") != "CONSTANT":
        raise _Unsupported
    value = node.get("value") or node.get("literal") or {}
    kind, text = str(value.get("kind", "")).upper(), value.get("text")
    if kind in _NUMBERS:
        number = float(text)
        return kind, int(number) if kind in ("INTEGER", "BIGINT", "HUGEINT") else number
    if kind == "STRING":
        return kind, text
    if kind == "BOOLEAN":
        return kind, str(text).lower() in ("true", "1") if not isinstance(text, bool) else text
    raise _Unsupported
