"""``ai_agg(text, instruction)`` and ``ai_summarize_agg(text)``: an AI aggregate per group, planned by ``sem_agg``.

DuckDB runs the query with the aggregate as ``list(text)`` (its ``WHERE``, ``GROUP BY``, ``HAVING``,
``ORDER BY`` and ``LIMIT`` as written, the group's keys carried along), so each group's texts are one
list; those rows are exploded and ``sem_agg`` answers once per group (packing the texts into as few
prompts as the model's context holds, a tree of partial answers for a group too large for one). The
result has the query's columns, in the query's row order, with the answer in place of the list.

Example:
    >>> from inferframe.sql.parse import parse
    >>> q = parse("select film, ai_agg(review, 'Sum up') as s from t group by film", {"ai_agg"})
    >>> stage_one(q, q.calls[0])
    'SELECT film, film AS __ifr_k0, list(review) AS s FROM t GROUP BY film'
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


def stage_one(q: Query, call: Call) -> str:
    """The query with the aggregate as ``list(text)``, each GROUP BY key before it as ``__ifr_k<i>``."""
    tree = copy.deepcopy(q.tree)
    items = tree["select_list"]
    index = next(i for i, item in enumerate(q.tree["select_list"]) if item is call.node)
    keys = []
    for i, g in enumerate(tree.get("group_expressions") or []):
        if g.get("class") == "CONSTANT":  # GROUP BY 1: the select item it names is already a column
            continue
        keys.append(dict(copy.deepcopy(g), alias=f"__ifr_k{i}"))
    listed = expression(f"list({call.args[0].text})")
    listed["alias"] = call.text if call.unnamed else call.node.get("alias", "")
    items[index:index + 1] = keys + [listed]
    return to_sql(tree)


def agg_plan(q: Query, frames: dict[str, Any], frame_of: Callable[[str, dict], Any]) -> tuple[str, dict, Any]:
    """The query reading the aggregate's answers, its frames, and the sem_agg DataFrame (for EXPLAIN)."""
    from inferframe.functions import sem_agg

    aggs = [c for c in q.calls if FUNCTIONS.get(c.name) is not None and FUNCTIONS[c.name].aggregate]
    if len(aggs) != 1 or len(q.calls) != 1:
        raise PlanError("sql(): a query with an AI aggregate (ai_agg, ai_summarize_agg) has it once and no other AI "
                        "function in this version; compute the others in a subquery of FROM.")
    call = aggs[0]
    fn = FUNCTIONS[call.name]
    items = q.tree.get("select_list") or []
    index = next((i for i, item in enumerate(items) if item is call.node), None)
    if index is None or call.clause != "select":
        raise PlanError(f"sql(): {call.name}(...) is a whole item of the SELECT list (e.g. {call.name}(review, ...) AS "
                        "summary); wrap it in another expression in an outer query.")
    if not fn.required <= len(call.args) <= len(fn.params) or any(a.constant for a in call.args[:1]) \
            or not all(a.constant and isinstance(a.value, str) for a in call.args[1:]):
        raise PlanError(f"sql(): {call.name}() takes {'(text, instruction)' if len(fn.params) > 1 else '(text)'}: "
                        f"a text expression and a string constant; got {call.text!r}.")
    options = options_of(fn, call.options)
    rows = frame_of(stage_one(q, call), frames)
    names = rows.column_names
    hidden = [n for n in names if n.startswith("__ifr_k")]
    listed = names[index + len(hidden)]
    texts = "texts" if "texts" not in names else "__ifr_texts"
    exploded = rows.explode(listed).with_column(texts, col(listed)).exclude(listed)
    check_input(call.name, exploded.schema().to_arrow().field(texts), ("text",), sql=call.args[0].text, param="text")
    if call.name == "ai_agg":
        instruction = call.args[1].value.replace("{", "{{").replace("}", "}}")
        template = f"{instruction} (over the {{{texts}}})"
    else:
        template = f"Summarize the {{{texts}}}"
    keys = [n for n in names if n != listed]
    answers = sem_agg(exploded, template, group_by=keys or None, column="__ifr_answer", **options)
    shown = [n for n in names if n not in hidden]
    select = ", ".join(quote_sql("__ifr_answer") + f" AS {quote_sql(n)}" if n == listed else quote_sql(n) for n in shown)
    return f"SELECT {select} FROM __ifr_agg", {"__ifr_agg": answers}, answers
