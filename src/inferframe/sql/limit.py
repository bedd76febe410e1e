"""When a SQL query's ``LIMIT`` (and its ``ai_filter``) can run inside the DataFrame: no call for rows the LIMIT drops.

DuckDB applies a ``LIMIT`` to the rows it reads; an AI column computed batch by batch ahead of it would
be asked for far more rows than the query keeps. When the query is one source, a ``WHERE`` whose AI
parts are ``ai_filter`` conjuncts, a constant ``LIMIT`` and nothing between them but an ``ORDER BY`` of the
source's own columns (no GROUP BY, DISTINCT, window or aggregate: checked on DuckDB's own plan), the source
(sorted first by DuckDB, when there is an ORDER BY) becomes
``df.where(<cheap part>).where(sem_predicate(...)).limit(n)``: the semantic filter's limit-aware plan,
which stops sending once n rows have passed; without an ``ai_filter``, the source is limited to n rows
before its AI columns. DuckDB still applies its whole query to those rows.

Example:
    >>> from inferframe.sql.parse import parse
    >>> q = parse("select r from t where n > 1 and ai_filter(r, 'x') limit 5 offset 2", {"ai_filter"})
    >>> push = limit_push(q, ["r", "n"])
    >>> push.rows, expression_sql(push.where)
    (7, "((n > 1) AND ai_filter(r, 'x'))")
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from inferframe.sql.parse import Query
from inferframe.sql.engine import connect
from inferframe.sql.tree import expression_sql, limit_rows

_CHAIN = frozenset({"LIMIT", "STREAMING_LIMIT", "PROJECTION", "FILTER", "TOP_N", "ORDER_BY"})


@dataclass(frozen=True)
class Push:
    """The rows to keep (LIMIT + OFFSET), the ai_filter calls run in the DataFrame (id() of their nodes), the WHERE's node."""

    rows: int
    calls: frozenset[int]
    where: dict | None  # the query's WHERE node: the planner reads its SQL once the pushed calls are TRUE
    order: str | None = None  # the ORDER BY over the source's columns, run in the source before the filters


def limit_push(q: Query, columns: list[str] | None) -> Push | None:
    """The push of the query's ai_filter conjuncts and LIMIT into its source, or None where it does not apply.

    ``columns``: the one source's columns (None: the query has several sources).
    """
    tree = q.tree
    modifiers = tree.get("modifiers") or []
    kinds = [m.get("type") for m in modifiers]
    if columns is None or kinds not in (["LIMIT_MODIFIER"], ["ORDER_MODIFIER", "LIMIT_MODIFIER"]):
        return None
    if tree.get("group_expressions") or tree.get("having") or tree.get("qualify") or tree.get("group_sets"):
        return None
    order = _order(q, modifiers[0], columns) if len(modifiers) == 2 else None
    if len(modifiers) == 2 and order is None:
        return None
    rows = limit_rows(modifiers[-1])
    where = tree.get("where_clause")
    if rows is None:
        return None
    if not where:  # SELECT ai_complete(...) FROM t LIMIT n: the AI columns of n rows
        return Push(rows, frozenset(), None, order)
    conjuncts = where["children"] if where.get("type") == "CONJUNCTION_AND" else [where]
    tops = {id(c) for c in conjuncts if c.get("class") == "FUNCTION"}
    in_where = [c for c in q.calls if c.clause == "where"]
    keys = [" ".join(c.text.split()) for c in q.calls] + [" ".join(c.inner.text.split()) for c in q.calls if c.inner]
    pushed = [c for c in in_where if c.name == "ai_filter" and id(c.node) in tops
              and keys.count(" ".join(c.text.split())) == 1]
    if len(pushed) != len(in_where):
        return None
    return Push(rows, frozenset(id(c.node) for c in pushed), where, order)


def left_join_rows(q: Query) -> int | None:
    """The rows a LIMIT keeps of a LEFT JOIN's left side (None: it does not apply).

    ``FROM a LEFT JOIN b ON ... LIMIT n`` (no WHERE, GROUP BY, DISTINCT, ORDER BY, aggregate or window)
    gives at least one row per row of ``a``, so any n of its rows come from at most n rows of ``a``:
    ``a`` is limited to n (plus OFFSET) rows before its AI columns.

    Example:
        >>> from inferframe.sql.parse import parse
        >>> left_join_rows(parse("select ai_complete(a.x) from a left join b using (k) limit 3", {"ai_complete"}))
        3
    """
    from inferframe.sql.nested import projects_only

    tree = q.tree
    ft = tree.get("from_table") or {}
    modifiers = tree.get("modifiers") or []
    if ft.get("type") != "JOIN" or ft.get("join_type") != "LEFT" or ft["left"].get("type") == "JOIN" \
            or ft["right"].get("type") == "JOIN" or tree.get("where_clause") or not projects_only(tree) \
            or [m.get("type") for m in modifiers] != ["LIMIT_MODIFIER"]:
        return None
    return limit_rows(modifiers[0])


def _order(q: Query, modifier: dict, columns: list[str]) -> str | None:
    """The ORDER BY as SQL over the source's own columns (None: it reads an AI call or a SELECT alias)."""
    aliases = {item.get("alias") for item in q.tree.get("select_list") or [] if item.get("alias")}
    out = []
    for order in modifier.get("orders") or []:
        expr = order.get("expression") or {}
        if expr.get("class") != "COLUMN_REF" or expr["column_names"][-1] not in columns \
                or expr["column_names"][-1] in aliases:
            return None
        text = expression_sql(expr)
        text += {"DESCENDING": " DESC", "ASCENDING": " ASC"}.get(order.get("type"), "")
        text += {"NULLS FIRST": " NULLS FIRST", "NULLS LAST": " NULLS LAST"}.get(order.get("null_order"), "")
        out.append(text)
    return ", ".join(out) or None


def chain_ok(query: str, frames: dict[str, Any]) -> bool:
    """Whether DuckDB's plan of ``query`` is only limits, projections and filters over one scan."""
    schemas = {name: frame.schema().to_arrow() for name, frame in frames.items()}
    try:
        with connect(schemas, scanned=next(iter(schemas), "")) as con:  # an Arrow scan: DuckDB cannot see it empty
            return _only_chain(json.loads(con.execute("EXPLAIN (FORMAT json) " + query).fetchall()[0][1]))
    except Exception:  # noqa: BLE001 - no plan to read: do not push, which is always right
        return False


def _only_chain(nodes: Any) -> bool:
    nodes = nodes if isinstance(nodes, list) else [nodes]
    if len(nodes) > 1:
        return False
    for node in nodes:
        name = str(node.get("name", "")).upper()
        if "SCAN" in name:
            return not node.get("children")
        if name not in _CHAIN:
            return False
        return _only_chain(node.get("children", []))
    return False

