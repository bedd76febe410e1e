"""The quality guard: does a model's set of answers carry information, or does it look like chance?

It sits in ``observe``, the floor every layer reports to, so the operators (``ai``, ``functions``), the
progress line's end-of-job check and the run report share one set of rules; ``inferframe.ai.quality``
re-exports it.

Small pure checks on what an operator already asked (no extra calls, except sem_topk's few swapped
re-asks), each returning a ``Measurement`` or None:

- ``same_answer``: (nearly) every row got the same label (sem_filter, sem_predicate, classify_text);
- ``swap_agreement``: A/B comparisons asked both ways agree about as often as chance (sem_topk,
  and any pairwise judge such as sem_join);
- ``all_yes``: (nearly) every pair check said yes (sem_dedup, sem_cluster_by, sem_join).

``message`` writes the one warning's text: the model, the measurement and the fix;
``warn_low_information`` emits it as a ``LowInformationWarning`` at the user's line.

Example:
    >>> m = same_answer({"yes": 20, "no": 0}, raw={"yes": 20})
    >>> m.summary
    '20/20 yes'
    >>> print(message("gemma-3-270m", [m]))
    answers of gemma-3-270m look like chance here: 20/20 yes; use a stronger model (e.g. provider='openai', model='gpt-5-mini')
    >>> swap_agreement(agree=5, asked=10).summary
    '5/10 A/B comparisons gave the same winner when shown both ways (chance: 5/10)'
    >>> swap_agreement(agree=10, asked=10) is None
    True
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Sequence

from inferframe.errors import LowInformationWarning, warn_user

__all__ = ["FIX", "FIX_EXAMPLES", "MIN_ROWS", "MIN_SWAPS", "SAME_SHARE", "Measurement", "all_yes", "binomial_tail", "message",
           "same_answer", "swap_agreement", "warn_low_information"]

# Fewer rows than this say too little to call a set of answers uninformative (5 rows all "no" may be the truth).
MIN_ROWS = 10
# "(Nearly) every row": at least this share of the answers is one label.
SAME_SHARE = 0.95
# Swapped re-asks needed before agreement is judged; and the chance (one-sided binomial p) above which
# the agreement is "about as often as chance": with 10 re-asks, 6 agreeing is chance, 7 is not.
MIN_SWAPS = 6
CHANCE_P = 0.2
# The fixes: a stronger model always; labelled examples where the operator shows them to the model (classify_text).
FIX = "use a stronger model (e.g. provider='openai', model='gpt-5-mini')"
FIX_EXAMPLES = FIX + ", or give labelled examples (examples=[...]) so the answers depend on the rows"


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One check that found little information.

    Parameters:
        check: "same_answer", "swap_agreement" or "all_yes".
        summary: the measurement in words, e.g. "20/20 yes".
        counts: the figures behind it (plain data, for ``sem_stats`` / ``last_run()`` / the report).
    """

    check: str
    summary: str
    counts: dict

    def as_dict(self) -> dict:
        """Plain data: {"check", "summary", **counts}."""
        return {"check": self.check, "summary": self.summary, **self.counts}


def same_answer(counts: Mapping[str, int], raw: Mapping[str, int] | None = None, min_rows: int = MIN_ROWS,
                share: float = SAME_SHARE) -> Measurement | None:
    """(Nearly) every answer is one label, as delivered or as the model gave it before calibration: the measurement.

    A model whose own answers are the same for (nearly) every row does not tell the rows apart;
    calibration then decides by small differences in its probabilities, which need not follow the
    rows either. So both count.

    Parameters:
        counts: answers per label (failed rows left out).
        raw: the answers per label before calibration, where the labels were calibrated.
        min_rows: fewer answers than this are never judged.
        share: the share of one label that counts as "(nearly) every row".

    Example:
        >>> same_answer({"yes": 19, "no": 1}).summary
        '19/20 yes'
        >>> same_answer({"yes": 12, "no": 8}) is None, same_answer({"no": 5}) is None
        (True, True)
        >>> same_answer({"yes": 2, "no": 18}, raw={"yes": 20}).summary
        '20/20 yes before calibration, 2/20 yes after'
    """
    n = sum(counts.values())
    if n < min_rows:
        return None
    label, top = max(counts.items(), key=lambda kv: kv[1])
    raw = {k: v for k, v in (raw or {}).items() if v}
    calibrated = bool(raw) and raw != {k: v for k, v in counts.items() if v}
    r_label, r_top = max(raw.items(), key=lambda kv: kv[1]) if raw else (label, top)
    r_n = sum(raw.values()) if raw else n
    if top < share * n and not (calibrated and r_n >= min_rows and r_top >= share * r_n):
        return None
    summary = f"{top}/{n} {label}"
    if calibrated:
        summary = f"{r_top}/{r_n} {r_label} before calibration, {counts.get(r_label, 0)}/{n} {r_label} after"
    return Measurement("same_answer", summary, {"rows": n, "label": label, "same": top, "answers": dict(counts),
                                                "answers_before_calibration": raw or None})


