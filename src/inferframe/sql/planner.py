"""AI functions in SQL: a query's ``ai_*`` calls become AI columns of the DataFrames it reads, planned by inferframe.

DuckDB parses the query (``sql.parse``). Each AI call reads the columns of one of the query's
sources (a DataFrame given by name, a file such as ``'reviews.parquet'``, a table function such as
``read_csv(...)``). That source becomes a DataFrame with one more column per call, computed by the
Python AI function of the same meaning (``sql.functions``): the arguments that are not bare columns
are computed by DuckDB first, as columns of their own. The query is then rewritten to read those
columns in place of the calls and runs as any ``ifr.sql`` query: only the columns and rows the query
needs are computed (cheap parts of the ``WHERE`` first, a ``LIMIT`` stops the stream), through the
engine's batching, limits, retries, cache and cost. A failed row's value is NULL and its error is
``ai_error(<the same call>)``; ``on_error => 'raise'`` stops the query instead.

``ai_filter`` in a ``JOIN ... ON`` is a semantic join (``sem_join``); ``ai_agg`` and
``ai_summarize_agg`` are aggregates planned as ``sem_agg`` per group of the query's ``GROUP BY``.

Example:
    >>> import inferframe as ifr
    >>> people = ifr.from_pydict({"name": ["Ada"]})
    >>> frame_of = lambda query, frames: ifr.sql(query, **frames)
    >>> planned = plan("select ai_complete('Greet ' || name, max_tokens => 4) as hi from people", {"people": people},
    ...                frame_of)
    >>> planned.query
    'SELECT people.__ai0 AS hi FROM people'
"""

from __future__ import annotations

import copy
import difflib
import re
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

from inferframe.sql.aggregates import agg_plan
from inferframe.sql.join import join_plan
from inferframe.sql.limit import chain_ok, left_join_rows, limit_push
from inferframe.sql.nested import unnest
from inferframe.sql import topk
from inferframe.sql.functions import CONST, FUNCTIONS, Function, expressions, options_of, similarity
from inferframe.sql.parse import Arg, Call, Query, parse_tree
from inferframe.sql.tree import conjunction, conjuncts, expression, expression_sql, replace, select_star, statement, table_ref, to_sql
from inferframe.errors import PlanError
from inferframe.io.interop import optional, quote_sql


FrameOf = Callable[[str, dict], Any]
_AI_CALL = re.compile(r"(?<![\w.])ai_\w+\s*\(", re.I)


@dataclass
class Source:
    """One FROM item of the query: its name in the query, the DataFrame behind it, and the AI columns added."""

    alias: str
    register: str  # the name the rewritten query reads it by
    frame: Any
    node: dict | None  # the FROM item's node, replaced by a read of ``register`` when the names differ
    exprs: list[tuple[str, str]] = field(default_factory=list)  # (column, SQL) computed by DuckDB before the AI
    calls: list[tuple[str, Function, dict, dict]] = field(default_factory=list)  # (column, fn, inputs, options)
    filters: list[tuple[str, Function, dict, dict]] = field(default_factory=list)  # ai_filter run as df.where
    where: str | None = None  # the WHERE less its pushed ai_filters, run before them (with a pushed LIMIT)
    limit: int | None = None  # rows kept after the pushed filters
    order: str | None = None  # the ORDER BY of a pushed LIMIT, over the source's columns
    notes: list[str] = field(default_factory=list)
    distinct: bool = False  # a top-k (sql.topk): the AI columns are computed once per distinct input
    topk: topk.TopK | None = None  # that plan's frames, for EXPLAIN


@dataclass
class Planned:
    """The rewritten query, the frames it reads, and what EXPLAIN shows of the AI calls."""

    query: str
    frames: dict[str, Any]
    sources: list[Source]
    notes: list[str]
    extra: list[tuple[str, Any]] = field(default_factory=list)  # whole-table AI steps (sem_join, sem_agg) to explain
    nested: list[tuple[str, str, dict]] = field(default_factory=list)  # (what, SQL, frames): CTEs and subqueries


def has_ai(query: str) -> bool:
    """Whether the query may call an AI function (a cheap look before DuckDB parses it).

    Example:
        >>> has_ai("select ai_complete(q) from t"), has_ai("select email_ai_flag from t")
        (True, False)
    """
    return _AI_CALL.search(query) is not None


