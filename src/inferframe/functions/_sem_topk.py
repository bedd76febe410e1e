"""``DataFrame.sem_topk()`` and ``sem_rank()``: the rows that best fit a statement, by the model's judgement.

``sem_topk`` checks its arguments and builds its AI steps, then a lazy plan node whose planner
(``plan.semantic.topk``: the plans "quick" and "rerank", the rule choosing one when the job runs, the
quickselect) runs when a job reaches it. Calling it reads no data and sends no request.

``sem_rank`` is lazy: a 1-N score per row (constrained to the digits) and a sort on it.

Example:
    >>> import inferframe as ifr
    >>> df = ifr.from_pydict({"review": ["Wow!", "Meh."]})
    >>> sem_topk(df, "{review} is enthusiastic", k=1, model="gemma-3-270m")._plan.describe()
    "SemTopK '{review} is enthusiastic' k=1 plan=auto -> quick est_calls=4"
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.expression import col, lit
from inferframe.functions._sem_global import sealed, check_columns, criterion, model_name, operator
from inferframe.functions._vocabulary import take
from inferframe.functions.ai import classify_text
from inferframe.functions.templates import parse_template
from inferframe.plan.semantic.topk import PLANS, TopK

__all__ = ["sem_rank", "sem_rank_score", "sem_topk"]


def sem_topk(df: Any, template: str, k: int, *, plan: str = "auto", oversample: float = 2, scale: int = 5,
             seed: int = 0, on_error: str = "null", **options: Any) -> Any:
    """The ``k`` rows that best fit the template's statement, best first, by the model's judgement.

    Lazy: the result is a DataFrame of ``df``'s columns whose ``explain()`` shows the plan and the calls
    expected; the first run collects ``df`` (it needs every row) and computes it, once. Its
    ``sem_stats`` (after the run) is {"plan", "calls", "jobs", "failed", "rows", "candidates", "score_calls",
    "score_failed", "compare_calls", "compare_failed", "swap_calls", "swap_agree", "swap_asked", "quality"}
    ("candidates": the rows the comparisons chose among; "calls" = "score_calls" + "compare_calls" +
    "swap_calls"). The quality guard asks up to 10 comparisons of the first round again with A and B
    swapped: where they name the same winner about as often as chance ("swap_agree" of "swap_asked"),
    a ``LowInformationWarning`` says so and "quality" holds the measurement.

    Parameters:
        df: the DataFrame.
        template: the statement, with the columns it reads in braces: ``"{review} is the most enthusiastic"``.
        k: how many rows (a whole number >= 1; fewer rows than k: all of them, ordered).
        plan: "quick" (quickselect by pairwise comparisons, about 2n + k(k-1)/2 calls),
            "rerank" (a 1-``scale`` score per row, then the comparisons among the best
            m = max(k, ceil(oversample * k)) rows and those tied with the m-th: n + about 2m + k(k-1)/2
            calls; with n <= m no score is asked) or "auto" (default): "quick" where n <= 3m, else "rerank".
        oversample: with "rerank", how many candidates per wanted row are kept after scoring (a number >= 1; 2).
        scale: with "rerank", the top of the score (2 to 9; 5).
        seed: the seed of the pivots.
        on_error: "null" (default): a failed comparison is "no preference", a failed score ranks last
            (both counted); "raise": it stops with ``RowFailed``.
        **options: what ``classify_text`` takes for the comparisons and the scores (provider, model, base_url,
            method="auto"/"generate"/"score", max_concurrency, ...).

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"review": ["Wow, loved it!", "It was fine.", "Meh."]})
        >>> df.sem_topk("{review} is the most enthusiastic", k=1, model="gemma-3-270m").to_pydict()  # doctest: +SKIP
        {'review': ['Wow, loved it!']}
    """
    options = sealed(options)
    t = parse_template(template, "sem_topk")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise PlanError(f"sem_topk(): k={k!r} must be a whole number >= 1, e.g. k=10.")
    if plan not in PLANS:
        raise PlanError(f"sem_topk(): plan={plan!r} is not a plan; pass one of {', '.join(map(repr, PLANS))}, "
                        "e.g. plan='rerank' (score every row, then compare the best).")
    if (not isinstance(oversample, (int, float)) or isinstance(oversample, bool) or not math.isfinite(oversample)
            or oversample < 1):
        raise PlanError(f"sem_topk(): oversample={oversample!r} must be a number >= 1 (rerank keeps "
                        "max(k, ceil(oversample * k)) candidates after scoring), e.g. oversample=2.")
    options = dict(options, on_error=on_error)
    # Built now, so a bad scale (or method) is a PlanError before anything runs.
    score = sem_rank_score(template, scale=scale, confidence_column=False, **options) if plan != "quick" else None
    system = options.pop("system_message", None) or "Answer A or B."  # the user's instructions replace the default
    check_columns(df, t, "sem_topk")
    compare = classify_text(col("q"), ["A", "B"], system_message=system, confidence_column=False, **options)
    op = TopK(template, tuple(t.columns()), criterion(t), k, plan, max(k, math.ceil(oversample * k)), seed,
              model_name(options), compare, score)
    return operator(df, df.schema().to_arrow(), op)


def sem_rank_score(template: str, *, scale: int = 5, **options: Any) -> Any:
    """A column of the model's 1-``scale`` score of how well each row fits the template's statement (null where it failed).

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"review": ["Wow!"]})
        >>> df.with_column("s", sem_rank_score("{review} is enthusiastic", model="gemma-3-270m")).column_names
        ['review', 's', 's_error', 's_confidence']
    """
    t = parse_template(template, "sem_rank")
    if not isinstance(scale, int) or isinstance(scale, bool) or not 2 <= scale <= 9:
        raise PlanError(f"sem_rank(): scale={scale!r} must be a whole number from 2 to 9, e.g. scale=5.")
    parts = [lit("Statement: "), *t.message(),
             lit(f"\nHow true is the statement, from 1 (not at all) to {scale} (completely)? Answer 1 to {scale}.")]
    options.setdefault("system_message", f"Answer with one digit from 1 to {scale}.")
    options.setdefault("calibrate", False)  # a batch prior would spread the scores evenly, whatever the rows
    return classify_text(parts, [str(i) for i in range(1, scale + 1)], **options)


def sem_rank(df: Any, template: str, *, scale: int = 5, column: str = "sem_rank", **options: Any) -> Any:
    """``df`` with a 1-``scale`` score column (``column``) and its errors, sorted by it, best first; lazy (one call per row).

    Parameters:
        df: the DataFrame.
        template: the statement, e.g. ``"{review} is enthusiastic"``.
        scale: the top of the score (2 to 9).
        column: the score column's name (an integer; null where the call failed, sorted last; ``score_column=``
            and ``rank_column=``, its old names, are deprecated).
        **options: what ``classify_text`` takes; ``error_column`` (default True) adds ``<column>_error``.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"review": ["Wow!", "Meh."]})
        >>> df.sem_rank("{review} is enthusiastic", model="gemma-3-270m").column_names
        ['review', 'sem_rank', 'sem_rank_error']
    """
    column = take("sem_rank", options, "column", column, "sem_rank")
    if column in df.column_names:
        raise PlanError(f"sem_rank(column={column!r}): the DataFrame has a column {column!r}; pass another name, "
                        "e.g. column='score'.")
    score = sem_rank_score(template, scale=scale, confidence_column=False, **options)
    # The cast comes after the call's own column, so the call's error column (``<column>_error``) stays beside it.
    scored = df.with_column(column, score)
    return scored.with_column(column, col(column).cast(pa.string()).cast(pa.int64())).sort(column, desc=True)
