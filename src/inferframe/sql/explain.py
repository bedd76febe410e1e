"""``EXPLAIN`` of a SQL query with AI functions: the AI calls, their plans, and the calls, tokens and dollars expected.

Nothing is sent: the estimate reads the data and renders the prompts, as ``DataFrame.estimate()`` does.
The rows counted are those that pass the query's cheap filters (the ones computed before the AI
columns); a ``LIMIT`` may stop the stream sooner, so with one the figures are an upper bound.

Example:
    >>> import inferframe as ifr
    >>> t = ifr.from_pydict({"q": ["hi"], "n": [1]})
    >>> frame_of = lambda query, frames: ifr.sql(query, **frames)
    >>> print(explain_text("select ai_complete(q, max_tokens => 3) from t where n > 0", {"t": t}, frame_of).splitlines()[0])
    == SQL, as DuckDB runs it ==
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pyarrow as pa

from inferframe.plan.estimate_text import estimate_lines
from inferframe.sql.planner import plan
from inferframe.sql.topk import explain_lines
from inferframe.sql.tree import parsed
from inferframe.sql.reads import cheap_columns, reads
from inferframe.io.arrow_stream import StreamSource


def explain_text(query: str, frames: dict[str, Any], frame_of: Any) -> str:
    """The text of ``EXPLAIN query``: the rewritten tree's SQL, per FROM item its AI columns, plan and estimate, each
    CTE and subquery planned on its own the same way, and the estimate of the whole query."""
    totals = {"calls": 0, "input_tokens": 0, "cost_usd": 0.0, "unknown": False}
    lines = _explain(query, frames, frame_of, totals)
    if len(lines) == 1:
        return "== SQL, as DuckDB runs it ==\n" + query + "\n\nNo AI function: no model call."
    more = " (and calls known only after the run)" if totals["unknown"] else ""
    lines += ["", "== whole query, every CTE and subquery included: estimate (nothing sent) ==",
              f"  {totals['calls']:,} calls, {totals['input_tokens']:,} input tokens, ${totals['cost_usd']:.4f}{more}"]
    return "\n".join(lines).rstrip()


def _explain(query: str, frames: dict[str, Any], frame_of: Any, totals: dict) -> list[str]:
    planned = plan(query, frames, frame_of)
    if planned is None:
        return ["No AI function: no model call."]
    lines = ["== SQL, as DuckDB runs it ==", planned.query, ""]
    for label, sql, seen in planned.nested:
        lines.append(f"== {label}: planned as a query of its own, read as a DataFrame ==")
        lines += ["  " + line for line in _explain(sql, seen, frame_of, totals)]
        lines.append("")
    read = reads(planned.query, {n: f.schema().to_arrow() for n, f in planned.frames.items()},
                 {n: cheap_columns(f) for n, f in planned.frames.items()})
    limit = _limit(planned.query)
    for label, frame in planned.extra:
        lines.append(f"== {label} ==")
        lines += _plan_and_estimate(frame, totals)
        lines.append("")
    for source in planned.sources:
        if not source.calls and not source.filters:
            continue
        frame = source.frame
        keep, _, rows = read.get(source.register, (None, 1, None))
        lines.append(f"== {source.alias}: AI calls ==")
        lines += [f"  {note}" for note in source.notes]
        lines += _cheap_filters(source.where, rows)
        if source.topk is not None:  # the AI columns are those of the distinct inputs, past the WHERE already
            lines += ["  " + line for line in explain_lines(source.topk, frame_of)]
            frame, rows, keep = source.topk.scored, None, None
        if rows is not None:
            frame = frame.where(rows)
        if keep is not None:
            frame = frame.select(*keep)
        ai = [c for c, *_ in source.calls if keep is None or c in keep]
        if source.calls:
            lines.append(f"  AI columns the query reads: {', '.join(ai) or 'none (no call is sent)'}")
        lines += _plan_and_estimate(frame, totals)
        if limit is not None and source.limit is None and source.topk is None:
            lines.append(f"  LIMIT {limit}: the stream stops once DuckDB has its rows; the figures above count every "
                         "row past the cheap filter (an upper bound).")
        lines.append("")
    return lines


def _plan_and_estimate(frame: Any, totals: dict) -> list[str]:
    """The frame's plan and its estimate, added to ``totals``."""
    with contextlib.redirect_stdout(io.StringIO()):
        lines = ["  " + line for line in frame.explain(show_all=True).splitlines()]
    found = frame.estimate()
    for call in found["calls"]:
        totals["calls"] += call.get("rows") or 0
        totals["unknown"] |= call.get("rows") is None
    totals["input_tokens"] += found.get("input_tokens") or 0
    totals["cost_usd"] += found.get("cost_usd") or 0.0
    return lines + ["  == estimate (nothing sent) =="] + ["  " + line for line in estimate_lines(found)]


def _cheap_filters(where: str | None, rows: Any) -> list[str]:
    """The lines naming the filters run before the AI calls: the source's pushed WHERE, and the one read off the tree.

    ``where``: the WHERE run in the source before its AI filters, ``rows``: the
    predicate pushed below the AI columns (``sql.filters.tree_rows``).

    Example:
        >>> _cheap_filters("stars >= 4", None), _cheap_filters(None, None)
        (['  cheap filter run first (by DuckDB, before the AI calls): WHERE stars >= 4'], ['  cheap filter run first: none'])
    """
    lines = [f"  cheap filter run first (by DuckDB, before the AI calls): WHERE {where}"] if where is not None else []
    if rows is not None:
        lines.append(f"  cheap filter run first: {rows!r}")
    return lines or ["  cheap filter run first: none"]


def explain_source(query: str, frames: dict[str, Any], frame_of: Any) -> StreamSource:
    """``explain_text`` as a one-column stream (``explain``), a line a row, for ``ifr.sql("EXPLAIN ...")``."""
    text = explain_text(query, frames, frame_of)
    table = pa.table({"explain": text.splitlines()})
    return StreamSource("sql explain", table.schema, lambda columns: table.to_batches())


def _limit(query: str) -> int | None:
    for modifier in (parsed(query).get("statements") or [{}])[0].get("node", {}).get("modifiers", []):
        if modifier.get("type") == "LIMIT_MODIFIER" and (modifier.get("limit") or {}).get("class") == "CONSTANT":
            return int(modifier["limit"]["literal"]["text"])
    return None