def plan(query: str, frames: dict[str, Any], frame_of: FrameOf, push: bool = True) -> Planned | None:
    """The query with its AI calls planned as AI columns of its sources (None: it calls no AI function).

    Parameters:
        query: the SELECT.
        frames: the DataFrames it names.
        frame_of: ``frame_of(query, frames)``: the DataFrame of a query without AI calls (``ifr.sql``).
        push: an ``ai_filter`` in the ``WHERE`` of a ``LIMIT`` query may run in the source (``sql.limit``).
    """
    return plan_tree(statement(query), frames, frame_of, push)


def plan_tree(tree: dict, frames: dict[str, Any], frame_of: FrameOf, push: bool = True) -> Planned | None:
    """``plan`` of a SELECT node (DuckDB's syntax tree, ``sql.tree``); the node is rewritten in place."""
    given, nested = frames, []
    frames = unnest(tree, frames, frame_of, nested)  # CTEs and nested SELECTs with AI calls: DataFrames of their own
    planned = _plan_top(tree, given, frames, frame_of, push)
    if planned is not None:
        planned.nested = nested
    return planned


def _plan_top(tree: dict, given: dict[str, Any], frames: dict[str, Any], frame_of: FrameOf,
              push: bool) -> Planned | None:
    original = copy.deepcopy(tree)
    if tree.get("type") != "SELECT_NODE":  # a UNION of planned branches
        return Planned(to_sql(tree), frames, [], []) if frames.keys() != given.keys() else None
    q = parse_tree(tree, FUNCTIONS)
    if q.unknown:
        raise PlanError(_unknown(q.unknown[0]))
    if not q.calls:
        return Planned(to_sql(tree), frames, [], []) if frames.keys() != given.keys() else None
    if any(FUNCTIONS.get(c.name) is not None and FUNCTIONS[c.name].aggregate for c in q.calls):
        text, more = agg_plan(q, frames, frame_of)
        return Planned(text, {**frames, **more}, [], [], [(f"sem_agg per group ({name})", f) for name, f in more.items()])
    sources = _sources(q, frames, frame_of)
    joins = [c for c in q.calls if c.clause == "join"]
    if joins:
        joined, template = join_plan(q, joins[0], sources)  # the tree now reads the join's DataFrame, its columns
        step = (f"sem_join {template!r}", joined["__ifr_join"])
        if len(q.calls) == 1:
            return Planned(to_sql(q.tree), {**frames, **joined}, [], [], [step])
        # The other AI calls read the join's rows: planned over its DataFrame as over any one source, so they are
        # asked for the pairs the join keeps, through the same engine.
        rest = _plan_top(q.tree, given, {**frames, **joined}, frame_of, push)
        if rest is None:  # cannot be: the tree still calls them; kept as an error, not a silent loss
            raise PlanError("sql(): the AI calls beside the semantic join were lost in planning; compute them over "
                            "its result in an outer query.")
        rest.extra.insert(0, step)
        return rest
    pushed = limit_push(q, sources[0].frame.column_names if len(sources) == 1 else None) if push else None
    ranked = pushed is None and push and topk.applies(q, len(sources))
    if ranked:  # the WHERE runs in DuckDB before the AI columns; DuckDB's top-n runs over their answers
        sources[0].distinct, sources[0].where = True, topk.where_sql(q)
    done: dict[str, str] = {}
    for call in q.calls:
        if call.clause not in ("select", "where", "order", "having", "join", "group"):
            raise PlanError(f"sql(): {call.name}() is used where inferframe cannot plan it ({call.text!r}); AI functions "
                            "go in a SELECT's list, its WHERE, ORDER BY, HAVING, or a JOIN ... ON. Put the subquery's "
                            "rows in a DataFrame first (ifr.sql(...)), then query it.")
        as_filter = pushed is not None and id(call.node) in pushed.calls
        column = expression(_column_sql(call, sources, done, as_filter))
        column["alias"] = call.text if call.unnamed else call.node.get("alias", "")
        replace(call.node, column)
        if call.clause == "order" and any(m.get("type") == "LIMIT_MODIFIER" for m in tree.get("modifiers") or []):
            _source_of(call, sources).notes.append(
                f"ORDER BY {call.name}(...) LIMIT: top-k by DuckDB over the AI column, " + (
                    "each distinct input past the cheap filters asked once" if ranked else
                    "each row past the cheap filters asked once (never more calls than rows)"))
    if pushed is not None:
        if pushed.where is not None:  # its pushed ai_filters are TRUE now: the rest runs before them
            kept = [c for c in conjuncts(pushed.where) if expression_sql(c).lower() != "true"]
            sources[0].where = expression_sql(conjunction(kept)) if kept else None
        sources[0].limit, sources[0].order = pushed.rows, pushed.order
    elif push and len(sources) == 2 and not sources[1].calls and left_join_rows(q) is not None:
        sources[0].limit = left_join_rows(q)  # a LEFT JOIN keeps every left row: n output rows need n of them
    for source in sources:
        _attach(source, frame_of)
        if source.node is not None:
            replace(source.node, table_ref(source.register, source.alias))
    rewritten = to_sql(q.tree)
    out = dict(frames)
    out.update({s.register: s.frame for s in sources})
    if pushed is not None and not chain_ok(rewritten, {s.register: s.frame for s in sources}):
        return plan_tree(original, frames, frame_of, push=False)  # something between the WHERE and the LIMIT
    return Planned(rewritten, out, sources, [])


