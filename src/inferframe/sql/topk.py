"""``ORDER BY <AI call> ... LIMIT k`` planned as a top-k: each distinct input asked once, after the cheap WHERE.

DuckDB's top-n reads the AI column of every row it sorts, so ``ORDER BY ai_score(review, ...) DESC LIMIT 10``
would ask once per row past the cheap filters. The order reads only each row's answer, and rows with equal
inputs send the same request (the engine's cache key is the request), so here the AI columns are computed over
the ``SELECT DISTINCT`` of their input columns and joined back to the rows: the same rows in the same order,
asked once per distinct input, so fewer calls wherever inputs repeat (a review pasted twice, a stock reply). The
query's ``WHERE`` (with no AI call in it) runs first, in DuckDB, so a row it drops is never asked; a row whose
request is already in the cache costs nothing, as everywhere.

``sem_topk`` is not chosen here: it ranks by the model's pairwise comparisons, another question than the
query's per-row score, so its top k may differ from the query's.

Example:
    >>> from inferframe.sql.parse import parse
    >>> applies(parse("select id from t where n > 1 order by ai_score(r, 'x') desc, id limit 3", {"ai_score"}), 1)
    True
    >>> applies(parse("select id from t order by id limit 3", {"ai_score"}), 1)
    False
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inferframe.io.interop import quote_sql
from inferframe.sql.nested import has_ai_call, projects_only
from inferframe.sql.parse import Query
from inferframe.sql.tree import expression_sql, limit_rows, nodes

FrameOf = Callable[[str, dict], Any]


@dataclass(frozen=True)
class TopK:
    """The plan's frames, for EXPLAIN: the distinct inputs with their AI columns, the distinct inputs alone, the rows."""

    scored: Any
    inputs: Any
    rows: Any


def applies(q: Query, sources: int) -> bool:
    """Whether the query is a top-k over one source: ``ORDER BY`` reading an AI call (or a SELECT alias of one), a
    constant ``LIMIT``, each row kept one for one (no GROUP BY, aggregate, window, DISTINCT), no AI call or
    subquery in its ``WHERE``, and AI calls only in its SELECT list and ORDER BY."""
    tree = q.tree
    modifiers = tree.get("modifiers") or []
    if sources != 1 or [m.get("type") for m in modifiers] != ["ORDER_MODIFIER", "LIMIT_MODIFIER"]:
        return False
    if limit_rows(modifiers[1]) is None or not projects_only(tree) or not q.calls:
        return False
    where = tree.get("where_clause")
    if where and (has_ai_call(where) or any(n.get("class") == "SUBQUERY" for n in nodes(where))):
        return False
    if any(c.clause not in ("select", "order") for c in q.calls):
        return False
    aliased = {item.get("alias") for item in tree.get("select_list") or [] if item.get("alias") and has_ai_call(item)}
    orders = [o.get("expression") or {} for o in modifiers[0].get("orders") or []]
    return any(has_ai_call(e) or (e.get("class") == "COLUMN_REF" and e["column_names"][-1] in aliased)
               for e in orders)


def where_sql(q: Query) -> str | None:
    """The query's WHERE, run in DuckDB before the AI columns (``applies`` checked it has no AI call)."""
    where = q.tree.get("where_clause")
    return expression_sql(where) if where else None


def distinct_scored(frame: Any, keys: list[str], add: Callable[[Any], Any], frame_of: FrameOf) -> tuple[Any, TopK]:
    """``frame`` with the AI columns ``add`` computes, each computed once per distinct value of ``keys``.

    ``add(frame)``: the frame with the AI columns added (the planner's own columns, so the same calls and options).
    A NULL input matches a NULL input (``IS NOT DISTINCT FROM``), so no row loses its answer.
    """
    listed = ", ".join(quote_sql(k) for k in keys)
    inputs = frame_of(f"SELECT DISTINCT {listed} FROM __ifr_base", {"__ifr_base": frame})
    scored = add(inputs)
    new = [c for c in scored.column_names if c not in keys]
    on = " AND ".join(f"b.{quote_sql(k)} IS NOT DISTINCT FROM d.{quote_sql(k)}" for k in keys)
    picked = ", ".join(f"d.{quote_sql(c)}" for c in new)
    joined = frame_of(f"SELECT b.*, {picked} FROM __ifr_base AS b LEFT JOIN __ifr_scored AS d ON {on}",
                      {"__ifr_base": frame, "__ifr_scored": scored})
    return joined, TopK(scored, inputs, frame)


def explain_lines(topk: TopK, frame_of: FrameOf) -> list[str]:
    """EXPLAIN's line for the plan: the calls it sends against scoring every row (counted now; nothing is sent)."""
    distinct, rows = (frame_of("SELECT count(*) AS n FROM __ifr_f", {"__ifr_f": f}).to_pydict()["n"][0]
                      for f in (topk.inputs, topk.rows))
    return [f"top-k plan: each distinct input past the cheap filter asked once: {distinct:,} calls, not {rows:,} "
            f"(every row asked once); the same rows in the same order (sem_topk's pairwise plan answers another "
            "question, so it is not used)"]