def binomial_tail(k: int, n: int, p: float = 0.5) -> float:
    """P(X >= k) for X ~ Binomial(n, p): how likely ``k`` or more agreements are by chance.

    Example:
        >>> round(binomial_tail(7, 10), 3), round(binomial_tail(6, 10), 3)
        (0.172, 0.377)
    """
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(max(k, 0), n + 1))


def swap_agreement(agree: int, asked: int, min_pairs: int = MIN_SWAPS, chance_p: float = CHANCE_P) -> Measurement | None:
    """A/B comparisons asked both ways gave the same winner about as often as chance: the measurement, else None.

    A model that reads the two texts names the same winner whichever is shown first; one that
    follows the position (always "A") or guesses agrees about half the time.

    Parameters:
        agree: comparisons whose winner was the same when shown both ways.
        asked: comparisons asked both ways (both answers received).
        min_pairs: fewer are never judged.
        chance_p: agreement whose one-sided binomial p-value against a fair coin is above this is chance.

    Example:
        >>> swap_agreement(3, 10).counts
        {'asked': 10, 'agree': 3}
        >>> swap_agreement(2, 4) is None
        True
    """
    if asked < min_pairs or binomial_tail(agree, asked) <= chance_p:
        return None
    return Measurement("swap_agreement", f"{agree}/{asked} A/B comparisons gave the same winner when shown both ways "
                       f"(chance: {asked // 2}/{asked})", {"asked": asked, "agree": agree})


def all_yes(yes: int, checked: int, min_pairs: int = MIN_ROWS, share: float = SAME_SHARE) -> Measurement | None:
    """(Nearly) every pair check said yes: the measurement, else None (all "no" is what distinct rows give).

    Example:
        >>> all_yes(24, 25).summary
        '24/25 pair checks said yes'
        >>> all_yes(3, 25) is None, all_yes(4, 4) is None
        (True, True)
    """
    if checked < min_pairs or yes < share * checked:
        return None
    return Measurement("all_yes", f"{yes}/{checked} pair checks said yes", {"checked": checked, "yes": yes})


def message(model: str | None, measurements: Sequence[Measurement], where: str | None = None, fix: str = FIX) -> str:
    """The warning's text: whose answers look like chance, the measurements, and the fix.

    Example:
        >>> message("m", [all_yes(10, 10)], where="sem_dedup")
        "answers of m look like chance here (sem_dedup): 10/10 pair checks said yes; use a stronger model (e.g. provider='openai', model='gpt-5-mini')"
    """
    said = "; ".join(m.summary for m in measurements)
    return f"answers of {model or 'the model'} look like chance here{f' ({where})' if where else ''}: {said}; {fix}"


def warn_low_information(model: str | None, measurements: Sequence[Measurement | None], where: str | None = None,
                         fix: str = FIX) -> list[dict]:
    """One ``LowInformationWarning`` for the measurements that fired (None: passed); their plain data.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as w:
        ...     warnings.simplefilter("always")
        ...     out = warn_low_information("m", [None, all_yes(10, 10)])
        >>> len(w), out[0]["check"]
        (1, 'all_yes')
    """
    fired = [m for m in measurements if m is not None]
    if fired:
        warn_user(message(model, fired, where, fix), LowInformationWarning)
    return [m.as_dict() for m in fired]