def _unknown(name: str) -> str:
    duckdb = optional("duckdb", "sql", "sql()")
    con = duckdb.connect()
    try:
        con.execute(f"SELECT {name}()")
        theirs = ""
    except duckdb.Error as e:
        theirs = f" (DuckDB: {str(e).splitlines()[0]})"
    finally:
        con.close()
    near = difflib.get_close_matches(name, list(FUNCTIONS) + ["ai_error"], n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}()? " if near else ""
    return (f"sql(): unknown AI function {name}(); {hint}The AI functions are "
            f"{', '.join(sorted(FUNCTIONS))} and ai_error.{theirs}")


def _sources(q: Query, frames: dict[str, Any], frame_of: FrameOf) -> list[Source]:

    found: list[Source] = []

    def visit(node: dict) -> None:
        kind = node.get("type")
        if kind == "JOIN":
            visit(node["left"])
            visit(node["right"])
            return
        if kind in ("EMPTY", "EMPTY_FROM") or kind is None:
            return
        i = len(found)
        if kind == "BASE_TABLE" and node.get("table_name") in frames and not node.get("schema_name"):
            name = node["table_name"]
            if any(s.register == name for s in found):  # read twice (a self-join): each read its own AI columns
                found.append(Source(node.get("alias") or name, f"__ifr_src{i}", frames[name], node))
            else:
                found.append(Source(node.get("alias") or name, name, frames[name], None))
            return
        if kind not in ("BASE_TABLE", "TABLE_FUNCTION", "SUBQUERY"):
            raise PlanError(f"sql(): a query with AI functions reads DataFrames, files ('reviews.parquet'), table "
                            f"functions (read_csv(...)) and subqueries; its FROM has a {kind}: query it with "
                            "ifr.sql(...) first and pass the result as a DataFrame.")
        frame = frame_of(select_star(dict(node, alias="")), frames)
        found.append(Source(node.get("alias") or f"__ifr_src{i}", f"__ifr_src{i}", frame, node))

    visit(q.tree.get("from_table") or {})
    if not found:
        raise PlanError("sql(): AI functions read the rows of a FROM: name a DataFrame, a file or read_csv(...).")
    return found


def _column_sql(call: Call, sources: list[Source], done: dict[str, str], as_filter: bool = False) -> str:
    """The SQL that reads the call's result column (planned now, once per distinct call text)."""
    if call.name == "ai_error":
        if call.inner is None or len(call.args) != 1:
            raise PlanError(f"sql(): ai_error() takes one AI function call and gives its error per row, e.g. "
                            f"ai_error(ai_complete(review)); got {call.text!r}.")
        _column_sql(call.inner, sources, done)
        return done[" ".join(call.inner.text.split())].split("\0")[1] + "_error\""
    key = " ".join(call.text.split())
    if key in done:
        return done[key].split("\0")[0]
    fn = FUNCTIONS[call.name]
    inputs = _bind(fn, call)
    source = _source_of(call, sources)
    column = f"__ai{sum(len(s.calls) + len(s.filters) for s in sources)}"
    for name, kind in fn.params:
        if kind == CONST or name not in inputs:
            continue
        arg: Arg = inputs[name]
        bare = arg.column
        if bare is not None and bare[-1] in source.frame.column_names:
            inputs[name] = bare[-1]
        else:
            inputs[name] = f"{column}_{name}"
            source.exprs.append((inputs[name], arg.text))
    inputs = {k: (v.value if isinstance(v, Arg) else v) for k, v in inputs.items()}
    options_of(fn, call.options)  # checked now, with the Python function's own errors when it is built
    if as_filter:
        source.filters.append((column, fn, inputs, call.options))
        return "TRUE"
    source.calls.append((column, fn, inputs, call.options))
    qualified = f"{quote_sql(source.alias)}.\"{column}"
    done[key] = fn.result.format(col=qualified + '"') + "\0" + qualified
    return done[key].split("\0")[0]


