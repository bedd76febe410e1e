"""The quality guard: does a model's set of answers carry information, or does it look like chance?

It sits in ``observe``, the floor every layer reports to, so the operators (``ai``, ``functions``), the
progress line's end-of-job check and the run report share one set of rules; ``inferframe.ai.quality``
re-exports it.

Small pure checks on what an operator already asked (no extra calls, except sem_topk's few swapped
re-asks), each returning a ``Measurement`` or None:

- ``same_answer``: (nearly) every row got the same label (sem_filter, sem_predicate, classify_text);
- ``swap_agreement``: A/B comparisons asked both ways agree about as often as chance (sem_topk,
  and any pairwise judge such as sem_join);
- ``all_yes``: (nearly) every pair check said yes (sem_dedup, sem_cluster_by, sem_join);
- ``constant_field``: a field of a structured answer is (nearly) the same in every row (prompt with
  return_format, ai_extract);
- ``out_of_range``: numbers of a field outside the range its schema or its instructions give.

A structured call counts its answers per field with ``count_record`` (bounded: at most ``KEEP_VALUES``
distinct values a field); ``merge_field_counts`` sums the counts of several processes, and
``guard_fields`` judges them at the end of the job.

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

__all__ = ["FIX", "FIX_EXAMPLES", "FIX_FIELDS", "FIX_RANGE", "KEEP_VALUES", "MIN_ROWS", "MIN_SWAPS", "SAME_SHARE", "Measurement", "all_yes",
           "binomial_tail", "constant_field", "count_out_of_range", "count_record", "guard_fields", "merge_field_counts",
           "message", "new_field_counts", "out_of_range", "same_answer", "swap_agreement", "warn_low_information"]

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
FIX_FIELDS = FIX + (", or describe the field (Field(description=...)) and show an example answer in system_message "
                    "so the answers depend on the rows")
FIX_RANGE = FIX + (", or put the range in the schema (e.g. Field(ge=1, le=5)): the local model's grammar then keeps "
                   "to it and every answer is checked against it")
# Distinct values counted per field of a structured answer; later new values count as "other", so memory stays
# flat on any number of rows. Counts are never overestimated: a field reported constant is constant.
KEEP_VALUES = 32
_SHOWN = 40  # characters of a value kept as its key (longer ones: a prefix and a hash)


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


def message(model: str | None, measurements: Sequence[Measurement], where: str | None = None, fix: str = FIX,
            what: str = "look like chance here") -> str:
    """The warning's text: whose answers look like chance, the measurements, and the fix.

    Example:
        >>> message("m", [all_yes(10, 10)], where="sem_dedup")
        "answers of m look like chance here (sem_dedup): 10/10 pair checks said yes; use a stronger model (e.g. provider='openai', model='gpt-5-mini')"
    """
    said = "; ".join(m.summary for m in measurements)
    return f"answers of {model or 'the model'} {what}{f' ({where})' if where else ''}: {said}; {fix}"


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


# --- structured answers: per-field counts and their checks ---------------------------------------------

def new_field_counts(fields: Sequence[str], ranges: Mapping[str, tuple] | None = None) -> dict:
    """Empty per-field counts of a structured call: plain data, summed across processes.

    Parameters:
        fields: the top-level fields whose values are counted (scalars: strings, numbers, booleans, labels).
        ranges: field -> (low, high, where the range comes from), for numbers that must lie in it.

    Example:
        >>> new_field_counts(["rating"], {"rating": (1, 5, "the schema")})["rating"]
        {'values': {}, 'other': 0, 'rows': 0, 'range': [1, 5, 'the schema'], 'checked': 0, 'below': 0, 'above': 0}
    """
    ranges = ranges or {}
    return {f: {"values": {}, "other": 0, "rows": 0, "range": list(ranges[f]) if f in ranges else None,
                "checked": 0, "below": 0, "above": 0} for f in fields}


def _key(value) -> str:
    """A value as a short key (its repr; a long string as a prefix and a hash, so distinct ones stay distinct)."""
    text = repr(value)
    if len(text) <= _SHOWN:
        return text
    import hashlib

    return text[:_SHOWN - 12] + "...#" + hashlib.blake2b(text.encode(), digest_size=4).hexdigest()


def _check_range(c: dict, value) -> None:
    if c["range"] is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    lo, hi = c["range"][0], c["range"][1]
    c["checked"] += 1
    if value < lo:
        c["below"] += 1
    elif value > hi:
        c["above"] += 1


def count_record(counts: dict, record: Mapping) -> None:
    """Count one valid answer (a dict by JSON keys): each field's value, and whether a number is in its range.

    Example:
        >>> c = new_field_counts(["rating", "ok"], {"rating": (1, 5, "the system message")})
        >>> count_record(c, {"rating": 7, "ok": False}); count_record(c, {"rating": 2, "ok": False})
        >>> c["ok"]["values"], c["rating"]["above"], c["rating"]["checked"]
        ({'False': 2}, 1, 2)
    """
    for field, c in counts.items():
        if field not in record:
            continue
        value = record[field]
        c["rows"] += 1
        key = _key(value)
        values = c["values"]
        if key in values:
            values[key] += 1
        elif len(values) < KEEP_VALUES:
            values[key] = 1
        else:
            c["other"] += 1
        _check_range(c, value)


def count_out_of_range(counts: dict, record: Mapping) -> None:
    """Count the numbers of an answer that broke the schema (parsed, not validated) against each field's range.

    Such a row failed (its error says why); its numbers still tell whether the model keeps to the range.

    Example:
        >>> c = new_field_counts(["rating"], {"rating": (1, 5, "the schema")})
        >>> count_out_of_range(c, {"rating": 9}); c["rating"]["above"], c["rating"]["rows"]
        (1, 0)
    """
    for field, c in counts.items():
        if isinstance(record, Mapping) and field in record:
            _check_range(c, record[field])


def merge_field_counts(total: dict, theirs: Mapping) -> None:
    """Add another process's per-field counts into ``total`` (a value past ``KEEP_VALUES`` counts as other).

    Example:
        >>> a = new_field_counts(["ok"]); b = new_field_counts(["ok"])
        >>> count_record(a, {"ok": True}); count_record(b, {"ok": True})
        >>> total = {}; merge_field_counts(total, a); merge_field_counts(total, b); total["ok"]["values"]
        {'True': 2}
    """
    for field, c in theirs.items():
        mine = total.setdefault(field, new_field_counts([field])[field])
        if mine["range"] is None and c.get("range") is not None:
            mine["range"] = list(c["range"])  # a setting: the same in every process
        for k in ("other", "rows", "checked", "below", "above"):
            mine[k] += c.get(k, 0)
        values = mine["values"]
        for key, n in (c.get("values") or {}).items():
            if key in values or len(values) < KEEP_VALUES:
                values[key] = values.get(key, 0) + n
            else:
                mine["other"] += n


def constant_field(field: str, c: Mapping, min_rows: int = MIN_ROWS, share: float = SAME_SHARE) -> Measurement | None:
    """A field with (nearly) the same value in every row (as ``same_answer``: 95% of at least 10 rows), else None.

    Example:
        >>> c = new_field_counts(["rating"])
        >>> for _ in range(20): count_record(c, {"rating": 1})
        >>> constant_field("rating", c["rating"]).summary
        "field 'rating' is 1 in 20/20 rows"
        >>> constant_field("rating", {"values": {"1": 9}, "rows": 9}) is None
        True
    """
    n = c.get("rows", 0)
    if n < min_rows or not c.get("values"):
        return None
    key, top = max(c["values"].items(), key=lambda kv: kv[1])
    if top < share * n:
        return None
    return Measurement("constant_field", f"field {field!r} is {key} in {top}/{n} rows",
                       {"field": field, "value": key, "same": top, "rows": n})


def out_of_range(field: str, c: Mapping) -> Measurement | None:
    """Numbers of a field outside the range its schema or instructions give, with counts; None when all are in it.

    Example:
        >>> c = new_field_counts(["rating"], {"rating": (1, 5, "the system message")})
        >>> for r in (3, 7, 0, 9): count_record(c, {"rating": r})
        >>> out_of_range("rating", c["rating"]).summary
        "field 'rating' is outside 1..5 (from the system message) in 3/4 answers (1 below, 2 above)"
    """
    bad = c.get("below", 0) + c.get("above", 0)
    if not bad or c.get("range") is None:
        return None
    lo, hi, source = c["range"]
    return Measurement("out_of_range", f"field {field!r} is outside {lo}..{hi} (from {source}) in {bad}/{c['checked']} "
                       f"answers ({c['below']} below, {c['above']} above)",
                       {"field": field, "low": lo, "high": hi, "source": source, "checked": c["checked"],
                        "below": c["below"], "above": c["above"]})


def guard_fields(runs: list[dict], warn: bool = True) -> None:
    """The quality guard for structured answers at the end of a job: one LowInformationWarning per field that fired.

    Each run entry with per-field counts (``fields``) gets ``field_quality``: the measurements that fired
    (plain data, shown by ``last_run()``); ``warn=False`` records them only.

    Example:
        >>> import warnings
        >>> c = new_field_counts(["ok"])
        >>> for _ in range(12): count_record(c, {"ok": False})
        >>> runs = [{"label": "prompt[m]", "fields": c}]
        >>> with warnings.catch_warnings(record=True) as w:
        ...     warnings.simplefilter("always")
        ...     guard_fields(runs)
        >>> print(w[0].message)
        answers of prompt[m] carry no information here: field 'ok' is False in 12/12 rows; use a stronger model (e.g. provider='openai', model='gpt-5-mini'), or describe the field (Field(description=...)) and show an example answer in system_message so the answers depend on the rows
    """
    for r in runs:
        if not r.get("fields"):
            continue
        fired = [(what, m) for field, c in r["fields"].items()
                 for what, m in (("carry no information here", constant_field(field, c)),
                                 ("break the range they were given", out_of_range(field, c))) if m is not None]
        r["field_quality"] = [m.as_dict() for _, m in fired]
        for what, m in fired if warn else ():
            fix = FIX_RANGE if m.check == "out_of_range" and m.counts["source"] != "the schema" else FIX_FIELDS
            warn_user(message(r.get("label"), [m], fix=fix, what=what), LowInformationWarning)
