"""AI calls below the top query: in CTEs, FROM subqueries, IN/scalar subqueries and UNION ALL branches.

Each nested SELECT that calls an AI function is planned as a query of its own (``ifr.sql`` of its
SQL, so through the engine: batching, shared limits, cache, cost, errors as NULL) and the tree reads
that DataFrame in its place. CTEs are planned in order, each seeing the ones before it; one that
another CTE or the query reads twice is computed once (``sql.source`` holds a DataFrame read twice).

Before a CTE or FROM subquery is planned, what the outer query asks of it reaches it on the tree:

- the outer ``WHERE``'s conjuncts that read only columns the subquery passes through unchanged (a
  column, or ``*``), and no AI call, are added to the subquery's ``WHERE`` (its cheap filter, run
  before its AI columns); DuckDB still applies the outer ``WHERE``;
- the outer ``LIMIT`` (plus ``OFFSET``), when the outer query only projects the subquery's rows (no
  other ``WHERE`` part, no ``GROUP BY``, aggregate, ``DISTINCT``, ``ORDER BY`` or window), becomes the
  subquery's ``LIMIT``, which its own planner pushes into its source.

Example:
    >>> tree = statement("select * from (select id, ai_complete(t) as s from r) where id < 10 limit 5")
    >>> inner = tree["from_table"]["subquery"]["node"]
    >>> push_into(tree, inner, "")
    >>> to_sql(inner)
    'SELECT id, ai_complete(t) AS s FROM r WHERE (id < 10) LIMIT 5'
"""

from __future__ import annotations

import copy
import functools
import re
import weakref
from collections.abc import Callable
from typing import Any

from inferframe.errors import PlanError
from inferframe.sql.tree import conjunction, conjuncts, limit_rows, nodes, replace, statement, table_ref, to_sql
from inferframe.io.interop import optional

FrameOf = Callable[[str, dict], Any]
# The DataFrames planned here from a CTE or subquery that calls AI functions (by id, held weakly): their AI columns
# are inside a DuckDB stream, where cheap_columns cannot see them, and a plan that reads one twice must know.
_WITH_AI: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def computes_ai(frame: Any) -> bool:
    """Whether ``frame`` is a CTE's or subquery's DataFrame with AI calls (planned by ``unnest``)."""
    return _WITH_AI.get(id(frame)) is frame


def has_ai_call(tree: Any) -> bool:
    """Whether the tree calls a function named ``ai_...``."""
    return any(n.get("class") == "FUNCTION" and str(n.get("function_name", "")).lower().startswith("ai_")
               for n in nodes(tree))


@functools.lru_cache(maxsize=1)
def aggregate_names() -> frozenset[str]:
    """DuckDB's aggregate functions, and the AI aggregates."""
    con = optional("duckdb", "sql", "sql()").connect()
    try:
        rows = con.execute("SELECT DISTINCT function_name FROM duckdb_functions() "
                           "WHERE function_type = 'aggregate'").fetchall()
    finally:
        con.close()
    return frozenset(r[0].lower() for r in rows) | {"ai_agg", "ai_summarize_agg", "count_star"}


def unnest(tree: dict, frames: dict[str, Any], frame_of: FrameOf, parts: list | None = None) -> dict[str, Any]:
    """Plan the tree's CTEs and nested SELECTs that call AI functions as DataFrames; the tree reads them (in place).

    Returns the frames the rewritten tree reads (``frames`` and one per planned CTE or subquery);
    ``parts`` gets (what, SQL, the frames it read) of each, for EXPLAIN.
    """
    parts = [] if parts is None else parts
    frames = dict(frames)
    ctes = (tree.get("cte_map") or {}).get("map") or []
    if ctes and has_ai_call(tree):
        for cte in ctes:
            name, node = cte["key"], cte["value"]["query_node"]
            if _reads(tree, name) == 1 and _single_read(tree, name):
                push_into(tree, node, name)
            frames[name] = _planned(node, frames, frame_of, f"the CTE {name}", parts)
        tree["cte_map"] = {"map": []}
    counter = [0]
    _nested(tree, frames, frame_of, counter, parts)
    return frames


