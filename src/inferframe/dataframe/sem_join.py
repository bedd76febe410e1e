"""``sem_join`` and ``sem_sim_join``: joins whose condition a model (or an embedding) decides, built from lazy plan steps.

``sem_join`` chooses one of these plans by its estimated model calls and cost, unless ``plan=`` names one:

| plan | what runs | model calls |
|---|---|---|
| ``projection`` | each side's property once per row (``classify_text``), then a hash join on it | rows(left) + rows(right) |
| ``blocking`` | MiniLM embeddings, the ``k`` nearest right rows per left row, a yes/no check per candidate | sample + rows(left) * k |
| ``nested`` | every pair, a yes/no check each (only for small inputs) | rows(left) * rows(right) |
| ``batched`` | every pair, ``pairs_per_request`` right rows per request: which numbered ones satisfy it (JSON schema) | rows(left) * ceil(rows(right) / pairs_per_request) |
| ``blocking_batched`` | blocking's ``k`` candidates per left row, asked ``pairs_per_request`` per request as in ``batched`` | sample + rows(left) * ceil(k / pairs_per_request) |

"auto" considers ``nested`` and ``batched`` up to ``max_nested_pairs`` pairs, and the batched plans only
where there is no property (given or detected) to project on.

Without ``on_property``, a predicate that compares one property of each side ("express the same sentiment
about the film", "have the same author as", "are both positive or both negative", "agree on price", "differ in
tone", "opposite sentiment"; the rules of ``inferframe.ai.join_properties``) enables the projection plan as if
``on_property`` had been given; "different" needs ``property_values`` (given, or named by the phrase), "opposite"
two of them. explain() says ``(detected)``. Where no rule matches and ``propose_property=True`` (default: when the
model is not the embedded one), one model call proposes the property (``functions.sem_join.propose_split``).

The batched plans ask in rounds (``functions.sem_join_batches``): a request holds what its output budget
fits, and a cut-off answer is split and asked again. In every plan, calls that fail in the end give one
``SemanticFailuresWarning`` (``functions.sem_join_guard``); past half of them (at least 10 calls) the job stops
with a ``ServiceError``.

Every plan is composed of the ordinary lazy operators (``with_column``, ``join``, ``explode``,
``nearest``, ``where``, ``groupby``), so it runs on the local and the Ray runner alike. The chosen plan and the
estimates of all of them show in ``df.explain()`` as one ``SemJoin ...`` line.

Example:
    >>> import inferframe as ifr
    >>> a = ifr.from_pydict({"review": ["great", "awful"]})
    >>> j = sem_join(a, a, "{review:left} and {review:right} agree", model="gemma-3-270m", plan="nested")
    >>> j.column_names
    ['review', 'right.review']
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pyarrow as pa

from inferframe.ai.join_properties import Split, split_text
from inferframe.errors import PlanError
from inferframe.expressions.expression import col, lit
from inferframe.expressions.nodes import column_not_found
from inferframe.functions.embed import embed_text
from inferframe.functions.general import concat, when
from inferframe.functions.sem_join import (batch_check, batch_parts, number_candidates, pair_check, property_key,
                                           propose_split, side_message, side_property)
from inferframe.functions.sem_join_batches import Failures, ask_in_batches, expected_calls, fit_pairs
from inferframe.functions.sem_join_guard import guarded
from inferframe.functions.templates import Field, Template, parse_template
from inferframe.plan import logical as lp
from inferframe.plan.annotate import Annotate
from inferframe.plan.whole_table import WholeTable

PLANS = ("auto", "projection", "blocking", "nested", "batched", "blocking_batched")
RELATIONS = ("equal", "different")
DEFAULT_K = 10  # the k a blocking plan is estimated with before its sample has chosen one
KEY, ONE, CHECK = "__sem_join_key", "__sem_join_one", "__sem_join_check"
LVEC, RVEC, SCORE, RANK = "__sem_join_lvec", "__sem_join_rvec", "__sem_join_score", "__sem_join_rank"
ROW, RROW = "__sem_join_row", "__sem_join_rrow"
CANDIDATES = "__sem_join_candidates"
DEFAULT_PAIRS_PER_REQUEST = 8

def sem_join(left: Any, right: Any, predicate: str, *, on_property: str | None = None,
             property_values: list[str] | None = None, relation: str = "equal", plan: str = "auto",
             k: int | None = None, target_recall: float = 0.9, sample_size: int = 8, max_nested_pairs: int = 1024,
             property_examples: Any = None, instructions: str | None = None, embed_options: dict | None = None,
             prefix: str = "right.", seed: int = 0, pairs_per_request: int = DEFAULT_PAIRS_PER_REQUEST,
             propose_property: bool | None = None, **options: Any) -> Any:
    """The pairs of ``left`` and ``right`` rows for which the model says ``predicate`` holds.

    Parameters:
        left, right: the DataFrames.
        predicate: a template reading both sides, e.g. ``"{review:left} and {review:right} express the same sentiment"``.
        on_property: the predicate compares this property of each side (e.g. "sentiment"): enables the
            projection plan (each row's property asked once, then a hash join). Without it, a predicate
            ending in "the same <property>" / "different <property>" names it (see ``detect_property``).
        property_values: the property's values (e.g. ["positive", "negative"]): each row is classified
            into one (label scoring or constrained generation); without them the model answers a short string.
        relation: "equal" (the properties are equal) or "different" (needs ``property_values``).
        plan: "auto" (cheapest by estimate), "projection", "blocking", "nested", "batched" or "blocking_batched".
        k: candidates per left row for "blocking" (default: chosen on a sample to reach ``target_recall``).
        target_recall: the share of each sampled left row's matches (all its pairs checked by the model)
            that its k nearest candidates must hold; k is the largest any sampled row needs.
        sample_size: left rows whose pairs are all checked to choose k (this runs when sem_join() is
            called; those answers are cached, so the join does not pay for them twice).
        max_nested_pairs: "auto" considers the nested loop (and the batched one) only up to this many pairs.
        property_examples: (text, value) pairs shown as demonstrations for the property.
        instructions: the system message of the pair check (or of the property, with ``on_property``).
        embed_options: ``embed_text`` options for blocking (default: packaged MiniLM, in process).
        prefix: put before right column names that clash with left ones, as in ``join``.
        seed: the sample's seed.
        pairs_per_request: right rows per request in the "batched" plans (default 8, lowered to what the
            answer's ``max_tokens`` holds); the model answers the numbers of those that satisfy the predicate.
            A cut-off or unparseable answer is split in two and asked again, down to single pairs. The
            batched plans read the right side when sem_join() is called (its rows are numbered).
        propose_property: where no rule finds the compared property, ask the model once (when sem_join() is
            called) to name it; None (default): only where the model is not the embedded one.
        **options: ``classify_text``'s options for every model call (provider, model, method, on_error, ...).

    Returns left's columns, then right's. A pair whose check failed (or a row whose property failed) is
    left out and counted in ``last_run()``'s errors for ``sem_join.check`` (``sem_join.property``,
    ``sem_join.batch``); the join warns once (``SemanticFailuresWarning``) with the count, and stops with a
    ``ServiceError`` when more than half of at least 10 calls failed. With ``on_error="raise"``
    the first failure stops the job.

    Example:
        >>> import inferframe as ifr
        >>> a = ifr.from_pydict({"review": ["great", "awful"]})
        >>> j = sem_join(a, a, "{review:left} and {review:right} agree", on_property="sentiment",
        ...              property_values=["positive", "negative"], model="gemma-3-270m")
        >>> "SemJoin plan=projection" in j.explain(show_all=False)  # doctest: +ELLIPSIS
        == Logical plan ==
        ...
        True
    """
    template = parse_template(predicate, "sem_join", sides=True)
    detected, how = None, "detected"
    if on_property is None and plan in ("auto", "projection"):
        rule = split_text(_literal(template))
        if rule is None and _proposing(propose_property, template, options):
            # No rule reads it: a capable model names the property in one call (made now, cached).
            proposed = propose_split(left, _statement(template), **options)
            rule = None if proposed is None else Split(*proposed)
            how = f"proposed by {_model_of(template, options)}"
        found = _split(rule, property_values, relation)
        if found is not None:
            on_property, property_values, relation = found
            detected = on_property
    _check_arguments(left, right, template, on_property, property_values, relation, plan, k, target_recall,
                     sample_size, max_nested_pairs, pairs_per_request)
    # A detected property leaves ``instructions`` to the pair check (the user wrote them for it).
    given_property = on_property is not None and detected is None
    n_left, n_right = left.count_rows(), right.count_rows()
    right_names = _right_names(left, right, prefix)
    column_of = {**{f"{c}:left": c for c in left.column_names},
                 **{f"{c}:right": r for c, r in zip(right.column_names, right_names)}}
    check_instructions = None if given_property else instructions
    check = pair_check(template, column_of, instructions=check_instructions, **options)
    per_check = _per_call(check, _pair_rows(left, right, template))
    estimates: dict[str, dict] = {}
    if on_property is not None:
        per_prop = _per_call(side_property(template, "left", on_property, property_values, **options),
                             _side_rows(left, template, "left"))
        estimates["projection"] = _estimate(n_left + n_right, per_prop)
    k_est = k or min(n_right, DEFAULT_K)
    sampled = 0 if k else min(sample_size, n_left)
    estimates["blocking"] = _estimate(sampled * n_right + (n_left - sampled) * k_est, per_check)
    estimates["nested"] = _estimate(n_left * n_right, per_check)
    batch = batch_check(template, CANDIDATES, pairs_per_request, instructions=check_instructions, raw=True, **options)
    asked_pairs, pairs_per_request = pairs_per_request, fit_pairs(pairs_per_request, _max_tokens(batch))
    if pairs_per_request != asked_pairs:
        batch = batch_check(template, CANDIDATES, pairs_per_request, instructions=check_instructions, raw=True,
                            **options)
    per_batch = _per_call(batch, _batch_rows(left, right, template, pairs_per_request))
    estimates["batched"] = _estimate(n_left * math.ceil(n_right / pairs_per_request), per_batch)
    # The sample's pair checks, then every left row's candidates in batches (other prompts: not cached).
    blocking_batched = lambda k_: _add(_estimate(sampled * n_right, per_check),  # noqa: E731
                                       _estimate(n_left * math.ceil(k_ / pairs_per_request), per_batch))
    estimates["blocking_batched"] = blocking_batched(k_est)
    skipped = _not_considered(estimates, n_left * n_right, max_nested_pairs)
    chosen = plan if plan != "auto" else _choose(estimates, skipped)
    note = f" on_property={detected} ({how})" if detected else ""
    fitted = f" pairs_per_request={pairs_per_request}" + (
        f" (of {asked_pairs}: what max_tokens={_max_tokens(batch)} holds)" if pairs_per_request != asked_pairs else "")
    if chosen == "projection":
        out = _projection(left, right, template, on_property, property_values, relation, prefix,
                          dict(options, instructions=None if detected else instructions, examples=property_examples))
    elif chosen == "nested":
        out = _checked(_cross(left, right, prefix), template, column_of, check_instructions, options, left,
                       right_names)
    elif chosen == "batched":
        note += fitted
        out = _batched(left, right, template, check_instructions, options, prefix, pairs_per_request, right_names)
    else:
        if chosen == "blocking_batched":
            note += fitted
        embed_options = dict(embed_options or {})
        if not k:
            k, recall = _choose_k(left, right, template, column_of, check_instructions, options, embed_options,
                                  prefix, target_recall, sample_size, seed, n_right)
            estimates["blocking"] = _estimate(sampled * n_right + (n_left - sampled) * k, per_check)
            estimates["blocking_batched"] = blocking_batched(k)
            note += f" k={k} (sample of {sampled} left rows: recall {recall:.2f}, target {target_recall})"
        else:
            note += f" k={k}"
        if chosen == "blocking":
            pairs = _blocked(left, right, template, prefix, k, embed_options)
            out = _checked(pairs, template, column_of, check_instructions, options, left, right_names)
        else:
            out = _batched(left, right, template, check_instructions, options, prefix, pairs_per_request,
                           right_names, k=k, embed_options=embed_options)
    line = f"SemJoin plan={chosen}{note} {_fmt(estimates[chosen])}"
    if plan != "auto":
        line += f" (plan={plan!r} given)"
    others = [f"{name}: {_fmt(e)}" + (f" (not considered: {skipped[name]})" if name in skipped else "")
              for name, e in estimates.items() if name != chosen]
    if others:
        line += " | " + " | ".join(others)
    return type(left)(Annotate(out._plan, line))


def detect_property(template: Template) -> tuple[str, str] | None:
    """The compared property and relation ("equal", "different", "opposite") a predicate states, by the rules of
    ``inferframe.ai.join_properties`` over its literal text (fields read "{}").

    Example:
        >>> t = lambda s: parse_template(s, "sem_join", sides=True)
        >>> detect_property(t("{review:left} and {review:right} express the same sentiment"))
        ('sentiment', 'equal')
        >>> detect_property(t("{p:left} and {p:right} are about different products."))
        ('product', 'different')
        >>> detect_property(t("{a:left} is cheaper than {a:right}")) is None
        True
    """
    found = split_text(_literal(template))
    return None if found is None else (found.asked, found.relation)


def _literal(template: Template) -> str:
    return "".join("{}" if isinstance(p, Field) else p for p in template.parts)


def _statement(template: Template) -> str:
    """The predicate with its sides' fields written "A" and "B" (for the model that proposes a property)."""
    return "".join(("A" if p.side == "left" else "B") if isinstance(p, Field) else p for p in template.parts)


def _proposing(propose: bool | None, template: Template, options: dict) -> bool:
    """Whether to ask the model for the property: ``propose_property``, else (None) where the model is not the
    embedded one (Gemma 3 270M names no property reliably)."""
    if propose is not None:
        return bool(propose)
    from inferframe.plan.ai_nodes import ai_call_of

    node = pair_check(template, None, **options)._node
    while ai_call_of(node) is None and node.children():
        node = node.children()[0]
    ref = ai_call_of(node).udf.call.model
    return not (ref.caps.local and ref.model == ref.caps.default_model)  # the embedded model: a local provider's default


def _split(found: Split | None, values: list[str] | None, relation: str) -> tuple[str, list | None, str] | None:
    """(on_property, property_values, relation) for the projection plan where the predicate compares a property.

    "equal" keeps the user's ``relation`` "equal"; "different" needs values (the user's or the phrase's);
    "opposite" is "different" between exactly two values.
    """
    if found is None:
        return None
    values = list(values) if values is not None else (list(found.values) if found.values else None)
    if found.relation == "equal":
        return (found.asked, values, "equal") if relation == "equal" else None
    if values is None or (found.relation == "opposite" and len(values) != 2):
        return None
    return found.asked, values, "different"


def sem_sim_join(left: Any, right: Any, on: str, *, other_on: str | None = None, k: int = 5,
                 metric: str = "cosine", score_column: str = "score", rank_column: str = "rank",
                 prefix: str = "right.", embed_options: dict | None = None) -> Any:
    """For every left row, the ``k`` most similar right rows: by their texts' embeddings, or by vectors already there.

    Parameters:
        left, right: the DataFrames.
        on: left's text column (embedded with ``embed_text``) or vector column (used as is).
        other_on: right's column (default: ``on``).
        k, metric, score_column, rank_column, prefix: as in ``DataFrame.nearest``.
        embed_options: ``embed_text`` options (default: packaged MiniLM, in process).

    Returns left's columns, right's, then the score and rank: one row per match. No language model is asked.

    Example:
        >>> import inferframe as ifr
        >>> q = ifr.from_pydict({"q": ["a red apple"]})
        >>> docs = ifr.from_pydict({"doc": ["a green car", "a ripe red apple"]})
        >>> sem_sim_join(q, docs, on="q", other_on="doc", k=1).select("q", "doc", "rank").to_pydict()
        {'q': ['a red apple'], 'doc': ['a ripe red apple'], 'rank': [1]}
    """
    other_on = other_on or on
    for df, name, side in ((left, on, "left"), (right, other_on, "right")):
        if not isinstance(name, str):
            raise PlanError(f"sem_sim_join(): on=/other_on= take a column name, got {name!r}.")
        if name not in df.column_names:
            raise column_not_found(name, pa.schema(df))
    lt, rt = pa.schema(left).field(on).type, pa.schema(right).field(other_on).type
    if _is_text(lt) and _is_text(rt):
        opts = dict(embed_options or {})
        lv = left.with_column(LVEC, embed_text(col(on), **opts)).select(*left.column_names, LVEC)
        rv = right.with_column(RVEC, embed_text(col(other_on), **opts)).select(*right.column_names, RVEC)
        out = lv.nearest(rv, on=LVEC, other_on=RVEC, k=k, metric=metric, score_column=score_column,
                         rank_column=rank_column, prefix=prefix)
        return out.exclude(LVEC, RVEC)
    if _is_text(lt) or _is_text(rt):
        raise PlanError(f"sem_sim_join(): {on!r} is {lt} and {other_on!r} is {rt}; give two text columns (embedded "
                        "here) or two vector columns.")
    return left.nearest(right, on=on, other_on=other_on, k=k, metric=metric, score_column=score_column,
                        rank_column=rank_column, prefix=prefix)


# --- checks ------------------------------------------------------------------------------------------------------
def _check_arguments(left, right, template: Template, on_property, values, relation, plan, k, target_recall,
                     sample_size, max_nested_pairs, pairs_per_request) -> None:
    if not hasattr(right, "column_names") or not hasattr(right, "nearest"):
        raise PlanError(f"sem_join() joins with another DataFrame, got {type(right).__name__}.")
    for df, side in ((left, "left"), (right, "right")):
        for c in template.columns(side):
            if c not in df.column_names:
                raise column_not_found(c, pa.schema(df))
    if plan not in PLANS:
        raise PlanError(f"sem_join(): plan={plan!r} is not one of {', '.join(map(repr, PLANS))}.")
    if relation not in RELATIONS:
        raise PlanError(f"sem_join(): relation={relation!r} is not 'equal' or 'different'.")
    if on_property is not None and (not isinstance(on_property, str) or not on_property.strip()):
        raise PlanError(f"sem_join(): on_property names the compared property, e.g. 'sentiment'; got {on_property!r}.")
    if values is not None:
        if (not isinstance(values, (list, tuple)) or len(values) < 2 or len(set(values)) != len(values)
                or not all(isinstance(v, str) and v for v in values)):
            raise PlanError(f"sem_join(): property_values needs at least two distinct strings, got {values!r}.")
        if on_property is None:
            raise PlanError("sem_join(): property_values= needs on_property=..., e.g. on_property='sentiment'.")
    if plan == "projection" and on_property is None:
        raise PlanError("sem_join(plan='projection') compares a property of each side: pass on_property=..., "
                        "e.g. on_property='sentiment', property_values=['positive', 'negative'].")
    if relation == "different" and values is None:
        raise PlanError("sem_join(relation='different') needs property_values=[...] (the property's possible values).")
    if relation == "different" and on_property is None:
        raise PlanError("sem_join(relation='different') compares a property: pass on_property=... and property_values=[...].")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise PlanError(f"sem_join(): k must be a whole number >= 1, got {k!r}.")
    if isinstance(target_recall, bool) or not isinstance(target_recall, (int, float)) or not 0 < target_recall <= 1:
        raise PlanError(f"sem_join(): target_recall must be in (0, 1], got {target_recall!r}.")
    for name, v in (("sample_size", sample_size), ("max_nested_pairs", max_nested_pairs),
                    ("pairs_per_request", pairs_per_request)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise PlanError(f"sem_join(): {name} must be a whole number >= 1, got {v!r}.")


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or (
        pa.types.is_dictionary(t) and pa.types.is_string(t.value_type))


def _right_names(left, right, prefix: str) -> list[str]:
    """Right's column names in the output (``prefix`` before those left has too), as ``join`` and ``nearest`` name them."""
    return [prefix + c if c in left.column_names else c for c in right.column_names]


# --- estimates ---------------------------------------------------------------------------------------------------
def _pair_rows(left, right, template: Template, n: int = 8) -> list[tuple]:
    """The message parts of up to ``n`` pairs (first rows of each side), for estimating a check's tokens."""
    a, b = left.limit(n).to_pylist(), right.limit(n).to_pylist()
    rows = []
    for x, y in ((x, b[i % len(b)]) for i, x in enumerate(a) if b):
        row = {**{f"{c}:left": v for c, v in x.items()}, **{f"{c}:right": v for c, v in y.items()}}
        rows.append(tuple(row[p.key] if hasattr(p, "key") else p for p in template.parts))
    return rows


def _batch_rows(left, right, template: Template, per_request: int, n: int = 8) -> list[tuple]:
    """The message parts of the batched check for up to ``n`` left rows, each with right's first chunk."""
    items = [f"{i + 1}. {_side_value(r, template, 'right')}" for i, r in enumerate(right.limit(per_request).to_pylist())]
    numbered = number_candidates(items) if items else ""
    parts = batch_parts(template)
    return [tuple((numbered if p == Field("candidates") else r[p.column]) if isinstance(p, Field) else p
                  for p in parts) for r in left.limit(n).to_pylist()] if items else []


def _side_value(row: dict, template: Template, side: str) -> str:
    """One side's message as text (as ``side_message`` writes it)."""
    names = template.columns(side)
    if len(names) == 1:
        return str(row[names[0]])
    return "\n".join(f"{c}: {row[c]}" for c in names)


def _side_rows(df, template: Template, side: str, n: int = 8) -> list[tuple]:
    out = []
    names = template.columns(side)
    for r in df.limit(n).to_pylist():
        if len(names) == 1:
            out.append((r[names[0]],))
        else:
            parts: list = []
            for i, c in enumerate(names):
                parts += [("\n" if i else "") + f"{c}: ", r[c]]
            out.append(tuple(parts))
    return out


def _per_call(expr, rows: list[tuple]) -> dict:
    """Input tokens and dollars of one call of ``expr``'s AI call, averaged over ``rows`` (None where unknown)."""
    from inferframe.ai.requests import estimate_call
    from inferframe.plan.ai_nodes import ai_call_of

    node = expr._node
    while ai_call_of(node) is None and node.children():  # e.g. the short answer's .str.lower(): its first argument
        node = node.children()[0]
    call = ai_call_of(node).udf.call
    priced = call.priced()
    if not rows or not priced:
        return {"tokens": 0 if not priced else None, "cost": 0.0 if not priced else None}
    est = estimate_call(priced[0][0], rows)
    n = est.get("rows") or len(rows)
    cost = est.get("cost_usd")
    return {"tokens": (est.get("input_tokens") or 0) / n, "cost": None if cost is None else cost / n}


def _estimate(calls: int, per: dict) -> dict:
    tokens = None if per["tokens"] is None else round(calls * per["tokens"])
    cost = None if per["cost"] is None else calls * per["cost"]
    return {"calls": calls, "tokens": tokens, "cost": cost}


def _add(a: dict, b: dict) -> dict:
    return {key: None if a[key] is None or b[key] is None else a[key] + b[key] for key in a}


def _fmt(e: dict) -> str:
    tokens = "?" if e["tokens"] is None else str(e["tokens"])
    cost = "?" if e["cost"] is None else f"${e['cost']:.4f}"
    return f"est_calls={e['calls']} est_tokens={tokens} est_cost={cost}"


def _not_considered(estimates: dict, pairs: int, max_nested_pairs: int) -> dict[str, str]:
    """The plans "auto" leaves out, each with the reason explain() shows.

    The all-pairs plans only within ``max_nested_pairs``; the batched ones only where there is no
    property to project on: asking one property per row gives a consistent labelling, and a
    numbered-list answer asks more of a model.
    """
    out = {}
    for name in estimates:
        if name in ("nested", "batched") and pairs > max_nested_pairs:
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


def _max_tokens(expr) -> int | None:
    """The output cap an AI call's requests carry (the user's, or the provider's default for its schema)."""
    from inferframe.plan.ai_nodes import ai_call_of

    node = expr._node
    while ai_call_of(node) is None and node.children():
        node = node.children()[0]
    options = dict(ai_call_of(node).udf.call.config.options)
    return next((options[k] for k in ("max_tokens", "max_output_tokens", "max_completion_tokens") if k in options),
                None)


# --- plans -------------------------------------------------------------------------------------------------------
def _projection(left, right, template: Template, prop: str, values, relation: str, prefix: str, options: dict):
    """Each side's property as a key column, then a hash join on it (equality, or "different" through explode)."""
    sides = []
    shared = {"failures": Failures("sem_join"), "done": 0, "parts": 2}  # both sides' failures: one warning
    for df, side in ((left, "left"), (right, "right")):
        asked = df.with_column(KEY, side_property(template, side, prop, values, raw=True, **options))
        if KEY + "_error" in asked.column_names:
            asked = guarded(asked.select(*df.column_names, KEY, KEY + "_error"), KEY, df.column_names,
                             "sem_join.property", shared)
        sides.append(asked.with_column(KEY, property_key(col(KEY), values)).select(*df.column_names, KEY))
    lk, rk = sides
    if relation == "different":
        # Each left row's key becomes the list of the other values; one row per value, then equality.
        others = {v: [w for w in values if w != v] for v in values}
        expr = lit(others[values[-1]])
        for v in reversed(values[:-1]):
            expr = when(col(KEY) == lit(v), lit(others[v]), expr)
        lk = lk.with_column(KEY, expr).explode(KEY)
    return lk.join(rk, on=KEY, prefix=prefix).exclude(KEY)


def _cross(left, right, prefix: str):
    """Every pair of rows: a hash join on a constant key."""
    return (left.with_column(ONE, lit(1)).join(right.with_column(ONE, lit(1)), on=ONE, prefix=prefix)
            .exclude(ONE))


def _batched(left, right, template: Template, instructions, options: dict, prefix: str, per_request: int,
             right_names: list[str], k: int | None = None, embed_options: dict | None = None):
    """Each left row's candidates (every right row, or with ``k`` blocking's ``k`` nearest), ``per_request`` numbered
    ones per request, asked in rounds (``ask_in_batches``); the pairs it finds joined back to right's rows.

    Right's rows are read now and numbered (``RROW``). The asking is a ``WholeTable`` over left: it runs when
    a job first reaches it, once.
    """
    table = right.to_arrow()
    table = table.append_column(RROW, pa.array(np.arange(table.num_rows), pa.int64()))
    rows = type(right)(lp.Source(lp.InMemory(table), table.schema))
    texts = [_side_value(r, template, "right") for r in table.select(template.columns("right")).to_pylist()]
    opts = dict(options, instructions=instructions)
    label = f"sem_join.batch[{_model_of(template, opts)}]"
    schema = pa.schema([*pa.schema(left), pa.field(RROW, pa.int64())])

    def compute(source):
        lt = source.to_arrow()
        if k is None:
            candidates = [list(range(table.num_rows))] * lt.num_rows
        else:
            candidates = _nearest_ids(source, lt, rows, template, prefix, k, embed_options or {})
        found, stats = ask_in_batches(source, lt, candidates, texts, template, per_request, opts, label)
        out = lt.take(pa.array([i for i, _ in found], pa.int64()))
        return out.append_column(RROW, pa.array([r for _, r in found], pa.int64())), stats

    n_cand = table.num_rows if k is None else min(k, table.num_rows)
    calls = expected_calls(lambda n: None if n is None else n * math.ceil(n_cand / per_request))
    what = "every right row" if k is None else f"its {k} nearest right rows"
    found = type(left)(WholeTable(left._plan, schema, f"SemJoinBatches {label} per_request={per_request} "
                                  f"candidates={what}", compute, calls))
    return found.join(rows, on=RROW, prefix=prefix).select(*left.column_names, *right_names)


def _nearest_ids(source, lt: pa.Table, rows, template: Template, prefix: str, k: int, embed_options: dict):
    """Each left row's ``k`` nearest right rows (their ``RROW``), nearest first."""
    numbered = lt.append_column(ROW, pa.array(np.arange(lt.num_rows), pa.int64()))
    df = type(source)(lp.Source(lp.InMemory(numbered), numbered.schema))
    near = _blocked(df, rows, template, prefix, k, embed_options).select(ROW, RROW, RANK).to_pydict()
    out: list[list[tuple[int, int]]] = [[] for _ in range(lt.num_rows)]
    for row, rrow, rank in zip(near[ROW], near[RROW], near[RANK]):
        out[row].append((rank, rrow))
    return [[r for _, r in sorted(c)] for c in out]


def _model_of(template: Template, options: dict) -> str:
    """The model name the pair check resolves to (for the batched check's label)."""
    from inferframe.plan.ai_nodes import ai_call_of

    node = pair_check(template, None, **{k: v for k, v in options.items() if k != "instructions"})._node
    while ai_call_of(node) is None and node.children():
        node = node.children()[0]
    return ai_call_of(node).udf.call.config.model


def _side_text(template: Template, side: str):
    parts = side_message(template, side)
    return parts[0] if len(parts) == 1 else concat(*parts)


def _blocked(left, right, template: Template, prefix: str, k: int, embed_options: dict):
    """The ``k`` right rows nearest to each left row by their sides' texts' embeddings (score and rank kept)."""
    lv = left.with_column(LVEC, embed_text(_side_text(template, "left"), **embed_options)).select(*left.column_names, LVEC)
    rv = right.with_column(RVEC, embed_text(_side_text(template, "right"), **embed_options)).select(*right.column_names, RVEC)
    return lv.nearest(rv, on=LVEC, other_on=RVEC, k=k, score_column=SCORE, rank_column=RANK, prefix=prefix)


def _checked(pairs, template: Template, column_of: dict, instructions, options: dict, left, right_names: list[str],
             keep: tuple = (), guard: bool = True):
    """The pairs the model says yes to, with left's and right's columns (and ``keep``).

    With ``guard``, the checks run as one job that a ``WholeTable`` collects and counts: failed checks give one
    ``SemanticFailuresWarning``, and more than half of them (of at least 10) a ``ServiceError``.
    """
    checked = pairs.with_column(CHECK, pair_check(template, column_of, instructions=instructions, **options))
    names = [*left.column_names, *right_names, *keep]
    if not guard:
        return checked.where(col(CHECK) == lit("yes")).select(*names)
    if CHECK + "_error" not in checked.column_names:  # error_column=False: nothing to count
        return checked.where(col(CHECK) == lit("yes")).select(*names)
    return guarded(checked.select(*names, CHECK, CHECK + "_error"), CHECK, names, "sem_join.check").where(
        col(CHECK) == lit("yes")).select(*names)


def _choose_k(left, right, template, column_of, instructions, options, embed_options, prefix, target_recall,
              sample_size, seed, n_right) -> tuple[int, float]:
    """The k whose nearest candidates hold ``target_recall`` of every sampled row's matches (all its pairs checked).

    Each sampled left row with a match needs some k to reach the target on its own pairs; the
    largest of these is taken, so that rows outside the sample (which vary as much) reach it too.
    Returns k and the share of all the sample's matches within it.
    """
    table = left.to_arrow()
    rng = np.random.default_rng(seed)
    take = np.sort(rng.choice(table.num_rows, size=min(sample_size, table.num_rows), replace=False))
    rows = table.take(pa.array(take))
    rows = rows.append_column(ROW, pa.array(np.arange(rows.num_rows), pa.int64()))
    sample = type(left)(lp.Source(lp.InMemory(rows), rows.schema))
    ranked = _blocked(sample, right, template, prefix, max(n_right, 1), embed_options)
    right_names = _right_names(sample, right, prefix)
    found = _checked(ranked, template, column_of, instructions, options, sample, right_names,
                     keep=(RANK,), guard=False).to_pydict()
    if not found[RANK]:
        warnings.warn(f"sem_join(): the model found no match among the {len(take)} sampled left rows' pairs; "
                      f"blocking uses k={min(n_right, DEFAULT_K)}. Pass k=... or a larger sample_size=.",
                      stacklevel=3)
        return max(1, min(n_right, DEFAULT_K)), 0.0
    per_row: dict[int, list[int]] = {}
    for row, rank in zip(found[ROW], found[RANK]):
        per_row.setdefault(row, []).append(rank)
    k = max(sorted(r)[max(0, math.ceil(target_recall * len(r)) - 1)] for r in per_row.values())
    ranks = found[RANK]
    return int(k), sum(r <= k for r in ranks) / len(ranks)
