"""``DataFrame.sem_topk()`` and ``sem_rank()``: the rows that best fit a statement, by the model's judgement.

``sem_topk`` is lazy; when it runs it collects its input (it needs every row). It has two physical plans (``plan=``):

- ``"quick"`` (LOTUS "quick"): a quickselect whose comparisons the model makes: "Which one better
  fits: <criterion>? A: ... B: ... Answer A or B." (every other pair shown the other way round,
  against a preference for one position; labels "A"/"B": label scoring on the embedded llama.cpp
  server, constrained generation elsewhere). Each round compares every remaining candidate with one
  pivot, all in one DataFrame job, and keeps the side that holds the k best; about 2n comparisons in
  all instead of n(n-1)/2. The k chosen rows are then ordered by their wins in the k(k-1)/2
  comparisons among them (one more job).
- ``"rerank"`` (score, then rerank): one 1-``scale`` score per row (``sem_rank_score``, constrained to
  the digits; one job), the best ``m = max(k, ceil(oversample * k))`` rows kept as candidates plus
  every row tied with the m-th score, and those ordered by the quickselect above: n scores plus
  about 2m + k(k-1)/2 comparisons. A row whose score failed ranks below every scored row (it is a
  candidate only where fewer than m rows scored) and is counted.
- ``"auto"`` (default): "quick" where n <= 3m (m as above; n <= 6k with the default oversample=2),
  "rerank" above (see ``choose_plan`` for the calls count behind the rule).

A failed comparison counts as "no preference" (the candidate is not better than the pivot, no win)
and is counted; ``on_error="raise"`` stops at a failed comparison or score. The result's
``sem_stats`` holds the plan that ran, the calls (``score_calls``, ``compare_calls``), jobs and
failures of each phase.

``sem_rank`` is lazy: a 1-N score per row (constrained to the digits) and a sort on it.

Example:
    >>> import random
    >>> quickselect_top(list(range(20)), 3, lambda pairs: [a > b for a, b in pairs], random.Random(0))
    [19, 18, 17]
    >>> choose_plan(n=60, k=5, m=10), choose_plan(n=30, k=5, m=10)
    ('rerank', 'quick')
    >>> candidates_by_score([3, 5, None, 4, 5, 4], m=3)
    [1, 4, 3, 5]
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.expression import col, lit
from inferframe.functions._sem_global import (Calls, sealed, ask_labels, check_columns, criterion, document, frame,
                                              model_name, run_job, whole_table)
from inferframe.functions._vocabulary import take
from inferframe.functions.ai import classify_text
from inferframe.functions.templates import parse_template
from inferframe.observe.quality import MIN_SWAPS, swap_agreement, warn_low_information

__all__ = ["PLANS", "candidates_by_score", "choose_plan", "expected_calls", "order_by_wins", "quickselect_top", "sem_rank",
           "sem_rank_score", "sem_topk", "swap_check"]

# Comparisons the quality guard asks again with A and B swapped (a few extra calls per run).
SWAP_CHECKS = 10

# sem_topk's physical plans (plan=, as sem_join's).
PLANS = ("auto", "quick", "rerank")

# Compares (candidate, other) pairs in one round: True where the candidate is better, False or None (no preference) else.
Compare = Callable[[list[tuple[int, int]]], list[bool | None]]


def quickselect_top(ids: list[int], k: int, better: Compare, rng: random.Random) -> list[int]:
    """The ``k`` best of ``ids`` by a batched comparator, ordered best first (quickselect, then wins among the k).

    Every round asks ``better`` once, with every remaining candidate against one random pivot.

    Example:
        >>> rounds = []
        >>> def better(pairs):
        ...     rounds.append(len(pairs))
        ...     return [a > b for a, b in pairs]
        >>> quickselect_top(list(range(60)), 5, better, random.Random(1))
        [59, 58, 57, 56, 55]
        >>> sum(rounds) < 60 * 59 // 2 * 0.3
        True
    """
    chosen: list[int] = []
    cand = list(ids)
    while k > 0 and cand:
        if len(cand) <= k:
            chosen += cand
            break
        pivot = cand[rng.randrange(len(cand))]
        others = [c for c in cand if c != pivot]
        answers = better([(c, pivot) for c in others])
        above = [c for c, a in zip(others, answers) if a is True]
        below = [c for c, a in zip(others, answers) if a is not True]
        if len(above) >= k:
            cand = above
        else:
            chosen += above + [pivot]
            k -= len(above) + 1
            cand = below
    return order_by_wins(chosen, better)


def order_by_wins(ids: list[int], better: Compare) -> list[int]:
    """``ids`` ordered by their wins in one round of all pairs among them (ties keep the given order).

    Example:
        >>> order_by_wins([1, 3, 2], lambda pairs: [a > b for a, b in pairs])
        [3, 2, 1]
    """
    pairs = [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]]
    wins = dict.fromkeys(ids, 0)
    for (a, b), answer in zip(pairs, better(pairs) if pairs else []):
        if answer is True:
            wins[a] += 1
        elif answer is False:
            wins[b] += 1
    return sorted(ids, key=lambda i: -wins[i])


def choose_plan(n: int, k: int, m: int) -> str:
    """plan="auto": "quick" for ``n`` rows where n <= 3m (``m`` candidates kept after scoring), else "rerank".

    Calls (the model's questions): quick asks about 2n comparisons (every round compares the
    remaining rows with a pivot; the rounds shrink geometrically) plus k(k-1)/2 to order the k chosen;
    rerank asks n scores plus the same quickselect among its m' candidates: about n + 2m' + k(k-1)/2.
    So rerank saves calls once n > 2m'. m' is m plus the rows tied with the m-th score, and on a
    1-5 scale ties are common (m' about 1.5m), so the break-even is about n = 3m: n <= 3m keeps
    "quick" (e.g. k=5, m=10: 30 rows cost about 60 + 10 comparisons either way), where it is no dearer
    and every row gets the model's pairwise judgement rather than a coarse score; above it
    "rerank" (60 rows, k=5: about 130 calls for quick, about 60 + 30 + 10 = 100 for rerank).

    Example:
        >>> [choose_plan(n, k=5, m=10) for n in (5, 30, 31, 1000)]
        ['quick', 'quick', 'rerank', 'rerank']
    """
    return "quick" if n <= 3 * m else "rerank"


def candidates_by_score(scores: list[int | None], m: int) -> list[int]:
    """The ids of the ``m`` best scores plus every id tied with the m-th, best first (ties keep the given order).

    A None score (failed) ranks below every score: such rows are candidates only where fewer than m rows scored.

    Example:
        >>> candidates_by_score([2, None, 5, 2, 1], m=2)
        [2, 0, 3]
        >>> candidates_by_score([None, 4, None], m=2)
        [1, 0, 2]
    """
    order = sorted(range(len(scores)), key=lambda i: -(scores[i] if scores[i] is not None else 0))
    if len(order) <= m:
        return order
    cut = scores[order[m - 1]]
    return [i for i in order if (scores[i] if scores[i] is not None else 0) >= (cut if cut is not None else 0)]


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
    what = criterion(t)
    m = max(k, math.ceil(oversample * k))

    def compute(source: Any) -> tuple[pa.Table, dict]:
        table = source.to_arrow()
        n = table.num_rows
        docs = [document(t, r) for r in table.select(t.columns()).to_pylist()]
        chosen = choose_plan(n, k, m) if plan == "auto" else plan
        scored, compared, swapped = Calls(), Calls(), Calls()
        first_round: list[tuple[tuple[int, int], int | None]] = []

        def winners(shown: list[tuple[int, int]], calls: Calls) -> list[int | None]:
            """The row the model prefers of each (A, B) pair as shown (None: the call failed)."""
            questions = [f"Which one better fits: {what}?\nA: {docs[a]}\nB: {docs[b]}\nAnswer A or B." for a, b in shown]
            answers = ask_labels(source, questions, ["A", "B"], calls, options, system)
            return [None if x is None else (a if x == "A" else b) for (a, b), x in zip(shown, answers)]

        def better(pairs: list[tuple[int, int]]) -> list[bool | None]:
            # Every other pair is asked the other way round, so a preference for one position cancels out.
            shown = [(a, b) if i % 2 == 0 else (b, a) for i, (a, b) in enumerate(pairs)]
            won = winners(shown, compared)
            if not first_round:
                first_round.extend(zip(shown, won))
            return [None if w is None else w == a for (a, _), w in zip(pairs, won)]

        candidates = list(range(n))
        if chosen == "rerank" and n > m:
            candidates = candidates_by_score(_scores(source, table, t, score, scored), m)
        top = quickselect_top(candidates, k, better, random.Random(seed))
        agree, asked = swap_check(first_round, lambda shown: winners(shown, swapped))
        quality = warn_low_information(model_name(options), [swap_agreement(agree, asked)], where="sem_topk")
        stats = scored.add(compared).add(swapped).as_dict(
            plan=chosen, rows=n, candidates=len(candidates), score_calls=scored.calls, score_failed=scored.failed,
            compare_calls=compared.calls, compare_failed=compared.failed, swap_calls=swapped.calls,
            swap_agree=agree, swap_asked=asked, quality=quality)
        return table.take(pa.array(top, pa.int64())), stats

    return whole_table(df, df.schema().to_arrow(), f"SemTopK {template!r} k={k} plan={plan}", compute,
                       lambda n: expected_calls(plan, n, k, m))


def swap_check(asked: list[tuple[tuple[int, int], int | None]],
               winners: Callable[[list[tuple[int, int]]], list[int | None]],
               most: int = SWAP_CHECKS) -> tuple[int, int]:
    """The quality guard's re-asks: up to ``most`` answered comparisons asked again with A and B swapped.

    Returns (comparisons that named the same winner both ways, comparisons answered both ways). With
    fewer than ``MIN_SWAPS`` answered comparisons nothing is asked: too few to judge.

    Example:
        >>> first = [((0, 1), 1), ((2, 3), 2), ((4, 5), 4), ((6, 7), 7), ((8, 9), 8), ((1, 2), 2)]
        >>> swap_check(first, lambda shown: [b for a, b in shown])   # always "B": the position, not the text
        (3, 6)
        >>> said = dict(first)   # a model that names the same winner whichever comes first
        >>> swap_check(first, lambda shown: [said[(b, a)] for a, b in shown])
        (6, 6)
        >>> swap_check(first[:3], lambda shown: [a for a, b in shown])
        (0, 0)
    """
    sample = [(pair, w) for pair, w in asked if w is not None][:most]
    if len(sample) < MIN_SWAPS:
        return 0, 0
    again = winners([(b, a) for (a, b), _ in sample])
    both = [(w, w2) for (_, w), w2 in zip(sample, again) if w2 is not None]
    return sum(w == w2 for w, w2 in both), len(both)


def expected_calls(plan: str, n: int | None, k: int, m: int) -> str:
    """sem_topk's model calls before it runs, in words, for ``n`` input rows (None: not known before the run).

    Example:
        >>> expected_calls("auto", 100, k=5, m=10)
        'plan=rerank for 100 rows: about 140 calls (100 scores, about 40 comparisons)'
        >>> expected_calls("quick", 20, k=5, m=10)
        'plan=quick for 20 rows: about 50 calls (comparisons)'
    """
    pairs = k * (k - 1) // 2
    if n is None:
        return (f"rows not known before the run: plan=quick asks about 2n + {pairs} comparisons, plan=rerank n scores "
                f"and about {2 * math.ceil(1.5 * m) + pairs} comparisons" + (" (auto: quick up to "
                f"{3 * m} rows)" if plan == "auto" else ""))
    chosen = choose_plan(n, k, m) if plan == "auto" else plan
    if chosen == "quick" or n <= m:
        kk = min(k, n)
        est = (2 * n if n > k else 0) + kk * (kk - 1) // 2
        return f"plan={chosen} for {n:,} rows: about {est:,} calls (comparisons)"
    compares = 2 * math.ceil(1.5 * m) + pairs  # m' (candidates with ties) about 1.5m on a 1-5 scale
    return f"plan=rerank for {n:,} rows: about {n + compares:,} calls ({n:,} scores, about {compares:,} comparisons)"


def _scores(df: Any, table: pa.Table, t: Any, score: Any, calls: Calls) -> list[int | None]:
    """One job: ``score`` (a ``sem_rank_score`` expression) of every row of ``table`` (None where it failed; counted)."""
    name = "sem_topk_score"
    while name in table.column_names or f"{name}_error" in table.column_names:
        name = "_" + name
    answers = run_job(frame(df, table.select(t.columns())).with_column(name, score), name, calls)
    return [None if a is None else int(a) for a in answers]


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