def _nested(node: dict, frames: dict[str, Any], frame_of: FrameOf, counter: list[int], parts: list) -> None:
    """Replace each nested SELECT with AI calls by a read of its DataFrame, the outermost first."""
    if node.get("type") == "SET_OPERATION_NODE":
        for child in node.get("children") or [node.get("left"), node.get("right")]:
            if child and has_ai_call(child):
                _materialize(child, frames, frame_of, counter, "a UNION branch", parts)
        return
    for item in _from_items(node.get("from_table") or {}):
        if item.get("type") == "SUBQUERY" and has_ai_call(item["subquery"]):
            inner = item["subquery"]["node"]
            if node.get("from_table") is item:
                push_into(node, inner, item.get("alias") or "")
            name = _name(counter)
            frames[name] = _planned(inner, frames, frame_of, f"the subquery in FROM {item.get('alias') or name}", parts)
            replace(item, table_ref(name, item.get("alias") or name))
    for sub in [n for n in nodes({k: v for k, v in node.items() if k != "from_table"})
                if n.get("class") == "SUBQUERY" and has_ai_call(n.get("subquery"))]:
        _materialize(sub["subquery"]["node"], frames, frame_of, counter, "a subquery in an expression", parts)


def _materialize(node: dict, frames: dict[str, Any], frame_of: FrameOf, counter: list[int], what: str,
                 parts: list) -> None:
    name = _name(counter)
    frames[name] = _planned(node, frames, frame_of, f"{what} ({name})", parts)
    replace(node, statement(f"SELECT * FROM {name}"))


def _name(counter: list[int]) -> str:
    counter[0] += 1
    return f"__ifr_q{counter[0]}"


def _planned(node: dict, frames: dict[str, Any], frame_of: FrameOf, what: str, parts: list) -> Any:
    sql = to_sql(node)
    parts.append((what, sql, dict(frames)))
    try:
        frame = frame_of(sql, frames)
        if has_ai_call(node):
            _WITH_AI[id(frame)] = frame
        return frame
    except PlanError as e:
        if "Binder Error" not in str(e):
            raise
        if _misspelt(str(e), frames):  # the top level's message (DuckDB's "Candidate bindings"), and where it is
            raise PlanError(f"{e} (in {what})") from None
        raise PlanError(f"sql(): {what} with AI functions is planned as a query of its own, and DuckDB cannot run it "
                        f"alone ({e}). A subquery that reads the outer query's columns (a correlated subquery) is not "
                        "planned: write it as a JOIN, or compute its AI columns in a CTE first.") from None


def _misspelt(error: str, frames: dict[str, Any]) -> bool:
    """Whether DuckDB's binder error names a column that no table of the query has: a typo, not an outer column.

    A correlated subquery reads a column of the outer query's tables, so one that is in none of them is misspelt.

    Example:
        >>> import inferframe as ifr
        >>> frames = {"t": ifr.from_pydict({"review": ["a"]})}
        >>> _misspelt('Referenced column "reviw" not found', frames), _misspelt('Referenced column "review" not found', frames)
        (True, False)
    """
    found = re.search(r'Referenced column "([^"]+)" not found', error)
    if found is None:
        return False
    return not any(found.group(1) in getattr(frame, "column_names", ()) for frame in frames.values())


def _from_items(item: dict) -> list[dict]:
    if item.get("type") == "JOIN":
        return _from_items(item["left"]) + _from_items(item["right"])
    return [item]


def _reads(tree: dict, name: str) -> int:
    return sum(1 for n in nodes(tree) if n.get("type") == "BASE_TABLE" and n.get("table_name") == name
               and not n.get("schema_name"))


def _single_read(tree: dict, name: str) -> bool:
    ft = tree.get("from_table") or {}
    return tree.get("type") == "SELECT_NODE" and ft.get("type") == "BASE_TABLE" and ft.get("table_name") == name


