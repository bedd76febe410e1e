"""The AI function calls of a SQL query, read from DuckDB's own parse of it (``json_serialize_sql``).

DuckDB parses the query; this module walks its syntax tree for the calls of the AI functions
(``ai_complete``, ``ai_filter``, ...), each with its place in the query's text, its positional
arguments (as SQL text, a constant, or a list of constants) and its named options (``model =>
'gpt-5-mini'``), and for the query's parts that say where each call sits (the select list, the
``WHERE``, a ``JOIN ... ON``, ``GROUP BY``). Nothing is evaluated here.

Example:
    >>> q = parse("select ai_complete('Say hi to ' || name, max_tokens => 5) as hi from people", {"ai_complete"})
    >>> [(c.name, c.args[0].text, c.options) for c in q.calls]
    [('ai_complete', "'Say hi to ' || name", {'max_tokens': 5})]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Collection

from inferframe.sql.engine import parsed
from inferframe.errors import PlanError

_NO_VALUE = object()
_CALL_START = re.compile(r"[A-Za-z_][\w.]*\s*\(")


@dataclass(frozen=True)
class Arg:
    """One argument: its SQL text, the columns it reads ([qualifier..., column]) and its value when a constant."""

    text: str
    columns: tuple[tuple[str, ...], ...]
    value: Any = _NO_VALUE

    @property
    def constant(self) -> bool:
        return self.value is not _NO_VALUE

    @property
    def column(self) -> tuple[str, ...] | None:
        """The column it is when it is a bare column reference."""
        return self.columns[0] if len(self.columns) == 1 and self.text.strip().strip('"') in (
            ".".join(self.columns[0]), self.columns[0][-1]) else None


@dataclass
class Call:
    """One AI function call: name, its span in the query, where it sits, its arguments and options."""

    name: str
    start: int
    end: int
    clause: str  # "select", "where", "join", "group", "having", "order", "other"
    args: list[Arg]
    options: dict[str, Any]
    inner: Call | None = None  # ai_error(<call>): the call whose error is read
    unnamed: bool = False  # a whole item of the SELECT list with no alias: named by its text, as DuckDB names it
    node: dict = field(default_factory=dict, repr=False)

    @property
    def text(self) -> str:
        return self.node.get("__text", "")


@dataclass
class Query:
    """What the planner needs of a parsed SELECT: its AI calls, its FROM items and its clauses' spans."""

    text: str
    calls: list[Call]
    tree: dict  # the SELECT node
    unknown: list[str]  # functions named ai_... that are not AI functions
    ai_froms: set[int] = field(default_factory=set)  # where a FROM subquery that calls AI functions starts


def parse(query: str, names: Collection[str]) -> Query:
    """The query's AI calls (functions in ``names``, and ``ai_error``), as DuckDB parses it; PlanError on a syntax error."""
    out = parsed(query)
    if out.get("error"):
        raise PlanError(f"sql(): DuckDB cannot parse the query: {out.get('error_message', out)}")
    statements = out.get("statements") or []
    if len(statements) != 1:
        raise PlanError(f"sql() takes one SELECT statement, got {len(statements)}.")
    tree = statements[0]["node"]
    calls: list[Call] = []
    unknown: list[str] = []
    froms: set[int] = set()
    _walk(tree, query, set(names), calls, unknown, "other", top=tree, froms=froms)
    items = {item.get("query_location"): item for item in tree.get("select_list", []) if isinstance(item, dict)}
    for call in calls:
        item = items.get(call.start)
        call.unnamed = call.clause == "select" and item is not None and item.get("class") == "FUNCTION" \
            and not item.get("alias")
    return Query(query, calls, tree, sorted(set(unknown)), froms)


_CLAUSES = MappingProxyType({"select_list": "select", "where_clause": "where", "condition": "join",
                             "group_expressions": "group", "having": "having", "orders": "order", "qualify": "other"})


