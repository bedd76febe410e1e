"""``FROM a [LEFT] JOIN b ON ai_filter(...)``: a semantic join, planned by ``sem_join`` (projection, blocking, batched pairs).

A ``LEFT JOIN`` adds each left row no pair holds, its right columns NULL.

The ``ON`` text is built with ``||`` (or ``concat``) from constants and columns of both sides; it
becomes ``sem_join``'s template (``a.review || ' and ' || b.review || ' agree'`` is
``"{review:left} and {review:right} agree"``). The join's result is a DataFrame read by the rest of
the query: every column reference is rewritten to its column there (right columns whose name the left
side has are ``"right.<name>"``, as in ``sem_join``).

Example:
    >>> from inferframe.sql.parse import parse
    >>> q = parse("select * from a join b on ai_filter(a.x || ' is like ' || b.y)", {"ai_filter"})
    >>> template(q.calls[0].node["arguments"][0]["expression"], lambda ref: "left" if ref[0] == "a" else "right")
    '{x:left} is like {y:right}'
"""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa

from inferframe.sql.functions import FUNCTIONS, options_of
from inferframe.sql.parse import Call, Query
from inferframe.sql.tree import expression, replace, statement, table_ref
from inferframe.errors import PlanError
from inferframe.expressions.expression import col
from inferframe.functions._input_types import castable, is_text
from inferframe.functions.templates import parse_template
from inferframe.io.interop import quote_sql

_FIX = ("ai_filter in JOIN ... ON takes text built with || from constants and columns of both sides, e.g. "
        "ON ai_filter(a.review || ' and ' || b.review || ' say the same')")


def join_plan(q: Query, call: Call, sources: list) -> tuple[dict[str, Any], str]:
    """The semantic join's DataFrame and the query reading it (``sources``: the two sides, from ``sql.planner``)."""
    from inferframe.functions import sem_join

    ft = q.tree["from_table"]
    if ft.get("type") != "JOIN" or ft.get("join_type") not in ("INNER", "LEFT") or ft.get("ref_type") != "REGULAR" \
            or len(sources) != 2 or {ft["left"].get("type"), ft["right"].get("type")} & {"JOIN"}:
        raise PlanError("sql(): ai_filter in JOIN ... ON is planned for one inner or left join of two sources "
                        "(FROM a [LEFT] JOIN b ON ai_filter(...)); join the others first in a CTE.")
    condition = ft.get("condition") or {}
    if condition is not call.node or call.name != "ai_filter":
        raise PlanError(f"sql(): the ON condition must be the ai_filter(...) alone, got {call.text!r}; put the other "
                        "conditions in WHERE.")
    left, right = sources
    if len(call.args) != 1:
        raise PlanError(f"sql(): {_FIX}.")
    lcols, rcols = set(left.frame.column_names), set(right.frame.column_names)

    def side(ref: tuple) -> str:
        if len(ref) > 1:
            hit = [s for s, src in (("left", left), ("right", right)) if src.alias == ref[-2]]
        else:
            hit = [s for s, cols in (("left", lcols), ("right", rcols)) if ref[0] in cols]
        if len(hit) != 1:
            raise PlanError(f"sql(): the column {'.'.join(ref)} in ON ai_filter(...) is "
                            f"{'on both sides: qualify it' if hit else 'on neither side'} (e.g. a.{ref[-1]}).")
        return hit[0]

    text = template(call.node["arguments"][0]["expression"], side)
    options = options_of(FUNCTIONS["ai_filter"], call.options)
    fields = parse_template(text, "sem_join", sides=True)
    lframe, lback = _as_text(left.frame, fields.columns("left"))
    rframe, rback = _as_text(right.frame, fields.columns("right"))
    joined = sem_join(lframe, rframe, text, **options)
    # || wrote the number as text for the model (SQL's explicit conversion); the query reads the column's own type
    for name, dtype in lback + [(n if n not in lcols else f"right.{n}", d) for n, d in rback]:
        joined = joined.with_column(name, col(name).cast(dtype))

    def out_name(ref: tuple) -> str:
        where = side(ref)
        return ref[-1] if where == "left" or ref[-1] not in lcols else f"right.{ref[-1]}"

    refs = []
    _refs(q.tree, refs, skip=id(ft))
    aliases = {item.get("alias") for item in q.tree.get("select_list") or [] if item.get("alias")}
    for node in refs:
        name = tuple(node["column_names"])
        if len(name) == 1 and name[0] in aliases and name[0] not in lcols | rcols:
            continue  # ORDER BY an alias of the SELECT list
        replace(node, dict(expression(quote_sql(out_name(name))), alias=node.get("alias", "")))
    if ft.get("join_type") == "LEFT":
        return _left(q, left.frame, joined), text
    q.tree["from_table"] = table_ref("__ifr_join", "")
    return {"__ifr_join": joined}, text


