"""The quality guard for AI operators: the checks of ``inferframe.observe.quality`` (see there), under the ai layer's name,
and what a structured call counts for it (``FieldGuard``).

A structured call (``prompt(..., return_format=...)``, SQL ``ai_extract``) counts, per top-level scalar field,
the values its valid answers hold, and checks numbers against the range the schema gives
(``Field(ge=1, le=5)``, ``Literal[1, 2, 3]``, a JSON schema's ``minimum``/``maximum``) or, failing that,
the range its system message states next to the field's name ("rating 1-5", "a rating from 1 to 10").
The job's end judges the counts (``observe.quality.guard_fields``).

Example:
    >>> same_answer({"yes": 20}).summary
    '20/20 yes'
    >>> prompt_range("Give the rating 1-5 and say if it is a complaint.", "rating")
    (1, 5)
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from inferframe.observe.quality import (FIX, FIX_EXAMPLES, MIN_ROWS, MIN_SWAPS, SAME_SHARE, Measurement, all_yes, binomial_tail,
                                        count_out_of_range, count_record, message, new_field_counts, same_answer,
                                        swap_agreement, warn_low_information)

__all__ = ["FIX", "FIX_EXAMPLES", "MIN_ROWS", "MIN_SWAPS", "SAME_SHARE", "FieldGuard", "Measurement", "all_yes", "binomial_tail",
           "message", "prompt_range", "same_answer", "swap_agreement", "warn_low_information"]

_SCALARS = frozenset({"string", "integer", "number", "boolean", "enum", "date", "datetime", "time"})
_NUM = r"(-?\d+(?:\.\d+)?)"
# "1-5", "1 - 5", "1–5", "1 to 5", "1..5"; a range stated next to the field's name, in the same clause.
_RANGE = _NUM + r"\s*(?:-|–|—|\.\.|to)\s*" + _NUM + r"(?!\d|\.\d)"
_GAP_AFTER = r"[^.;:\n\d]{0,24}?"  # "rating from 1 to 5", "rating (1-5)", "rating between 1 and ..." (not "and")
_GAP_BEFORE = r"[^.;:\n\d]{0,12}?"  # "a 1-5 rating", "1 to 10 score for ..." (the name right after)


def prompt_range(text: str | None, field: str) -> tuple[float, float] | None:
    """The range ``text`` states for ``field``: an explicit "N-M" / "N to M" next to its name, else None.

    Conservative: the name (or its words, ``star_rating`` as "star rating") and the range must sit in
    one clause, the low end below the high one, and every such range in the text must agree.

    Example:
        >>> prompt_range("Rate it: rating from 1 to 10.", "rating"), prompt_range("a 1-5 star_rating", "star_rating")
        ((1, 10), (1, 5))
        >>> prompt_range("Rate 1-5. Also give the product.", "rating") is None   # no name next to it
        True
        >>> prompt_range("rating 1-5, or rating 1-10", "rating") is None           # two ranges: none is trusted
        True
    """
    if not text or not field:
        return None
    name = r"\b" + r"[\s_-]+".join(re.escape(w) for w in re.split(r"[\s_-]+", field.strip()) if w) + r"\b"
    found = set()
    for pattern in (name + _GAP_AFTER + r"(?<![\d.-])" + _RANGE, r"(?<![\d.-])" + _RANGE + _GAP_BEFORE + name):
        for m in re.finditer(pattern, text, re.I):
            lo, hi = (float(g) for g in m.groups())
            if lo < hi:
                found.add((int(lo) if lo.is_integer() else lo, int(hi) if hi.is_integer() else hi))
    return found.pop() if len(found) == 1 else None


def _schema_range(node: Any) -> tuple | None:
    """(low, high) a number field's schema allows (both bounds given), or an integer Literal's lowest and highest."""
    if node.kind == "enum" and node.value_kind == "integer" and node.labels:
        return min(node.labels), max(node.labels)
    if node.kind not in ("integer", "number"):
        return None
    kw = node.keywords
    lo = kw.get("minimum", kw.get("exclusiveMinimum"))
    hi = kw.get("maximum", kw.get("exclusiveMaximum"))
    return (lo, hi) if lo is not None and hi is not None else None


class FieldGuard:
    """What one structured call counts for the quality guard: its top-level scalar fields and their ranges.

    Parameters:
        spec: the parsed return format (``structured.Validator(...).spec``).
        system_message: the call's instructions, read for ranges such as "rating 1-5".

    Example:
        >>> from pydantic import BaseModel, Field
        >>> from inferframe.structured import Validator
        >>> class Review(BaseModel):
        ...     rating: int
        ...     stars: int = Field(ge=1, le=5)
        ...     complaint: bool
        >>> g = FieldGuard.of(Validator(Review).spec, "Give a rating from 1 to 10.")
        >>> g.fields, g.ranges
        (('rating', 'stars', 'complaint'), {'rating': (1, 10, 'the system message'), 'stars': (1, 5, 'the schema')})
    """

    def __init__(self, fields: Sequence[str], ranges: dict) -> None:
        self.fields = tuple(fields)
        self.ranges = ranges

    @classmethod
    def of(cls, spec: Any, system_message: str | None = None) -> "FieldGuard | None":
        """The guard of a return format whose answers are objects (None for labels and other formats)."""
        root = spec.root
        if root.kind != "object" or spec.wrapper_key is not None or not root.fields:
            return None
        fields, ranges = [], {}
        for f in root.fields:
            if f.node.kind not in _SCALARS:
                continue
            fields.append(f.key)
            span = _schema_range(f.node)
            if span is not None:
                ranges[f.key] = (*span, "the schema")
            elif f.node.kind in ("integer", "number"):
                span = prompt_range(system_message, f.key)
                if span is not None:
                    ranges[f.key] = (*span, "the system message")
        return cls(fields, ranges) if fields else None

    def count(self, counts: dict, results: Sequence[Any]) -> None:
        """Count a batch's answers into ``counts`` (the call's ``RunStats.fields``).

        A valid answer counts each field's value; an answer that broke the schema counts only its
        numbers against their ranges (a rating of 9 where the schema says 1..5 fails the row).
        """
        if not counts:
            counts.update(new_field_counts(self.fields, self.ranges))
        for r in results:
            if r is None:
                continue
            if r.error is None:
                if isinstance(r.value, dict):
                    count_record(counts, r.value)
            elif self.ranges and r.error.raw and r.error.kind == "schema":
                count_out_of_range(counts, _parsed(r.error.raw))


def _parsed(raw: str) -> dict:
    """The first JSON object of an answer that broke the schema ({} when there is none)."""
    from inferframe.structured.validate import extract_json

    try:
        value = extract_json(raw, expect="object")
    except Exception:  # noqa: BLE001 - not JSON: nothing to count
        return {}
    return value if isinstance(value, dict) else {}
