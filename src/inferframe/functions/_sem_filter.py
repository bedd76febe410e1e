"""``sem_predicate()`` and ``DataFrame.sem_filter()``: keep the rows for which a statement about them is true.

A template names the columns a row's statement reads, ``"{review} is a positive review of the
film"``; the model is asked "Statement: ... Is the statement true? Answer yes or no." with the
labels ("yes", "no"), so every answer is one of them by construction. The plans:

- "score": P(yes) by the labels' log-probabilities (label scoring), where the provider gives them
  for whole labels (the embedded llama.cpp server), calibrated on the statement with the row
  content-free; the row passes when "yes" is the more probable.
- "generate": constrained generation of "yes" or "no" (a grammar or a JSON schema), elsewhere.
- "cascade": with ``target_recall=``/``target_precision=`` and ``examples=`` or ``oracle_budget=``,
  an in-process embedding similarity first and the model only on rows between two thresholds
  chosen so the targets hold with probability 1 - ``delta`` (``inferframe.ai.filter_thresholds``).

``.limit(n)`` right after the filter goes into it: it stops sending once ``n`` rows pass (or are kept
with their error, ``error_column=True``, the default) and no earlier row is pending.

Example:
    >>> import inferframe as ifr
    >>> df = ifr.from_pydict({"review": ["A delight.", "Dull."]})
    >>> df.where(sem_predicate("{review} is a positive review", model="gemma-3-270m")).column_names
    ['review']
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

from inferframe.ai.call import AICall, Sizing
from inferframe.ai.label_scoring import CONTENT_FREE
from inferframe.ai.sem_filter import SemFilterCascade, SemFilterCascadeConfig, SemFilterConfig, SemFilterOperator
from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, col, lit
from inferframe.functions._calls import ai_expression
from inferframe.functions._vocabulary import take
from inferframe.functions.ai import classify_call
from inferframe.functions.embed import embed_text
from inferframe.functions.templates import Template, parse_template
from inferframe.plan.ai_nodes import ai_call_of

__all__ = ["sem_filter", "sem_predicate"]

LABELS = ("yes", "no")
INSTRUCTION = "Is the statement true? Answer yes or no."
# Rows per batch of a cascade: the oracle budget's sample is drawn from the first batch.
CASCADE_BATCH = 4096


def sem_predicate(template: str, *, method: str = "auto", target_recall: float | None = None,
                  target_precision: float | None = None, delta: float = 0.1, examples: Any = None,
                  oracle_budget: int | None = None, embed_model: str | None = None, seed: int = 0,
                  calibrate: bool = True, **options: Any) -> Expression:
    """A boolean column: whether the model finds the template's statement true of each row (null where the row failed).

    Parameters:
        template: the statement, with the columns it reads in braces: ``"{review} is a positive review"``.
        method: "score" (label scoring by log-probabilities), "generate" (constrained generation), or
            "auto" (default): "score" where the provider gives whole-label log-probabilities, else "generate".
        target_recall / target_precision: plan a cascade that keeps these (against the model's answers)
            with probability at least 1 - ``delta``; needs ``examples`` or ``oracle_budget``.
        delta: the allowed failure probability of the targets (0 < delta < 1).
        examples: labelled rows the cascade's thresholds are chosen on: (value, bool) pairs for a template
            of one column, or (dict of column values, bool); a random sample of the data keeps the promise.
        oracle_budget: instead, how many rows of the first batch (up to 4096 rows) are sampled and asked of
            the model to choose the thresholds (their answers are used, not asked again).
        embed_model: the in-process embedding model of the cascade (default: the packaged all-MiniLM-L6-v2;
            ``proxy_model=``, its old name, is deprecated).
        seed: the seed of the oracle budget's sample.
        calibrate: with label scoring, divide P(yes) and P(no) by their probabilities for the statement
            with the row content-free ("N/A mentions a cat", "" and "[MASK]" the same way; scored once
            per call) and renormalise (Zhao et al. 2021): the model's own leaning towards "yes" for this
            question is taken out. True (default) or False.
        **options: everything ``classify_text`` takes (provider, model, max_concurrency, on_error,
            error_column, ...).

    When (nearly) every row gets the same answer (at least 95% of 10 rows or more), the job ends with
    one ``LowInformationWarning`` naming the counts and the fix; ``last_run()`` holds them under "quality".

    The column's confidence (with ``with_column``: ``<name>_confidence``) is P(yes) where the plan gives one.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"review": ["A delight."]})
        >>> df.with_column("ok", sem_predicate("{review} is positive", model="gemma-3-270m")).schema()["ok"]
        DataType(bool)
        >>> sem_predicate("{review} is positive", target_recall=0.9, model="gemma-3-270m")
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: sem_filter(target_recall=...) chooses its thresholds on labelled rows: pass examples=[(value, True), ...] or oracle_budget=200 (rows the model labels).
    """
    embed_model = take("sem_predicate", options, "embed_model", embed_model)
    return ai_expression(sem_filter_call(template, method=method, target_recall=target_recall,
                                         target_precision=target_precision, delta=delta, examples=examples,
                                         oracle_budget=oracle_budget, embed_model=embed_model, seed=seed,
                                         calibrate=calibrate, **options))


def sem_filter_call(template: str, *, method: str = "auto", target_recall: float | None = None,
                    target_precision: float | None = None, delta: float = 0.1, examples: Any = None,
                    oracle_budget: int | None = None, embed_model: str | None = None, seed: int = 0,
                    keep_errors: bool = False, **options: Any) -> AICall:
    """The ``AICall`` of ``sem_predicate`` (its plan chosen now): a yes/no classifier, or a cascade around one.

    Example:
        >>> sem_filter_call("{review} is positive", model="gemma-3-270m").function
        'sem_filter[score]'
    """
    t = parse_template(template, "sem_filter")
    if method not in ("auto", "score", "generate"):
        raise PlanError(f"sem_filter(): method={method!r} is not 'auto', 'score' or 'generate'.")
    parts = [lit("Statement: "), *t.message(), lit("\n" + INSTRUCTION)]
    options.setdefault("system_message", "Answer yes or no.")
    on_error = options.get("on_error", "null")
    error_column = options.pop("error_column", True)
    calibrate = options.pop("calibrate", True)
    if calibrate not in (True, False, "auto", "batch"):
        raise PlanError(f"sem_filter(): calibrate={calibrate!r} is not True, False or 'batch'.")
    call = classify_call(parts, list(LABELS), method=method, confidence_column=True, calibrate=False, **options)
    base = call.config
    plan = base.method
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    fields.update(content_free=content_free_statements(t) if calibrate else (), batch_prior=calibrate == "batch")
    config = SemFilterConfig(**fields, keep_errors=keep_errors)
    config = dataclasses.replace(config, label=f"sem_filter[{plan} {base.model}]")
    oracle = dataclasses.replace(call, function=f"sem_filter[{plan}]", operator=SemFilterOperator, args=(config,),
                                 value_type=pa.bool_(), confidence_column=True, error_column=error_column)
    if target_recall is None and target_precision is None:
        if examples is not None or oracle_budget is not None:
            raise PlanError("sem_filter(): examples= and oracle_budget= choose a cascade's thresholds; pass "
                            "target_recall= or target_precision= too, or leave them out.")
        return oracle
    for name, v in (("target_recall", target_recall), ("target_precision", target_precision), ("delta", delta)):
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v < 1):
            raise PlanError(f"sem_filter(): {name}={v!r} must be a number strictly between 0 and 1, e.g. 0.9.")
    if examples is None and oracle_budget is None:
        what = "target_recall" if target_recall is not None else "target_precision"
        raise PlanError(f"sem_filter({what}=...) chooses its thresholds on labelled rows: pass examples=[(value, True), "
                        "...] or oracle_budget=200 (rows the model labels).")
    if oracle_budget is not None and (not isinstance(oracle_budget, int) or isinstance(oracle_budget, bool)
                                      or oracle_budget < 1):
        raise PlanError(f"sem_filter(): oracle_budget={oracle_budget!r} must be a whole number >= 1, e.g. 200.")
    proxy = ai_call_of(embed_text(col("__text"), model=embed_model)._node).udf.call
    statement = "".join(p for p in t.parts if isinstance(p, str)).strip() or t.text
    cascade = SemFilterCascadeConfig(
        label=f"sem_filter[cascade similarity > {plan} {base.model}]", oracle=config,
        proxy=(proxy.operator, proxy.args, proxy.kwargs, proxy.method), statement=statement,
        text_parts=(1, len(parts) - 1), examples=_labelled(examples, t) if examples is not None else (),
        oracle_budget=oracle_budget or 0, target_recall=target_recall, target_precision=target_precision,
        delta=float(delta), on_error=on_error, seed=seed)
    return AICall("sem_filter[cascade]", SemFilterCascade, (cascade,), tuple(p._node for p in parts), pa.bool_(),
                  Sizing(CASCADE_BATCH, 2), model=call.model, error_column=error_column, confidence_column=True,
                  on_error=on_error)


def content_free_statements(t: Template) -> tuple[str, ...]:
    """The whole prompts whose P(yes) calibrates a filter: the statement with every field content-free.

    Calibrating on "N/A" alone would measure the model's bias for a different question; these keep
    the statement and the question and take the row away ("Calibrate Before Use", Zhao et al. 2021).

    Example:
        >>> content_free_statements(parse_template("{review} mentions a cat", "sem_filter"))[0]
        'Statement: N/A mentions a cat\\nIs the statement true? Answer yes or no.'
    """
    return tuple(f"Statement: {t.render({f.key: cf for f in t.fields})}\n{INSTRUCTION}" for cf in CONTENT_FREE)


def _labelled(examples: Any, t: Template) -> tuple:
    """(row text as the template renders it, bool) pairs."""
    columns = t.columns()
    out = []
    for item in examples if isinstance(examples, (list, tuple)) else [None]:
        if not isinstance(item, (list, tuple)) or len(item) != 2 or not isinstance(item[1], bool):
            raise PlanError("sem_filter(examples=...) takes (value, True/False) pairs, or (dict of column values, "
                            f"True/False) for a template of several columns; got {item!r}.")
        value, label = item
        if not isinstance(value, dict):
            if len(columns) != 1:
                raise PlanError(f"sem_filter(): the template reads {columns}; give each example as "
                                f"({{{', '.join(repr(c) + ': ...' for c in columns)}}}, True).")
            value = {columns[0]: value}
        missing = [c for c in columns if c not in value]
        if missing:
            raise PlanError(f"sem_filter(): an example lacks the columns {missing} the template reads.")
        out.append((t.render(value), label))
    if not any(y for _, y in out):
        raise PlanError("sem_filter(examples=...) needs rows labelled True: the recall bound is taken over them.")
    return tuple(out)


def sem_filter(df: Any, template: str, *, target_recall: float | None = None, target_precision: float | None = None,
               delta: float = 0.1, examples: Any = None, oracle_budget: int | None = None,
               error_column: bool | str = True, on_error: str = "null", **options: Any) -> Any:
    """``df`` with only the rows for which the template's statement is true (``DataFrame.sem_filter``).

    Parameters:
        df: the DataFrame.
        template, target_recall, target_precision, delta, examples, oracle_budget, **options: as for
            ``sem_predicate``.
        error_column: True (default, as for ``prompt``) or a name: a row whose answer failed is kept, with
            the predicate column (name "sem_filter" unless given: True, or null where the row failed) and
            ``<name>_error``; False: such a row is dropped (``last_run()`` counts it). ``.limit(n)`` after
            it still stops sending once n rows are kept, and a cheap ``where`` after it still runs first
            (the rules in ``plan/rules`` see through the kept-errors plan: ``kept_errors``).
        on_error: "raise": the first failed row stops the job with ``RowFailed``.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"review": ["A delight.", "Dull."]})
        >>> df.sem_filter("{review} is positive", model="gemma-3-270m").column_names
        ['review', 'sem_filter', 'sem_filter_error']
        >>> df.sem_filter("{review} is positive", error_column=False, model="gemma-3-270m").column_names
        ['review']
    """
    kw = dict(target_recall=target_recall, target_precision=target_precision, delta=delta, examples=examples,
              oracle_budget=oracle_budget, on_error=on_error, **options)
    if error_column is False:
        return df.where(sem_predicate(template, **kw))
    name = error_column if isinstance(error_column, str) else "sem_filter"
    if name in df.column_names:
        raise PlanError(f"sem_filter(error_column={name!r}): the DataFrame has a column {name!r}; pass another name, "
                        "e.g. error_column='passes'.")
    out = df.with_column(name, ai_expression(sem_filter_call(template, keep_errors=True, **kw)))
    return out.where(col(name).fill_null(False) | col(f"{name}_error").not_null()).exclude(f"{name}_confidence")