def _left(q: Query, left: Any, joined: Any) -> dict[str, Any]:
    """LEFT JOIN: the pairs, and each left row no pair holds, its right columns NULL (the tree reads their union)."""
    from inferframe.sql.nested import computes_ai
    from inferframe.sql.reads import cheap_columns

    # Read twice (the pairs, the rows without one): AI columns there would be asked twice.
    if cheap_columns(left) != left.column_names or computes_ai(left):
        raise PlanError("sql(): LEFT JOIN ... ON ai_filter(...) reads its left side twice, and that side has AI "
                        "columns; compute them first (ifr.sql(...) into a DataFrame) or use an inner JOIN.")
    same = " AND ".join(f"l.{quote_sql(n)} IS NOT DISTINCT FROM j.{quote_sql(n)}" for n in left.column_names)
    rows = statement(f"SELECT * FROM (SELECT * FROM __ifr_join UNION ALL BY NAME SELECT * FROM __ifr_left AS l "
                     f"WHERE NOT EXISTS (SELECT 1 FROM __ifr_join AS j WHERE {same})) AS __ifr_join")
    q.tree["from_table"] = rows["from_table"]
    return {"__ifr_join": joined, "__ifr_left": left}


def _as_text(frame: Any, names: list[str]) -> tuple[Any, list]:
    """The frame with the columns ``||`` turned into text cast to text, and those columns' own types."""
    schema = frame.schema().to_arrow()
    back = [(n, schema.field(n).type) for n in names
            if not is_text(schema.field(n).type) and castable(schema.field(n).type)]
    for name, _ in back:
        frame = frame.with_column(name, col(name).cast(pa.string()))
    return frame, back


def template(expr: dict, side: Callable[[tuple], str]) -> str:
    """``sem_join``'s template of the ON text: constants as they are, columns as ``{name:side}``."""
    parts: list[str] = []

    def walk(e: dict) -> None:
        name = str(e.get("function_name", "")).lower()
        if e.get("class") == "FUNCTION" and name in ("||", "concat"):
            for a in e.get("arguments", []):
                walk(a["expression"])
        elif e.get("class") == "CONSTANT":
            value = (e.get("literal") or e.get("value") or {}).get("text")
            if not isinstance(value, str):
                raise PlanError(f"sql(): {_FIX}.")
            parts.append(value.replace("{", "{{").replace("}", "}}"))
        elif e.get("class") == "COLUMN_REF":
            ref = tuple(e["column_names"])
            parts.append("{" + ref[-1] + ":" + side(ref) + "}")
        elif e.get("class") == "CAST" and e.get("child"):
            walk(e["child"])
        else:
            raise PlanError(f"sql(): {_FIX}.")

    walk(expr)
    return "".join(parts)


def _refs(node: Any, out: list, skip: int) -> None:
    """Every column reference and qualified star outside the FROM."""
    if isinstance(node, list):
        for item in node:
            _refs(item, out, skip)
        return
    if not isinstance(node, dict) or id(node) == skip:
        return
    if node.get("class") == "COLUMN_REF":
        out.append(node)
        return
    if node.get("class") == "STAR" and node.get("relation_name"):
        raise PlanError(f"sql(): {node['relation_name']}.* over a semantic join: name the columns, or use *.")
    for value in node.values():
        _refs(value, out, skip)
