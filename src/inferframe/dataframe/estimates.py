"""What a plan's AI calls will cost before any request: rows, tokens and dollars per call (their lines in explain():
``plan.estimate_text``).

Example:
    >>> from inferframe.plan.estimate_text import estimate_lines
    >>> estimate_lines({"calls": [{"call": "prompt[m]", "rows": 2, "input_tokens": 9, "cost_usd": None}],
    ...                 "input_tokens": 9, "cost_usd": None})
    ['prompt[m]: 2 calls, 9 input tokens, price unknown', 'total: 9 input tokens, price unknown']
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from inferframe.plan import logical as lp
from inferframe.plan.inspect import estimate_bounds, has_ai, whole_tables
from inferframe.plan.whole_table import Planned, kept


def estimate_plan(plan: lp.LogicalPlan, rows_of: Callable[[lp.LogicalPlan], Iterable[dict]]) -> dict:
    """``DataFrame.estimate()`` of an optimized plan; ``rows_of`` reads a plan's rows (no model call in it)."""
    from inferframe.ai.requests import estimate_call

    calls: list[dict[str, Any]] = []
    for node, inputs, bounded in estimate_bounds(plan):
        priced = node.udf.call.priced() if node.udf.call is not None else ()
        if not priced:
            continue  # in-process models and media steps: no tokens, no bill
        if inputs is None:
            calls += [{"call": c.label, "rows": None, "note": "depends on another AI call's output"} for c, _ in priced]
            continue
        rows = [tuple(r.values()) for r in rows_of(inputs)]
        for config, template in priced:
            # A cascade's stage: its constant parts around the row's text (every row counted: an upper bound).
            mine = rows if template is None else [tuple(r[0] if p is None else p for p in template) for r in rows]
            calls.append(estimate_call(config, mine))
            if bounded:
                calls[-1]["note"] = "at most: an AI filter before this call may drop rows"
    for node in whole_tables(plan):
        # Its questions depend on the answers before them: the calls are estimated, their tokens are not.
        n = None if has_ai(node.input) else sum(1 for _ in rows_of(node.input))
        calls.append({"call": node.note, "rows": None, "cost_usd": None,
                      "note": f"{node.calls(n)}; tokens and price known after the run"})
    for node in _unplanned(plan):
        # sem_join: the plan its rule chooses from what is known before the run, and that plan's estimate.
        est = node.estimate()
        if est["calls"] is None:
            calls.append({"call": est["call"], "rows": None, "cost_usd": None,
                          "note": f"{est['note']}; calls known when the job runs"})
        else:
            calls.append({"call": est["call"], "rows": est["calls"], "input_tokens": est["input_tokens"],
                          "cost_usd": est["cost_usd"], "note": est["note"]})
    costs = [c.get("cost_usd") for c in calls]
    savings = [c.get("cache_saving_usd") for c in calls if c.get("rows") is not None]
    return {
        "calls": calls,
        "input_tokens": sum(c.get("input_tokens") or 0 for c in calls),
        "cost_usd": None if any(c is None for c in costs) else sum(costs),
        "cached_tokens": sum(c.get("cached_tokens") or 0 for c in calls),
        "cache_saving_usd": None if any(s is None for s in savings) else sum(savings),
    }


def _unplanned(plan: lp.LogicalPlan) -> Iterator[Planned]:
    """Every semantic node of the plan not yet planned in this process (sem_join), outermost first."""
    if isinstance(plan, Planned) and kept(plan) is None:
        yield plan
    for c in plan.children():
        yield from _unplanned(c)


