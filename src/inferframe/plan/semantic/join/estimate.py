"""sem_join's estimates and plan choice: each plan's calls, tokens and cost, the cheapest chosen, explain()'s line.

| plan | what runs | model calls |
|---|---|---|
| ``projection`` | each side's property once per row, then a hash join on it | rows(left) + rows(right) |
| ``blocking`` | embeddings, the ``k`` nearest right rows per left row, a yes/no check per candidate | sample + rows(left) * k |
| ``nested`` | every pair, a yes/no check each | rows(left) * rows(right) |
| ``batched`` | every pair, ``pairs_per_request`` right rows per request | rows(left) * ceil(rows(right) / pairs_per_request) |
| ``blocking_batched`` | blocking's ``k`` candidates per left row, asked as in ``batched`` | sample + rows(left) * ceil(k / pairs_per_request) |

Example:
    >>> _fmt(_estimate(None, {"tokens": None, "cost": None}))
    'est_calls=? est_tokens=? est_cost=?'
    >>> _choose({"nested": _estimate(16, _FREE), "batched": _estimate(4, _FREE)}, {})
    'batched'
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any

from inferframe.expressions.expression import Expression
from inferframe.plan.ai_nodes import ai_call_of
from inferframe.plan.semantic.join.names import DEFAULT_K, side_text

_FREE = MappingProxyType({"tokens": 0, "cost": 0.0})


def line_of(node: Any, stats: Any, with_estimates: bool = False) -> tuple:
    """The plan chosen for ``node`` (a ``SemJoin``) with ``stats`` (what is known before the run, or what the run
    gathered; None: chosen when the job runs) and explain()'s ``SemJoin ...`` line (and each plan's estimate,
    ``with_estimates``)."""
    s, steps = node.spec, node.steps
    n_left, n_right = stats.n_left, stats.n_right
    known = n_left is not None and n_right is not None
    lrows, rrows = stats.rows("left"), stats.rows("right")
    per_check = _per_call(steps.check, _pair_rows(s, lrows, rrows))
    estimates: dict[str, dict] = {}
    if s.on_property is not None:
        per_prop = _per_call(steps.prop("left", s.on_property, _list(s.property_values)), _side_rows(s, lrows))
        estimates["projection"] = _estimate(_sum(n_left, n_right), per_prop)
    k_est = s.k or (None if n_right is None else min(n_right, DEFAULT_K))
    sampled = 0 if s.k else (None if n_left is None else min(s.sample_size, n_left))
    estimates["blocking"] = _estimate(_blocking_calls(sampled, n_left, n_right, k_est), per_check)
    estimates["nested"] = _estimate(_mul(n_left, n_right), per_check)
    per_batch = _per_call(steps.batch, _batch_rows(s, lrows, rrows))
    estimates["batched"] = _estimate(_mul(n_left, None if n_right is None else
                                          math.ceil(n_right / s.pairs_per_request)), per_batch)
    blocking_batched = lambda k_: _add(_estimate(_mul(sampled, n_right), per_check),  # noqa: E731
                                       _estimate(_mul(n_left, None if k_ is None else
                                                      math.ceil(k_ / s.pairs_per_request)), per_batch))
    estimates["blocking_batched"] = blocking_batched(k_est)
    skipped = _not_considered(estimates, _mul(n_left, n_right), s.max_nested_pairs)
    if s.propose:
        chosen = None
    elif s.plan != "auto":
        chosen = s.plan
    else:
        chosen = _choose(estimates, skipped) if known else None
    note = f" on_property={s.detected} ({s.how})" if s.detected else ""
    fitted = f" pairs_per_request={s.pairs_per_request}" + (
        f" (of {s.asked_pairs}: what max_tokens={s.max_tokens} holds)" if s.pairs_per_request != s.asked_pairs else "")
    if chosen in ("batched", "blocking_batched"):
        note += fitted
    if chosen in ("blocking", "blocking_batched"):
        if s.k:
            note += f" k={s.k}"
        else:
            found = stats.sample_k()
            if found is None:
                note += f" k=? (chosen on a sample of {s.sample_size} left rows when the job runs)"
            else:
                k, recall = found
                estimates["blocking"] = _estimate(_blocking_calls(sampled, n_left, n_right, k), per_check)
                estimates["blocking_batched"] = blocking_batched(k)
                note += f" k={k} (sample of {sampled} left rows: recall {recall:.2f}, target {s.target_recall})"
    if chosen is None:
        why = (f"the compared property is proposed by {steps.model} when the job runs" if s.propose else
               "rows unknown before the run")
        line = f"SemJoin plan=auto (chosen when the job runs: {why})"
        others = estimates.items()
    else:
        line = f"SemJoin plan={chosen}{note} {_fmt(estimates[chosen])}"
        if s.plan != "auto":
            line += f" (plan={s.plan!r} given)"
        others = [(n, e) for n, e in estimates.items() if n != chosen]
    shown = [f"{name}: {_fmt(e)}" + (f" (not considered: {skipped[name]})" if name in skipped else "")
             for name, e in others]
    if shown:
        line += " | " + " | ".join(shown)
    return (chosen, line, estimates) if with_estimates else (chosen, line)


def _list(values) -> list | None:
    return None if values is None else list(values)


def _sum(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _mul(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a * b


def _blocking_calls(sampled, n_left, n_right, k) -> int | None:
    if None in (sampled, n_left, n_right, k):
        return None
    return sampled * n_right + (n_left - sampled) * k


def _pair_rows(s: Any, a: list[dict] | None, b: list[dict] | None) -> list[tuple]:
    """The message parts of up to 8 pairs (first rows of each side), for estimating a check's tokens."""
    if not a or not b:
        return []
    return [tuple(p if isinstance(p, str) else (x if p[0] == "left" else b[i % len(b)])[p[1]] for p in s.pair_parts)
            for i, x in enumerate(a)]


