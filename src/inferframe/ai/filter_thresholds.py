"""The thresholds of a cascaded filter: rows whose cheap proxy score is below ``low`` are dropped, at or above ``high`` kept, the rest asked of the model.

Both bounds are distribution-free and exact for a sample drawn at random from the rows (or
exchangeable with them); recall and precision are measured against the model's (the oracle's)
answers, which the cascade gives on every row between the thresholds.

- Recall (``recall_threshold``): ``low`` is the j-th smallest proxy score among the sample's
  positives. For continuous scores the share of all positives scoring below it is Beta(j, m-j+1)
  distributed (an order statistic of m positives), so
  P(recall < target) = P(Binomial(m, 1 - target) < j); the largest j that keeps this <= delta is
  taken. This is the Clopper-Pearson bound in its order-statistic form: one threshold chosen a
  priori by rank, so no test over many thresholds, and no normal approximation (SUPG's importance
  sampling relies on one), so it holds at the sample sizes an oracle budget buys.
- Precision (``precision_threshold``): rows at or above ``high`` are kept unseen. Candidates are
  the sample's top n0, 2*n0, ... rows by score (n0: the fewest rows that can show the target at
  all); each is tested with the one-sided Clopper-Pearson lower bound of its precision at level
  delta, highest first, stopping at the first that fails (fixed-sequence testing, as in BARGAIN:
  the family-wise error stays delta without a Bonferroni split).
- Both targets: delta is split between them (a union bound). Keeping rows unseen cannot lower
  recall, and dropping rows cannot lower precision, so each threshold keeps its own target.

Example:
    >>> choose_filter_thresholds([0.1, 0.2, 0.9], [False, False, True], target_recall=0.9, delta=0.1)
    (-inf, inf)
    >>> recall_rank(100, 0.9, 0.1)      # drop below the 6th lowest of 100 positives' scores
    6
"""

from __future__ import annotations

import math
from typing import Sequence

from inferframe.errors import PlanError

__all__ = ["binomial_cdf", "choose_filter_thresholds", "precision_lower_bound", "precision_threshold", "recall_rank",
           "recall_threshold"]


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k), summed in log space (exact for the sample sizes here).

    Example:
        >>> round(binomial_cdf(0, 22, 0.1), 4)
        0.0985
    """
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k + 1):
        total += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
    return min(1.0, total)


def recall_rank(m: int, target: float, delta: float) -> int:
    """The largest rank j (1-based) such that dropping rows below the j-th lowest of ``m`` positives' scores keeps
    recall >= ``target`` with probability >= 1 - ``delta``; 0 when no rank does (drop nothing).

    Example:
        >>> recall_rank(21, 0.9, 0.1), recall_rank(22, 0.9, 0.1)
        (0, 1)
    """
    _check(target, delta)
    j = 0
    # P(miss > 1 - target) = P(Binomial(m, 1 - target) < j) = cdf(j - 1); grows with j.
    while j < m and binomial_cdf(j, m, 1.0 - target) <= delta:
        j += 1
    return j


def recall_threshold(scores: Sequence[float], labels: Sequence[bool], target: float, delta: float) -> float:
    """``low``: rows scoring below it may be dropped unseen with recall >= ``target`` w.p. >= 1 - ``delta``.

    Parameters:
        scores: the sample's proxy scores.
        labels: the sample's true answers (the oracle's, or gold labels).
        target: the recall to keep (0 < target < 1).
        delta: the allowed failure probability (0 < delta < 1).

    Returns ``-inf`` (drop nothing) when the sample has too few positives to show the target.

    Example:
        >>> recall_threshold(list(range(100)), [True] * 100, 0.9, 0.1)
        5
    """
    positives = sorted(s for s, y in zip(scores, labels) if y)
    j = recall_rank(len(positives), target, delta)
    return positives[j - 1] if j else -math.inf


def precision_lower_bound(k: int, n: int, delta: float) -> float:
    """The one-sided Clopper-Pearson lower bound of a proportion (``k`` of ``n``) at level ``delta``.

    Example:
        >>> round(precision_lower_bound(22, 22, 0.1), 3), precision_lower_bound(0, 5, 0.1)
        (0.901, 0.0)
    """
    if k <= 0 or n <= 0:
        return 0.0
    lo, hi = 0.0, k / n
    for _ in range(60):  # P(Binomial(n, p) >= k) = delta, by bisection (it rises with p)
        mid = (lo + hi) / 2
        if 1.0 - binomial_cdf(k - 1, n, mid) < delta:
            lo = mid
        else:
            hi = mid
    return lo


def precision_threshold(scores: Sequence[float], labels: Sequence[bool], target: float, delta: float) -> float:
    """``high``: rows scoring at or above it may be kept unseen with precision >= ``target`` w.p. >= 1 - ``delta``.

    Returns ``inf`` (keep nothing unseen) when not even the first candidate shows the target.

    Example:
        >>> precision_threshold([i / 100 for i in range(100)], [i >= 50 for i in range(100)], 0.9, 0.1)
        0.56
    """
    _check(target, delta)
    ranked = sorted(zip(scores, labels), key=lambda p: -p[0])
    n0 = max(1, math.ceil(math.log(delta) / math.log(target)))  # all n0 right shows the target, fewer cannot
    high, right, n = math.inf, 0, 0
    for size in range(n0, len(ranked) + 1, n0):
        right += sum(bool(y) for _, y in ranked[n:size])
        n = size
        if size < len(ranked) and ranked[size][0] == ranked[size - 1][0]:
            continue  # a threshold cannot cut between equal scores
        if precision_lower_bound(right, n, delta) < target:
            break
        high = ranked[size - 1][0]
    return high


def choose_filter_thresholds(scores: Sequence[float], labels: Sequence[bool], *, target_recall: float | None = None,
                             target_precision: float | None = None, delta: float = 0.1) -> tuple[float, float]:
    """(low, high): drop rows scoring below ``low``, keep rows at or above ``high``, ask the model about the rest.

    With one target the other threshold asks the model (``-inf`` / ``inf``); with both, each gets
    ``delta / 2``; ``high`` is never below ``low``.

    Example:
        >>> low, high = choose_filter_thresholds([i / 100 for i in range(200)], [i >= 100 for i in range(200)],
        ...                                      target_recall=0.9, target_precision=0.9, delta=0.1)
        >>> low, high
        (1.04, 1.13)
    """
    if target_recall is None and target_precision is None:
        raise PlanError("sem_filter(): a cascade needs target_recall= or target_precision=, e.g. target_recall=0.9.")
    share = delta / 2 if target_recall is not None and target_precision is not None else delta
    low = recall_threshold(scores, labels, target_recall, share) if target_recall is not None else -math.inf
    high = precision_threshold(scores, labels, target_precision, share) if target_precision is not None else math.inf
    return low, max(high, low) if high != math.inf else high


def _check(target: float, delta: float) -> None:
    if not 0 < target < 1 or not 0 < delta < 1:
        raise PlanError(f"sem_filter(): target={target} and delta={delta} must lie strictly between 0 and 1, e.g. 0.9 and 0.1.")