def push_into(outer: dict, inner: dict, alias: str) -> None:
    """Add the outer query's pushable WHERE conjuncts and LIMIT to ``inner``, the one FROM item of ``outer``.

    ``alias``: the name the outer query reads the subquery by ("" when it has none).
    """
    if inner.get("type") != "SELECT_NODE" or not _plain(inner):
        return
    passing = _passing(inner)
    where = conjuncts(outer.get("where_clause"))
    pushed = [c for c in where if _pushable(c, passing, alias)]
    for part in pushed:
        part = copy.deepcopy(part)
        for ref in [n for n in nodes(part) if n.get("class") == "COLUMN_REF"]:
            replace(ref, passing[ref["column_names"][-1]])
        inner["where_clause"] = conjunction(conjuncts(inner.get("where_clause")) + [part])
    limit = _limit(outer)
    if limit is not None and len(pushed) == len(where) and projects_only(outer) and not _modifier(inner, "LIMIT"):
        inner["modifiers"] = list(inner.get("modifiers") or []) + [limit]


def _plain(inner: dict) -> bool:
    """A subquery a filter or limit may move into: no GROUP BY, aggregate, window, DISTINCT or LIMIT of its own."""
    if inner.get("group_expressions") or inner.get("having") or inner.get("qualify") or inner.get("group_sets"):
        return False
    if any(m.get("type") in ("LIMIT_MODIFIER", "DISTINCT_MODIFIER", "LIMIT_PERCENT_MODIFIER")
           for m in inner.get("modifiers") or []):
        return False
    return not _aggregates_or_windows(inner.get("select_list"))


def _aggregates_or_windows(tree: Any) -> bool:
    names = aggregate_names()
    return any(n.get("class") in ("WINDOW", "SUBQUERY") or (n.get("class") == "FUNCTION" and str(
        n.get("function_name", "")).lower() in names) for n in nodes(tree))


def _passing(inner: dict) -> dict[str, dict]:
    """The subquery's output columns that are a column of its source unchanged: name -> the inner column node."""
    out: dict[str, dict] = {}
    named = {item.get("alias") for item in inner.get("select_list") or [] if item.get("alias")}
    star = False
    for item in inner.get("select_list") or []:
        if item.get("class") == "STAR" and not item.get("relation_name") and not item.get("exclude_list") \
                and not item.get("replace_list") and not item.get("expr"):
            star = (inner.get("from_table") or {}).get("type") != "JOIN"
        elif item.get("class") == "COLUMN_REF":
            out[item.get("alias") or item["column_names"][-1]] = dict(item, alias="")
    return _StarColumns(out, named) if star else out


class _StarColumns(dict):
    """``SELECT *``: every name not given to an expression is the source's column of that name."""

    def __init__(self, listed: dict[str, dict], named: set[str]) -> None:
        super().__init__(listed)
        self.named = named

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name not in self.named

    def __getitem__(self, name: str) -> dict:
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        return {"class": "COLUMN_REF", "type": "COLUMN_REF", "alias": "", "query_location": 18446744073709551615,
                "column_names": [name]}


def _pushable(part: dict, passing: dict, alias: str) -> bool:
    if has_ai_call(part) or _aggregates_or_windows(part):
        return False
    refs = [n for n in nodes(part) if n.get("class") == "COLUMN_REF"]
    return bool(refs) and all(len(r["column_names"]) <= 2 and r["column_names"][-1] in passing and (
        len(r["column_names"]) == 1 or r["column_names"][0] == alias) for r in refs)


def _limit(outer: dict) -> dict | None:
    """The outer LIMIT as the subquery's: LIMIT n + OFFSET m rows (the outer query still skips its m)."""
    mods = outer.get("modifiers") or []
    if [m.get("type") for m in mods] != ["LIMIT_MODIFIER"]:
        return None
    rows = limit_rows(mods[0])
    return None if rows is None else statement(f"SELECT 1 LIMIT {rows}")["modifiers"][0]


def _modifier(node: dict, kind: str) -> bool:
    return any(m.get("type") == f"{kind}_MODIFIER" for m in node.get("modifiers") or [])


def projects_only(outer: dict) -> bool:
    """The outer query keeps every row it reads, one for one: no GROUP BY, aggregate, window or DISTINCT."""
    if outer.get("group_expressions") or outer.get("having") or outer.get("qualify") or outer.get("group_sets"):
        return False
    return not _aggregates_or_windows(outer.get("select_list"))