def _batch_rows(s: Any, a: list[dict] | None, b: list[dict] | None) -> list[tuple]:
    """The batched check's message parts for up to 8 left rows, each with right's first chunk."""
    if not a or not b:
        return []
    numbered = "\n".join(f"{i + 1}. {side_text(s.right_columns, r)}" for i, r in enumerate(b[:s.pairs_per_request]))
    return [tuple(p if isinstance(p, str) else (numbered if p[0] == "candidates" else r[p[1]]) for p in s.batch_parts)
            for r in a]


def _side_rows(s: Any, rows: list[dict] | None) -> list[tuple]:
    out = []
    names = s.left_columns
    for r in rows or []:
        if len(names) == 1:
            out.append((r[names[0]],))
        else:
            parts: list = []
            for i, c in enumerate(names):
                parts += [("\n" if i else "") + f"{c}: ", r[c]]
            out.append(tuple(parts))
    return out


def _per_call(expr: Expression, rows: list[tuple]) -> dict:
    """Input tokens and dollars of one call of ``expr``'s AI call, averaged over ``rows`` (None where unknown)."""
    from inferframe.ai.requests import estimate_call

    node = expr._node
    while ai_call_of(node) is None and node.children():  # e.g. the short answer's .str.lower(): its first argument
        node = node.children()[0]
    priced = ai_call_of(node).udf.call.priced()
    if not rows or not priced:
        return {"tokens": 0 if not priced else None, "cost": 0.0 if not priced else None}
    est = estimate_call(priced[0][0], rows)
    n = est.get("rows") or len(rows)
    cost = est.get("cost_usd")
    return {"tokens": (est.get("input_tokens") or 0) / n, "cost": None if cost is None else cost / n}


def _estimate(calls: int | None, per: dict) -> dict:
    tokens = None if per["tokens"] is None or calls is None else round(calls * per["tokens"])
    cost = None if per["cost"] is None or calls is None else calls * per["cost"]
    return {"calls": calls, "tokens": tokens, "cost": cost}


def _add(a: dict, b: dict) -> dict:
    return {key: None if a[key] is None or b[key] is None else a[key] + b[key] for key in a}


def _fmt(e: dict) -> str:
    calls = "?" if e["calls"] is None else str(e["calls"])
    tokens = "?" if e["tokens"] is None else str(e["tokens"])
    cost = "?" if e["cost"] is None else f"${e['cost']:.4f}"
    return f"est_calls={calls} est_tokens={tokens} est_cost={cost}"


def _not_considered(estimates: dict, pairs: int | None, max_nested_pairs: int) -> dict[str, str]:
    """The plans "auto" leaves out, each with the reason explain() shows.

    The all-pairs plans only within ``max_nested_pairs``; the batched ones only where there is no
    property to project on: asking one property per row gives a consistent labelling, and a
    numbered-list answer asks more of a model.
    """
    out = {}
    for name in estimates:
        if name in ("nested", "batched") and pairs is not None and pairs > max_nested_pairs:
            out[name] = f"{pairs} pairs > max_nested_pairs={max_nested_pairs}"
        elif "batched" in name and "projection" in estimates:
            out[name] = "a property to project on"
    return out


def _choose(estimates: dict, skipped: dict) -> str:
    """The cheapest plan not ``skipped``: by dollars where every price is known and some is not zero, else by calls
    (ties: the earlier of projection, nested, batched, blocking, blocking_batched)."""
    names = [n for n in ("projection", "nested", "batched", "blocking", "blocking_batched")
             if n in estimates and n not in skipped]
    costs = [estimates[n]["cost"] for n in names]
    if all(c is not None for c in costs) and any(costs):
        return min(names, key=lambda n: estimates[n]["cost"])
    return min(names, key=lambda n: estimates[n]["calls"])
