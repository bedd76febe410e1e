"""``sem_join`` and ``sem_sim_join``: joins whose condition a model (or an embedding) decides.

``sem_join`` builds a ``SemJoin`` logical plan node (``inferframe.plan.semantic.join``) and reads no data:
its plan is chosen when the job runs, by estimated model calls and cost, unless ``plan=`` names one:

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
model is not the embedded one), one model call proposes the property when the job runs.

The statistics the choice needs (each side's rows, their first rows for the token estimate, the k
sample's checks) are gathered when the job runs; before it, ``explain()`` shows the choice and its
estimate from what is known without reading (an in-memory side's rows), and "?" for the rest.
The chosen plan and the estimates of all of them show as one ``SemJoin ...`` line.

Example:
    >>> import inferframe as ifr
    >>> a = ifr.from_pydict({"review": ["great", "awful"]})
    >>> j = sem_join(a, a, "{review:left} and {review:right} agree", model="gemma-3-270m", plan="nested")
    >>> j.column_names
    ['review', 'right.review']
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from inferframe.ai.join_properties import split_text
from inferframe.errors import PlanError, warn_user
from inferframe.expressions.expression import col
from inferframe.expressions.nodes import column_not_found
from inferframe.functions._input_types import check_input
from inferframe.functions._vocabulary import embedding_options, take
from inferframe.functions.embed import embed_text
from inferframe.functions.sem_join import JoinSteps, batch_check, batch_parts, call_of, pair_check
from inferframe.functions.templates import Field, Template, parse_template
from inferframe.models.registry import resolve_model
from inferframe.plan import logical as lp
from inferframe.plan.semantic.join import PLANS, JoinSpec, SemJoin, split_condition
from inferframe.plan.semantic.join.batches import fit_pairs
from inferframe.plan.semantic.join.names import CANDIDATES, LVEC, RVEC

RELATIONS = ("equal", "different")
DEFAULT_PAIRS_PER_REQUEST = 8


def sem_join(left: Any, right: Any, predicate: str, *, on_property: str | None = None,
             property_values: list[str] | None = None, relation: str = "equal", plan: str = "auto",
             k: int | None = None, target_recall: float = 0.9, sample_size: int = 8, max_nested_pairs: int = 1024,
             examples: Any = None, system_message: str | None = None, embed_model: str | None = None,
             embed_options: dict | None = None, prefix: str = "right.", seed: int = 0,
             pairs_per_request: int = DEFAULT_PAIRS_PER_REQUEST, propose_property: bool | None = None,
             **options: Any) -> Any:
    """The pairs of ``left`` and ``right`` rows for which the model says ``predicate`` holds (lazy: nothing is read).

    Parameters:
        left, right: the DataFrames.
        predicate: a template reading both sides, e.g. ``"{review:left} and {review:right} express the same sentiment"``.
        on_property: the predicate compares this property of each side (e.g. "sentiment"): enables the
            projection plan (each row's property asked once, then a hash join). Without it, a predicate
            ending in "the same <property>" / "different <property>" names it (see ``detect_property``).
        property_values: the property's values (e.g. ["positive", "negative"]): each row is classified
            into one (label scoring or constrained generation); without them the model answers a short string.
        relation: "equal" (the properties are equal) or "different" (needs ``property_values``).
        plan: "auto" (cheapest by estimate, chosen when the job runs), "projection", "blocking", "nested",
            "batched" or "blocking_batched".
        k: candidates per left row for "blocking" (default: chosen on a sample to reach ``target_recall``).
        target_recall: the share of each sampled left row's matches (all its pairs checked by the model)
            that its k nearest candidates must hold; k is the largest any sampled row needs.
        sample_size: left rows whose pairs are all checked to choose k (when the job runs; those answers
            are cached, so the join does not pay for them twice).
        max_nested_pairs: "auto" considers the nested loop (and the batched one) only up to this many pairs.
        examples: (text, value) pairs shown as demonstrations for the property (old name: ``property_examples``).
        system_message: the system message of the pair check (or of the property, with ``on_property``; old
            name: ``instructions``).
        embed_model, embed_options: blocking's embedding model (default: the packaged MiniLM, in process) and
            ``embed_text``'s other options (provider, base_url, ...).
        prefix: put before right column names that clash with left ones, as in ``join``; seed: the sample's seed.
        pairs_per_request: right rows per request in the "batched" plans (default 8, lowered to what the
            answer's ``max_tokens`` holds); the model answers the numbers of those that satisfy the predicate.
            A cut-off or unparseable answer is split in two and asked again, down to single pairs.
        propose_property: where no rule finds the compared property, ask the model once (when the job
            runs) to name it; None (default): only where the model is not the embedded one.
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
    system_message = take("sem_join", options, "system_message", system_message)
    examples = take("sem_join", options, "examples", examples)
    template = parse_template(predicate, "sem_join", sides=True)
    options = _one_model(options)
    on_property, property_values, relation, detected, propose = _detected_property(
        template, on_property, property_values, relation, plan, propose_property, options)
    _check_arguments(left, right, template, on_property, property_values, relation, plan, k, target_recall,
                     sample_size, max_nested_pairs, pairs_per_request, propose)
    # A detected (or proposed) property leaves the system message to the pair check (the user wrote it for it).
    given_property = on_property is not None and detected is None
    right_names = _right_names(left, right, prefix)
    column_of = {**{f"{c}:left": c for c in left.column_names},
                 **{f"{c}:right": r for c, r in zip(right.column_names, right_names)}}
    check_message = None if given_property else system_message
    asked = pairs_per_request
    max_tokens = _max_tokens(batch_check(template, CANDIDATES, asked, system_message=check_message, raw=True, **options))
    pairs_per_request = fit_pairs(asked, max_tokens)
    steps = JoinSteps(template, column_of, dict(options), check_message, {"system_message": system_message if
                      given_property else None, "examples": examples}, embedding_options("sem_join", embed_model, embed_options),
                      pairs_per_request)
    spec = JoinSpec(predicate, on_property, None if property_values is None else tuple(property_values), relation,
                    plan, k, target_recall, sample_size, max_nested_pairs, prefix, seed, pairs_per_request, asked,
                    max_tokens, _pair_parts(template), _batch_parts(template), tuple(template.columns("left")),
                    tuple(template.columns("right")), tuple(right_names), detected, "detected", propose)
    return type(left)(SemJoin(left._plan, right._plan, spec, steps))



def _one_model(options: dict) -> dict:
    """``options`` with the model resolved once (a ``ModelRef`` as ``provider``): the join's calls (the checks, the
    property, the proposal) all run it. ``base_url`` and ``api_key`` go into its spec (the key as a handle)."""
    options = dict(options)
    options["provider"] = resolve_model("sem_join", options.pop("provider", None), options.pop("model", None),
                                        kind="generate", options=options)
    return options


def _detected_property(template: Template, on_property: str | None, property_values: list[str] | None,
                       relation: str, plan: str, propose_property: bool | None, options: dict) -> tuple:
    """(on_property, property_values, relation, the detected property or None, whether to ask the model for it):
    where no property is given, the one the predicate's text states."""
    if on_property is not None or plan not in ("auto", "projection"):
        return on_property, property_values, relation, None, False
    rule = split_text(_literal(template))
    # No rule reads it: a capable model names the property when the job runs.
    propose = rule is None and _proposing(propose_property, template, options)
    found = split_condition(rule, property_values, relation)
    if found is None:
        return on_property, property_values, relation, None, propose
    return (*found, found[0], propose)

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


def _pair_parts(template: Template) -> tuple:
    """The pair check's message: literal strings and (side, column)."""
    return tuple((p.side, p.column) if isinstance(p, Field) else p for p in template.parts)


def _batch_parts(template: Template) -> tuple:
    """The batched check's message: literal strings, ("left", column) and ("candidates", None)."""
    return tuple(("candidates", None) if p == Field("candidates") else ("left", p.column) if isinstance(p, Field)
                 else p for p in batch_parts(template))


def _proposing(propose: bool | None, template: Template, options: dict) -> bool:
    """Whether to ask the model for the property: ``propose_property``, else (None) where the model is not the
    embedded one (Gemma 3 270M names no property reliably)."""
    if propose is not None:
        return bool(propose)
    ref = call_of(pair_check(template, None, **options)).model
    return not (ref.caps.local and ref.model == ref.caps.default_model)  # the embedded model: a local provider's default


def _max_tokens(expr) -> int | None:
    """The output cap an AI call's requests carry (the user's, or the provider's default for its schema)."""
    return call_of(expr).config.max_output_tokens


def sem_sim_join(left: Any, right: Any, on: str, *, other_on: str | None = None, k: int = 5,
                 metric: str = "cosine", column: str = "score", rank: str = "rank", prefix: str = "right.",
                 embed_options: dict | None = None, **old: Any) -> Any:
    """For every left row, the ``k`` most similar right rows: by their texts' embeddings, or by vectors already there.

    Parameters:
        left, right: the DataFrames.
        on: left's text column (embedded with ``embed_text``) or vector column (used as is).
        other_on: right's column (default: ``on``).
        k, metric, prefix: as in ``DataFrame.nearest``.
        column: the similarity's column (float32; old name ``score_column``, deprecated).
        rank: the 1-based rank's column (int64; old name ``rank_column``, deprecated).
        embed_options: ``embed_text`` options (default: packaged MiniLM, in process).

    Returns left's columns, right's, then the score and rank: one row per match. No language model is asked.

    Example:
        >>> import inferframe as ifr
        >>> q = ifr.from_pydict({"q": ["a red apple"]})
        >>> docs = ifr.from_pydict({"doc": ["a green car", "a ripe red apple"]})
        >>> sem_sim_join(q, docs, on="q", other_on="doc", k=1).select("q", "doc", "rank").to_pydict()
        {'q': ['a red apple'], 'doc': ['a ripe red apple'], 'rank': [1]}
    """
    column, rank = _output_names(column, rank, old)
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
        out = type(left)(lp.Nearest(lv._plan, rv._plan, LVEC, RVEC, k, metric, column, rank, prefix))
        return out.exclude(LVEC, RVEC)
    if _is_text(lt) or _is_text(rt):
        raise PlanError(f"sem_sim_join(): {on!r} is {lt} and {other_on!r} is {rt}; give two text columns (embedded "
                        "here) or two vector columns.")
    return type(left)(lp.Nearest(left._plan, right._plan, on, other_on, k, metric, column, rank, prefix))


def _output_names(column: str, rank: str, old: dict) -> tuple[str, str]:
    """``column`` and ``rank``, or their old names in ``old`` (each with a DeprecationWarning); anything else in ``old``
    is a PlanError, as an unknown keyword is."""
    old = dict(old)
    if "rank_column" in old:  # its one name here is rank=, not the column= the vocabulary maps it to
        if rank != "rank":
            raise PlanError("sem_sim_join(): pass rank= only; rank_column= is its old name.")
        rank = old.pop("rank_column")
        warn_user("sem_sim_join(): rank_column= is deprecated and will be removed in the next release; use rank=.",
                  DeprecationWarning)
    column = take("sem_sim_join", old, "column", column, "score")
    if old:
        raise PlanError(f"sem_sim_join() got an unexpected keyword argument {next(iter(old))!r}.")
    return column, rank


# --- checks ------------------------------------------------------------------------------------------------------
def _check_arguments(left, right, template: Template, on_property, values, relation, plan, k, target_recall,
                     sample_size, max_nested_pairs, pairs_per_request, propose=False) -> None:
    if not hasattr(left, "_plan") or not hasattr(left, "column_names"):
        raise PlanError(f"sem_join(): left must be a DataFrame (e.g. ifr.from_pydict(...)), got {type(left).__name__}.")
    if not hasattr(right, "column_names") or not hasattr(right, "nearest"):
        raise PlanError(f"sem_join() joins with another DataFrame, got {type(right).__name__}.")
    for df, side in ((left, "left"), (right, "right")):
        for c in template.columns(side):
            if c not in df.column_names:
                raise column_not_found(c, pa.schema(df))
            check_input("sem_join", pa.schema(df).field(c), template=True)  # the AI functions' one input rule
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
    if plan == "projection" and on_property is None and not propose:
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
