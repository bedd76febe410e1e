"""``ai_agg(text, instruction)`` and ``ai_summarize_agg(text)``: an AI aggregate per group, planned by ``sem_agg``.

DuckDB runs the query with the aggregate as ``list(text)`` (its ``WHERE``, ``GROUP BY``, ``HAVING``,
``ORDER BY`` and ``LIMIT`` as written, the group's keys carried along), so each group's texts are one
list; those rows are exploded and ``sem_agg`` answers once per group (packing the texts into as few
prompts as the model's context holds, a tree of partial answers for a group too large for one). The
result has the query's columns, in the query's row order, with the answer in place of the list.

Example:
    >>> from inferframe.sql.parse import parse
    >>> q = parse("select film, ai_agg(review, 'Sum up') as s from t group by film", {"ai_agg"})
    >>> stage_one(q, q.calls)
    'SELECT film, list(review) AS __ifr_l0, film AS __ifr_k0 FROM t GROUP BY film'
"""

from __future__ import annotations

import copy
from typing import Any, Callable

from inferframe.sql.functions import FUNCTIONS, options_of
from inferframe.sql.parse import Call, Query
from inferframe.sql.tree import expression, to_sql
from inferframe.errors import PlanError
from inferframe.expressions.expression import col
from inferframe.functions._input_types import check_input
from inferframe.io.interop import quote_sql


def stage_one(q: Query, calls: list[Call]) -> str:
    """The query with each AI aggregate as ``list(text) AS __ifr_l<i>``, each GROUP BY key after them as ``__ifr_k<i>``."""
    tree = copy.deepcopy(q.tree)
    items = tree["select_list"]
    for n, call in enumerate(calls):
        index = next(i for i, item in enumerate(q.tree["select_list"]) if item is call.node)
        items[index] = dict(expression(f"list({call.args[0].text})"), alias=f"__ifr_l{n}")
    for i, g in enumerate(tree.get("group_expressions") or []):
        if g.get("class") != "CONSTANT":  # GROUP BY 1: the select item it names is already a column
            items.append(dict(copy.deepcopy(g), alias=f"__ifr_k{i}"))
    return to_sql(tree)


def _checked(q: Query) -> list[Call]:
    """The query's AI aggregates, each a whole SELECT item with a text and a constant instruction."""
    aggs = [c for c in q.calls if FUNCTIONS.get(c.name) is not None and FUNCTIONS[c.name].aggregate]
    items = [id(item) for item in q.tree.get("select_list") or []]
    for call in aggs:
        fn = FUNCTIONS[call.name]
        if id(call.node) not in items or call.clause != "select":
            raise PlanError(f"sql(): {call.name}(...) is a whole item of the SELECT list (e.g. {call.name}(review, ...) "
                            "AS summary); wrap it in another expression in an outer query (or a CTE).")
        if not fn.required <= len(call.args) <= len(fn.params) or any(a.constant for a in call.args[:1]) \
                or not all(a.constant and isinstance(a.value, str) for a in call.args[1:]):
            raise PlanError(f"sql(): {call.name}() takes {'(text, instruction)' if len(fn.params) > 1 else '(text)'}: "
                            f"a text expression and a string constant; got {call.text!r}.")
    return aggs


def agg_plan(q: Query, frames: dict[str, Any], frame_of: Callable[[str, dict], Any]) -> tuple[str, dict]:
    """The query reading the aggregates' answers, and its frames (one sem_agg DataFrame per aggregate).

    The other AI calls of the query (scalar ones, in the SELECT, WHERE or GROUP BY) stay in stage one,
    which ``frame_of`` plans as AI columns. With several AI aggregates, stage one's rows are numbered
    and each aggregate is its own ``sem_agg`` per row, joined back by number: stage one runs once per
    aggregate (its scalar AI calls, if any, are then answered by the response cache).
    """
    from inferframe.functions import sem_agg

    aggs = _checked(q)
    rows = frame_of(stage_one(q, aggs), frames)
    if len(aggs) > 1:
        rows = frame_of('SELECT *, row_number() OVER () AS "__ifr_row" FROM __ifr_stage', {"__ifr_stage": rows})
    names = rows.column_names
    lists = [f"__ifr_l{n}" for n in range(len(aggs))]
    others = [n for n in names if n not in lists and n != "__ifr_row"]
    out: dict[str, Any] = {}
    for n, call in enumerate(aggs):
        keep = (["__ifr_row"] if len(aggs) > 1 else []) + (others if n == 0 else [])
        texts = "texts" if "texts" not in keep else "__ifr_texts"
        exploded = rows.select(*keep, lists[n]).explode(lists[n]).with_column(texts, col(lists[n])).exclude(lists[n])
        check_input(call.name, exploded.schema().to_arrow().field(texts), ("text",), sql=call.args[0].text,
                    param="text")
        if call.name == "ai_agg":
            template = call.args[1].value.replace("{", "{{").replace("}", "}}") + f" (over the {{{texts}}})"
        else:
            template = f"Summarize the {{{texts}}}"
        out[f"__ifr_agg{n}"] = sem_agg(exploded, template, group_by=keep or None, column=f"__ifr_a{n}",
                                       **options_of(FUNCTIONS[call.name], call.options))
    select = []
    for name, item in zip([n for n in names if not n.startswith("__ifr_k") and n != "__ifr_row"], q.tree["select_list"]):
        shown = item.get("alias") or (next(c.text for c in aggs if c.node is item) if name in lists else name)
        select.append(quote_sql(f"__ifr_a{lists.index(name)}" if name in lists else name) + f" AS {quote_sql(shown)}")
    joins = "".join(f" LEFT JOIN __ifr_agg{n} USING (__ifr_row)" for n in range(1, len(aggs)))
    order = " ORDER BY __ifr_agg0.__ifr_row" if len(aggs) > 1 else ""
    return f"SELECT {', '.join(select)} FROM __ifr_agg0{joins}{order}", out
