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

Without ``on_property``, a predicate ending in "the same <property>" / "different <property>" /
"differ in <property>" (``SPLIT_PATTERN`` over the template's literal text, e.g. "{r:left} and {r:right}
express the same sentiment") enables the projection plan as if ``on_property`` had been given; "different"
only with ``property_values`` (and then ``relation="different"``). explain() says ``(detected)``.

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
import re
import warnings
from typing import Any

import numpy as np
import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.expression import col, lit
from inferframe.expressions.nodes import column_not_found
from inferframe.functions.embed import embed_text
from inferframe.functions.general import concat, when
from inferframe.functions.sem_join import (batch_check, batch_parts, number_candidates, pair_check, side_message,
                                           side_property)
from inferframe.functions.templates import Field, Template, parse_template
from inferframe.plan import logical as lp
from inferframe.plan.annotate import Annotate

PLANS = ("auto", "projection", "blocking", "nested", "batched", "blocking_batched")
RELATIONS = ("equal", "different")
DEFAULT_K = 10  # the k a blocking plan is estimated with before its sample has chosen one
KEY, ONE, CHECK = "__sem_join_key", "__sem_join_one", "__sem_join_check"
LVEC, RVEC, SCORE, RANK = "__sem_join_lvec", "__sem_join_rvec", "__sem_join_score", "__sem_join_rank"
ROW = "__sem_join_row"
CHUNK, ITEM, CANDIDATES, MATCHES = "__sem_join_chunk", "__sem_join_item", "__sem_join_candidates", "__sem_join_matches"
DEFAULT_PAIRS_PER_REQUEST = 8
# "... the same sentiment", "... have different topics", "... differ in tone": one or two words after
# "same" / "different" / "differ in" (their), at the end of the template's literal text (fields read "{}").
SPLIT_PATTERN = re.compile(r"\b(same|different|differs?\s+in(?:\s+their)?)\s+([a-z][a-z-]*(?:\s+[a-z][a-z-]*)?)"
                           r"\s*[.!?]?\s*$", re.IGNORECASE)


def sem_join(left: Any, right: Any, predicate: str, *, on_property: str | None = None,
             property_values: list[str] | None = None, relation: str = "equal", plan: str = "auto",
             k: int | None = None, target_recall: float = 0.9, sample_size: int = 8, max_nested_pairs: int = 1024,
             property_examples: Any = None, instructions: str | None = None, embed_options: dict | None = None,
             prefix: str = "right.", seed: int = 0, pairs_per_request: int = DEFAULT_PAIRS_PER_REQUEST,
             **options: Any) -> Any:
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
        pairs_per_request: right rows per request in the "batched" plans (default 8); the model answers
            the numbers of those that satisfy the predicate. "batched" reads the right side when sem_join()
            is called (its rows are numbered), "blocking_batched" the left side.
        **options: ``classify_text``'s options for every model call (provider, model, method, on_error, ...).

    Returns left's columns, then right's. A pair whose check failed (or a row whose property failed) is
    left out and counted in ``last_run()``'s errors for ``sem_join.check`` (``sem_join.property``);
    with ``on_error="raise"`` it stops the job.

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
    detected = None
    if on_property is None and plan in ("auto", "projection"):
        found = detect_property(template)
        if found and (found[1] == "equal" and relation == "equal" or found[1] == "different"
                      and property_values is not None):
            detected, relation = found
            on_property = detected
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
    per_batch = _per_call(batch_check(template, CANDIDATES, pairs_per_request, instructions=check_instructions,
                                      raw=True, **options), _batch_rows(left, right, template, pairs_per_request))
    estimates["batched"] = _estimate(n_left * math.ceil(n_right / pairs_per_request), per_batch)
    # The sample's pair checks, then every left row's candidates in batches (other prompts: not cached).
    blocking_batched = lambda k_: _add(_estimate(sampled * n_right, per_check),  # noqa: E731
                                       _estimate(n_left * math.ceil(k_ / pairs_per_request), per_batch))
    estimates["blocking_batched"] = blocking_batched(k_est)
    chosen = plan if plan != "auto" else _choose(estimates, n_left * n_right <= max_nested_pairs)
    note = f" on_property={detected} (detected)" if detected else ""
    if chosen == "projection":
        out = _projection(left, right, template, on_property, property_values, relation, prefix,
                          dict(options, instructions=None if detected else instructions, examples=property_examples))
    elif chosen == "nested":
        out = _checked(_cross(left, right, prefix), template, column_of, check_instructions, options, left,
                       right_names)
    elif chosen == "batched":
        note += f" pairs_per_request={pairs_per_request}"
        out = _batched(left, right, template, check_instructions, options, prefix, pairs_per_request, right_names)
    else:
        if chosen == "blocking_batched":
            note += f" pairs_per_request={pairs_per_request}"
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
            out = _blocked_batched(left, right, template, column_of, check_instructions, options, prefix, k,
                                   embed_options, pairs_per_request, right_names)
    line = f"SemJoin plan={chosen}{note} {_fmt(estimates[chosen])}"
    others = [f"{name}: {_fmt(e)}" for name, e in estimates.items() if name != chosen]
    if others:
        line += " | " + " | ".join(others)
    return type(left)(Annotate(out._plan, line))


def detect_property(template: Template) -> tuple[str, str] | None:
    """The compared property and relation a predicate states, by ``SPLIT_PATTERN`` over its literal text.

    Returns ``(property, "equal")`` for "... the same <property>", ``(property, "different")`` for
    "... different <property>" / "... differ in <property>", else None (the phrase must end the template).

    Example:
        >>> t = lambda s: parse_template(s, "sem_join", sides=True)
        >>> detect_property(t("{review:left} and {review:right} express the same sentiment"))
        ('sentiment', 'equal')
        >>> detect_property(t("{p:left} and {p:right} are about different products."))
        ('products', 'different')
        >>> detect_property(t("{a:left} is cheaper than {a:right}")) is None
        True
    """
    text = "".join("{}" if isinstance(p, Field) else p for p in template.parts)
    m = SPLIT_PATTERN.search(text)
    if m is None or "{}" in text[m.start():]:
        return None
    return " ".join(m.group(2).lower().split()), "equal" if m.group(1).lower() == "same" else "different"


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


def _choose(estimates: dict, nested_ok: bool) -> str:
    """The cheapest plan: by dollars where every price is known and some is not zero, else by calls (ties: the
    earlier of projection, nested, batched, blocking, blocking_batched); the batched plans only without a property, the all-pairs
    plans only within ``max_nested_pairs``."""
    # The batched check is considered only where there is no property to project on: asking one
    # property per row gives a consistent labelling, and a numbered-list answer asks more of a model.
    names = [n for n in ("projection", "nested", "batched", "blocking", "blocking_batched")
             if n in estimates and (n not in ("nested", "batched") or nested_ok)
             and ("batched" not in n or "projection" not in estimates)]
    costs = [estimates[n]["cost"] for n in names]
    if all(c is not None for c in costs) and any(costs):
        return min(names, key=lambda n: estimates[n]["cost"])
    return min(names, key=lambda n: estimates[n]["calls"])


# --- plans -------------------------------------------------------------------------------------------------------
def _projection(left, right, template: Template, prop: str, values, relation: str, prefix: str, options: dict):
    """Each side's property as a key column, then a hash join on it (equality, or "different" through explode)."""
    sides = []
    for df, side in ((left, "left"), (right, "right")):
        expr = side_property(template, side, prop, values, **options).cast(pa.string())
        sides.append(df.with_column(KEY, expr).select(*df.column_names, KEY))
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
             right_names: list[str]):
    """Each left row with each chunk of ``per_request`` numbered right rows, one request per chunk, the
    numbers it answers exploded back into pairs.

    Right's rows are read now and numbered (``ROW``); chunk c holds rows c*p .. c*p+p-1, numbered 1..p in
    the request, so answer n of chunk c is row c*p + n - 1. A failed request (null answer) adds no pair.
    """
    table = right.to_arrow()
    table = table.append_column(ROW, pa.array(np.arange(table.num_rows), pa.int64()))
    rows = type(right)(lp.Source(lp.InMemory(table), table.schema))
    item = concat((col(ROW) % per_request + 1).cast(pa.string()), lit(". "), *side_message(template, "right"))
    chunks = (rows.with_columns({CHUNK: col(ROW) // per_request, ITEM: item}).groupby(CHUNK)
              .agg(col(ITEM).agg_list().alias(ITEM)))
    chunks = chunks.with_column(CANDIDATES, col(ITEM).apply(number_candidates, pa.string())).select(CHUNK, CANDIDATES)
    pairs = (left.with_column(ONE, lit(1)).join(chunks.with_column(ONE, lit(1)), on=ONE, prefix=prefix)
             .exclude(ONE))
    asked = pairs.with_column(MATCHES, batch_check(template, CANDIDATES, per_request, instructions=instructions,
                                                   **options))
    found = asked.where(col(MATCHES).not_null()).select(*left.column_names, CHUNK, MATCHES).explode(MATCHES)
    found = (found.where(col(MATCHES).not_null())
             .with_column(ROW, col(CHUNK) * per_request + col(MATCHES) - 1)
             .select(*left.column_names, ROW))
    return found.join(rows, on=ROW, prefix=prefix).select(*left.column_names, *right_names)


def _blocked_batched(left, right, template: Template, column_of: dict, instructions, options: dict, prefix: str,
                     k: int, embed_options: dict, per_request: int, right_names: list[str]):
    """Blocking's ``k`` nearest right rows per left row, asked ``per_request`` per request (as ``_batched``).

    Left's rows are read now and numbered (``ROW``); candidate of rank r is number (r-1) % p + 1 of
    chunk (r-1) // p, so answer n of chunk c is rank c*p + n, joined back to the candidate pairs.
    """
    table = left.to_arrow()
    table = table.append_column(ROW, pa.array(np.arange(table.num_rows), pa.int64()))
    rows = type(left)(lp.Source(lp.InMemory(table), table.schema))
    pairs = _blocked(rows, right, template, prefix, k, embed_options).exclude(LVEC, RVEC, SCORE)
    names = template.columns("right")
    text = [col(column_of[f"{names[0]}:right"])] if len(names) == 1 else [
        e for i, c in enumerate(names) for e in (lit(("\n" if i else "") + f"{c}: "), col(column_of[f"{c}:right"]))]
    item = concat(((col(RANK) - 1) % per_request + 1).cast(pa.string()), lit(". "), *text)
    chunks = (pairs.with_columns({CHUNK: (col(RANK) - 1) // per_request, ITEM: item}).groupby(ROW, CHUNK)
              .agg(col(ITEM).agg_list().alias(ITEM)))
    chunks = chunks.with_column(CANDIDATES, col(ITEM).apply(number_candidates, pa.string())).select(ROW, CHUNK,
                                                                                                    CANDIDATES)
    asked = rows.join(chunks, on=ROW, prefix=prefix).with_column(
        MATCHES, batch_check(template, CANDIDATES, per_request, instructions=instructions, **options))
    found = asked.where(col(MATCHES).not_null()).select(ROW, CHUNK, MATCHES).explode(MATCHES)
    found = (found.where(col(MATCHES).not_null())
             .with_column(RANK, col(CHUNK) * per_request + col(MATCHES)).select(ROW, RANK))
    return found.join(pairs, on=[ROW, RANK], prefix=prefix).select(*left.column_names, *right_names)


def _side_text(template: Template, side: str):
    parts = side_message(template, side)
    return parts[0] if len(parts) == 1 else concat(*parts)


def _blocked(left, right, template: Template, prefix: str, k: int, embed_options: dict):
    """The ``k`` right rows nearest to each left row by their sides' texts' embeddings (score and rank kept)."""
    lv = left.with_column(LVEC, embed_text(_side_text(template, "left"), **embed_options)).select(*left.column_names, LVEC)
    rv = right.with_column(RVEC, embed_text(_side_text(template, "right"), **embed_options)).select(*right.column_names, RVEC)
    return lv.nearest(rv, on=LVEC, other_on=RVEC, k=k, score_column=SCORE, rank_column=RANK, prefix=prefix)


def _checked(pairs, template: Template, column_of: dict, instructions, options: dict, left, right_names: list[str],
             keep: tuple = ()):
    """The pairs the model says yes to, with left's and right's columns (and ``keep``)."""
    checked = pairs.with_column(CHECK, pair_check(template, column_of, instructions=instructions, **options))
    return checked.where(col(CHECK) == lit("yes")).select(*left.column_names, *right_names, *keep)


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
                     keep=(RANK,)).to_pydict()
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