def _bind(fn: Function, call: Call) -> dict[str, Any]:
    """The call's arguments by parameter name; PlanError for a wrong count or a column where a constant belongs."""
    signature = f"{fn.name}({', '.join(n if i < fn.required else '[' + n + ']' for i, (n, _) in enumerate(fn.params))})"
    if not fn.required <= len(call.args) <= len(fn.params):
        raise PlanError(f"sql(): {fn.name}() takes {signature}, got {len(call.args)} arguments in {call.text!r}.")
    out: dict[str, Any] = {}
    for (name, kind), arg in zip(fn.params, call.args):
        if kind == CONST and not arg.constant:
            raise PlanError(f"sql(): {fn.name}()'s {name} must be a constant (a string or a list of strings, the "
                            f"same for every row), got {arg.text!r}; wrong argument type in {signature}.")
        out[name] = arg
    for name, _ in fn.params:
        if name in call.options and name not in out and name != "model":
            out[name] = Arg(repr(call.options[name]), (), call.options.pop(name))
    return out


def _source_of(call: Call, sources: list[Source]) -> Source:
    """The FROM item whose columns the call reads; PlanError when it reads two."""
    hits = []
    for arg in call.args:
        for ref in arg.columns:
            if len(ref) > 1:
                hit = [s for s in sources if s.alias == ref[-2]]
            else:
                hit = [s for s in sources if ref[0] in s.frame.column_names]
            hits += hit[:1]
    mine = {id(s): s for s in hits}
    if len(mine) > 1:
        raise PlanError(f"sql(): {call.text!r} reads columns of {' and '.join(s.alias for s in mine.values())}; an AI "
                        "function reads one FROM item's columns (a semantic join: ai_filter(...) in JOIN ... ON).")
    return next(iter(mine.values()), sources[0])


def _attach(source: Source, frame_of: FrameOf) -> None:
    """Add the source's AI columns (and the argument columns before them) to its DataFrame."""
    frame = source.frame
    if source.exprs or source.where is not None or source.order is not None:
        extra = "".join(f", {text} AS {quote_sql(name)}" for name, text in source.exprs)
        where = f" WHERE {source.where}" if source.where is not None else ""
        order = f" ORDER BY {source.order}" if source.order is not None else ""
        if order and not source.filters:  # no AI filter between: DuckDB's top-n
            order += f" LIMIT {source.limit}"
        frame = frame_of(f"SELECT *{extra} FROM __ifr_base AS {quote_sql(source.alias)}{where}{order}",
                         {"__ifr_base": frame})
    schema = frame.schema().to_arrow()
    for column, fn, inputs, options in source.filters + source.calls:
        for name, kind in fn.params:
            if kind != CONST and name in inputs:
                _check_text(fn, name, inputs[name], schema, source)
    for column, fn, inputs, options in source.filters:
        ((_, expr),) = expressions(fn, inputs, options)
        frame = frame.where(expr)
        source.notes.append(f"WHERE {fn.name}(...) on {source.alias}: a sem_filter plan, run before the LIMIT")
    if source.limit is not None:
        frame = frame.limit(source.limit)
        source.notes.append(f"LIMIT {source.limit}: the filter stops sending once {source.limit} rows passed"
                            if source.filters else f"LIMIT {source.limit}: AI columns for {source.limit} rows at most")
    if source.distinct and source.calls:
        keys = list(dict.fromkeys(inputs[name] for _, fn, inputs, _ in source.calls
                                  for name, kind in fn.params if kind != CONST and name in inputs))
        frame, source.topk = topk.distinct_scored(frame, keys, lambda f: _add_calls(f, source.calls), frame_of)
    else:
        frame = _add_calls(frame, source.calls)
    source.notes += [f"{column} = {fn.name}(...) on {source.alias}" for column, fn, *_ in source.calls]
    source.frame = frame


def _add_calls(frame: Any, calls: list[tuple[str, Function, dict, dict]]) -> Any:
    """``frame`` with the AI columns of ``calls`` (the result, and its error and other parts)."""
    for column, fn, inputs, options in calls:
        for suffix, expr in expressions(fn, inputs, options):
            frame = frame.with_column(column + suffix, similarity(column + "_a", column + "_b") if expr is None else expr)
    return frame


def _check_text(fn: Function, param: str, column: str, schema: Any, source: Source) -> None:
    from inferframe.functions._input_types import check_input  # the one input rule of Python's AI functions

    shown = next((text for name, text in source.exprs if name == column), column)
    check_input(fn.name, schema.field(column), ("text",), sql=shown, param=param)
