"""``DataFrame.sem_topk()`` and ``sem_rank()``: the rows that best fit a statement, by the model's judgement.

``sem_topk`` collects its input (it needs every row) and runs a quickselect whose comparisons the
model makes: "Which one better fits: <criterion>? A: ... B: ... Answer A or B." (every other pair
shown the other way round, against a preference for one position; labels "A"/"B":
label scoring on the embedded llama.cpp server, constrained generation elsewhere). Each round
compares every remaining candidate with one pivot, all in one DataFrame job, and keeps the side that
holds the k best; about 2n comparisons in all instead of n(n-1)/2. The k chosen rows are then
ordered by their wins in the k(k-1)/2 comparisons among them (one more job). A failed comparison
counts as "no preference" (the candidate is not better than the pivot, no win) and is counted;
``on_error="raise"`` stops at it. The result's ``sem_stats`` holds the calls, jobs and failures.

``sem_rank`` is lazy: a 1-N score per row (constrained to the digits) and a sort on it.

Example:
    >>> import random
    >>> quickselect_top(list(range(20)), 3, lambda pairs: [a > b for a, b in pairs], random.Random(0))
    [19, 18, 17]
"""

from __future__ import annotations

import random
from typing import Any, Callable

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.expression import lit
from inferframe.functions._sem_global import Calls, ask_labels, criterion, document, frame, rows_of
from inferframe.functions.ai import classify_text
from inferframe.functions.templates import parse_template

__all__ = ["order_by_wins", "quickselect_top", "sem_rank", "sem_rank_score", "sem_topk"]

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


def sem_topk(df: Any, template: str, k: int, *, seed: int = 0, on_error: str = "null", **options: Any) -> Any:
    """The ``k`` rows that best fit the template's statement, best first, by the model's pairwise comparisons.

    Collects ``df`` (it needs every row). The result is an in-memory DataFrame of ``df``'s columns;
    its ``sem_stats`` is {"calls", "jobs", "failed", "rows"}.

    Parameters:
        df: the DataFrame.
        template: the statement, with the columns it reads in braces: ``"{review} is the most enthusiastic"``.
        k: how many rows (a whole number >= 1; fewer rows than k: all of them, ordered).
        seed: the seed of the pivots.
        on_error: "null" (default): a failed comparison is "no preference"; "raise": it stops with ``RowFailed``.
        **options: what ``classify_text`` takes (provider, model, base_url, method, max_concurrency, ...).

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"review": ["Wow, loved it!", "It was fine.", "Meh."]})
        >>> df.sem_topk("{review} is the most enthusiastic", k=1, model="gemma-3-270m").to_pydict()  # doctest: +SKIP
        {'review': ['Wow, loved it!']}
    """
    t = parse_template(template, "sem_topk")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise PlanError(f"sem_topk(): k={k!r} must be a whole number >= 1, e.g. k=10.")
    table, rows = rows_of(df, t, "sem_topk")
    docs = [document(t, r) for r in rows]
    what = criterion(t)
    calls = Calls()

    def better(pairs: list[tuple[int, int]]) -> list[bool | None]:
        # Every other pair is asked the other way round, so a preference for one position cancels out.
        shown = [(a, b) if i % 2 == 0 else (b, a) for i, (a, b) in enumerate(pairs)]
        questions = [f"Which one better fits: {what}?\nA: {docs[a]}\nB: {docs[b]}\nAnswer A or B." for a, b in shown]
        answers = ask_labels(df, questions, ["A", "B"], calls, dict(options, on_error=on_error), "Answer A or B.")
        return [None if x is None else (x == "A") == (i % 2 == 0) for i, x in enumerate(answers)]

    top = quickselect_top(list(range(len(rows))), k, better, random.Random(seed))
    out = frame(df, table.take(pa.array(top, pa.int64())))
    out.sem_stats = calls.as_dict(rows=len(rows))
    return out


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
    return classify_text(parts, [str(i) for i in range(1, scale + 1)], **options)


def sem_rank(df: Any, template: str, *, scale: int = 5, column: str = "sem_rank", **options: Any) -> Any:
    """``df`` with a 1-``scale`` score column (``column``), sorted by it, best first; lazy (one call per row).

    Parameters:
        df: the DataFrame.
        template: the statement, e.g. ``"{review} is enthusiastic"``.
        scale: the top of the score (2 to 9).
        column: the score column's name (an integer; null where the call failed, sorted last).
        **options: what ``classify_text`` takes.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"review": ["Wow!", "Meh."]})
        >>> df.sem_rank("{review} is enthusiastic", model="gemma-3-270m").column_names
        ['review', 'sem_rank']
    """
    if column in df.column_names:
        raise PlanError(f"sem_rank(column={column!r}): the DataFrame has a column {column!r}; pass another name, "
                        "e.g. column='score'.")
    options.setdefault("error_column", False)
    score = sem_rank_score(template, scale=scale, confidence_column=False, **options)
    return df.with_column(column, score.cast(pa.string()).cast(pa.int64())).sort(column, desc=True)