def _walk(node: Any, text: str, names: set[str], calls: list[Call], unknown: list[str], clause: str,
          top: dict, froms: set[int]) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, text, names, calls, unknown, clause, top, froms)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "SUBQUERY" and "class" not in node and "subquery" in node:  # a FROM item
        inner: list[Call] = []
        _walk(node["subquery"], text, names, inner, unknown, "other", top, froms)
        if inner:  # planned as a query of its own (ifr.sql of its text), read as a DataFrame
            froms.add(node["query_location"])
        return
    if node.get("class") == "FUNCTION" and not node.get("is_operator"):
        name = str(node.get("function_name", "")).lower()
        if name in names or name == "ai_error":
            calls.append(_call(node, text, names, clause))
            return
        if name.startswith("ai_"):
            unknown.append(name)
    for key, value in node.items():
        inner_clause = _CLAUSES.get(key, clause) if node is top or key == "condition" else clause
        if node.get("type") in ("SUBQUERY", "SET_OPERATION_NODE") or key == "subquery":
            inner_clause = "other"
        _walk(value, text, names, calls, unknown, inner_clause, top, froms)


def _call(node: dict, text: str, names: set[str], clause: str) -> Call:
    name = str(node["function_name"]).lower()
    start = node["query_location"]
    end = close(text, start)
    args: list[Arg] = []
    options: dict[str, Any] = {}
    inner = None
    for a in node.get("arguments", []):
        expr = a["expression"]
        if a.get("name"):
            value = _constant(expr)
            if value is _NO_VALUE:
                raise PlanError(f"{name}(): the option {a['name']} => ... must be a constant (a number, a string, "
                                f"true/false), got {_span(expr, text)!r}.")
            options[a["name"].lower()] = value
            continue
        if name == "ai_error" and expr.get("class") == "FUNCTION" and str(expr.get("function_name")).lower() in names:
            inner = _call(expr, text, names, clause)
        args.append(Arg(_span(expr, text), tuple(_columns(expr)), _constant(expr)))
    node = dict(node, __text=text[start:end])
    return Call(name, start, end, clause, args, options, inner, node=node)


def _span(expr: dict, text: str) -> str:
    start, length = expr.get("query_location"), expr.get("query_location_length")
    if start is None or length is None or start < 0:
        raise PlanError("sql(): DuckDB's parse gives no place for an argument of an AI function; write it plainly.")
    # DuckDB's length of a call may stop short of its closing parenthesis: the call's text runs to it.
    if expr.get("class") == "FUNCTION" and _CALL_START.match(text, start) and text[start:start + length].rstrip()[-1:] != ")":
        return text[start:close(text, start)]
    return text[start:start + length]


def close(text: str, start: int) -> int:
    """The end of the function call starting at ``start`` (just past its closing parenthesis)."""
    depth, i, quote = 0, start, None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise PlanError(f"sql(): the call at position {start} has no closing parenthesis.")


def _columns(expr: Any) -> list[tuple[str, ...]]:
    if isinstance(expr, list):
        return [c for e in expr for c in _columns(e)]
    if not isinstance(expr, dict):
        return []
    if expr.get("class") == "COLUMN_REF":
        return [tuple(expr["column_names"])]
    return [c for v in expr.values() for c in _columns(v)]


def _constant(expr: dict) -> Any:
    """The value of a constant (number, string, boolean, null) or a list of them; ``_NO_VALUE`` otherwise."""
    if expr.get("class") == "CONSTANT":
        lit = expr.get("value") or expr.get("literal") or {}
        kind, raw = str(lit.get("kind", lit.get("type", {}).get("id", ""))).upper(), lit.get("text", lit.get("value"))
        if "NULL" in kind:
            return None
        if kind in ("INTEGER", "BIGINT", "HUGEINT"):
            return int(raw)
        if kind in ("NUMERIC", "DECIMAL", "DOUBLE", "FLOAT"):
            number = float(raw)
            return int(number) if number.is_integer() and not any(c in str(raw) for c in ".eE") else number
        if kind == "BOOLEAN":
            return str(raw).lower() in ("true", "1") if not isinstance(raw, bool) else raw
        return raw
    if expr.get("class") == "FUNCTION" and str(expr.get("function_name")).lower() == "list_value":
        values = [_constant(a["expression"]) for a in expr.get("arguments", [])]
        return _NO_VALUE if any(v is _NO_VALUE for v in values) else values
    if expr.get("class") == "CAST" and expr.get("child"):  # 'x'::VARCHAR, true::BOOLEAN
        return _constant(expr["child"])
    return _NO_VALUE
