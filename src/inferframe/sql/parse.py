"""The AI function calls of a SQL query, read from DuckDB's own syntax tree (``sql.tree``).

DuckDB parses the query; this module walks its syntax tree for the calls of the AI functions
(``ai_complete``, ``ai_filter``, ...), each with its node in the tree (which the planner replaces),
its positional arguments (as SQL printed from their nodes, a constant, or a list of constants) and
its named options (``model => 'gpt-5-mini'``), and for the query's parts that say where each call sits
(the select list, the ``WHERE``, a ``JOIN ... ON``, ``GROUP BY``). Nothing is evaluated here.

Example:
    >>> q = parse("select ai_complete('Hi ' || who, max_tokens => 5) as hi from people", {"ai_complete"})
    >>> [(c.name, c.args[0].text, c.options) for c in q.calls]
    [('ai_complete', "('Hi ' || who)", {'max_tokens': 5})]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Collection

from inferframe.errors import PlanError
from inferframe.sql.tree import expression_sql, statement

_NO_VALUE = object()


@dataclass(frozen=True)
class Arg:
    """One argument: its SQL, the columns it reads ([qualifier..., column]), its value when a constant, its node."""

    text: str
    columns: tuple[tuple[str, ...], ...]
    value: Any = _NO_VALUE
    node: Any = field(default=None, compare=False, repr=False)

    @property
    def constant(self) -> bool:
        return self.value is not _NO_VALUE

    @property
    def column(self) -> tuple[str, ...] | None:
        """The column it is when it is a bare column reference."""
        is_ref = isinstance(self.node, dict) and self.node.get("class") == "COLUMN_REF"
        return self.columns[0] if is_ref else None


@dataclass
class Call:
    """One AI function call: name, where it sits, its arguments and options, and its node in the tree."""

    name: str
    clause: str  # "select", "where", "join", "group", "having", "order", "other"
    args: list[Arg]
    options: dict[str, Any]
    inner: Call | None = None  # ai_error(<call>): the call whose error is read
    unnamed: bool = False  # a whole item of the SELECT list with no alias: named by its SQL, as DuckDB names it
    node: dict = field(default_factory=dict, repr=False)  # the call's node in the query's tree (replaced in place)
    text: str = ""  # the call's SQL, as DuckDB prints it


@dataclass
class Query:
    """What the planner needs of a parsed SELECT: its AI calls, its tree, and the unknown ai_... names it calls."""

    calls: list[Call]
    tree: dict  # the SELECT node
    unknown: list[str]  # functions named ai_... that are not AI functions


def parse(query: str, names: Collection[str]) -> Query:
    """The query's AI calls (functions in ``names``, and ``ai_error``), as DuckDB parses it; PlanError on a syntax error."""
    return parse_tree(statement(query), names)


def parse_tree(tree: dict, names: Collection[str]) -> Query:
    """``parse`` of a SELECT node already parsed (its calls keep their nodes in ``tree``)."""
    calls: list[Call] = []
    unknown: list[str] = []
    _walk(tree, set(names), calls, unknown, "other", top=tree)
    items = {id(item) for item in tree.get("select_list", []) if isinstance(item, dict) and not item.get("alias")}
    for call in calls:
        call.unnamed = call.clause == "select" and id(call.node) in items
    return Query(calls, tree, sorted(set(unknown)))


_CLAUSES = MappingProxyType({"select_list": "select", "where_clause": "where", "condition": "join",
                             "group_expressions": "group", "having": "having", "modifiers": "order",
                             "qualify": "other"})


def _walk(node: Any, names: set[str], calls: list[Call], unknown: list[str], clause: str,
          top: dict) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, names, calls, unknown, clause, top)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "SUBQUERY" and "class" not in node and "subquery" in node:  # a FROM item
        # Its AI calls are its own query's (sql.nested plans it first): only its unknown names are read here.
        _walk(node["subquery"], names, [], unknown, "other", top)
        return
    if node.get("class") == "FUNCTION" and not node.get("is_operator"):
        name = str(node.get("function_name", "")).lower()
        if name in names or name == "ai_error":
            calls.append(_call(node, names, clause))
            return
        if name.startswith("ai_"):
            unknown.append(name)
    for key, value in node.items():
        inner_clause = _CLAUSES.get(key, clause) if node is top or key == "condition" else clause
        if node.get("type") in ("SUBQUERY", "SET_OPERATION_NODE") or key == "subquery":
            inner_clause = "other"
        _walk(value, names, calls, unknown, inner_clause, top)


def _call(node: dict, names: set[str], clause: str) -> Call:
    name = str(node["function_name"]).lower()
    args: list[Arg] = []
    options: dict[str, Any] = {}
    inner = None
    for a in node.get("arguments", []):
        expr = a["expression"]
        if a.get("name"):
            value = _constant(expr)
            if value is _NO_VALUE:
                raise PlanError(f"{name}(): the option {a['name']} => ... must be a constant (a number, a string, "
                                f"true/false), got {expression_sql(expr)!r}.")
            options[a["name"].lower()] = value
            continue
        if name == "ai_error" and expr.get("class") == "FUNCTION" and str(expr.get("function_name")).lower() in names:
            inner = _call(expr, names, clause)
        args.append(Arg(expression_sql(expr), tuple(_columns(expr)), _constant(expr), expr))
    return Call(name, clause, args, options, inner, node=node, text=expression_sql(node))


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
