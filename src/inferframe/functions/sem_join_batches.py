"""sem_join's batched check in rounds: several right rows per request, a cut-off answer split in two and asked again.

A request holds up to ``pairs_per_request`` numbered candidates and its answer is a JSON list of the
numbers that satisfy the predicate. The list is bounded (``maxItems``) so that it fits the output
budget, and ``pairs_per_request`` is lowered to what ``max_tokens`` holds (``fit_pairs``). An
answer that was still cut off (``finish_reason='length'``) or that does not parse is not lost: its
candidates are split in two halves, asked in the next round, down to single candidates. Each round
is one DataFrame job of ordinary AI calls (cache, limits, retries, errors as data).

Failures that remain are counted by ``Failures``: one ``SemanticFailuresWarning`` names the count;
with ``on_error="raise"`` the first one stops the job (``RowFailed``); when more than
``MAX_FAILED_SHARE`` of the calls failed (after at least ``MIN_CALLS``), the job stops with one
``ServiceError`` naming the count and the fix.

Example:
    >>> fit_pairs(8, None), fit_pairs(8, 16), fit_pairs(8, 4)
    (8, 2, 1)
    >>> halves([1, 2, 3, 4, 5])
    [[1, 2, 3], [4, 5]]
"""

from __future__ import annotations

from types import MappingProxyType
import collections
import dataclasses
import math
import warnings
from typing import Any, Callable

import pyarrow as pa

from inferframe.ai.quality import all_yes, warn_low_information
from inferframe.errors import RowFailed, SemanticFailuresWarning, ServiceError, warn_user
from inferframe.expressions.expression import col
from inferframe.functions._sem_global import Calls, frame
from inferframe.functions.sem_join import batch_check
from inferframe.functions.templates import Template
from inferframe.observe.progress import last_run, record_operator
from inferframe.observe.recorder import DriftWarning

# The job stops when more than this share of its model calls failed, once it made at least MIN_CALLS:
# past half, the answers kept are the exception, and a config fault (too small max_tokens, a model that
# cannot answer the format) would fail the rest the same way.
MAX_FAILED_SHARE = 0.5
MIN_CALLS = 10
# Requests of the first round asked before the rest, so that a job failing every call stops early.
PROBE = 16
# Error kinds a smaller request can cure: the answer was cut off, or did not parse / fit the schema.
SPLIT_KINDS = ("length", "schema")
# Output tokens of the answer's frame ``{"matches":[]}`` and of one number with its comma (two digits).
FRAME_TOKENS, TOKENS_PER_PAIR = 10, 3
ANSWER, CANDIDATES = "__sem_join_answer", "__sem_join_candidates"
_FIXES = MappingProxyType({
    "length": "the answers were cut off at max_tokens: raise max_tokens=..., or lower pairs_per_request=...",
    "schema": "the model's answers did not fit the format: use a stronger model (provider=..., model=...), or "
              "plan='nested' (one yes/no per pair)",
})


def fit_pairs(pairs_per_request: int, max_tokens: int | None) -> int:
    """The candidates one request may hold so that its answer (all of them named) fits ``max_tokens``.

    ``max_tokens`` None: no output cap is known (the server's), so ``pairs_per_request`` stands.

    Example:
        >>> fit_pairs(8, 97), fit_pairs(20, 40)
        (8, 10)
    """
    if max_tokens is None:
        return pairs_per_request
    return max(1, min(pairs_per_request, (max_tokens - FRAME_TOKENS) // TOKENS_PER_PAIR))


def halves(ids: list) -> list[list]:
    """``ids`` split into two halves (the first one longer)."""
    mid = math.ceil(len(ids) / 2)
    return [ids[:mid], ids[mid:]]


@dataclasses.dataclass
class Failures:
    """The calls of one semantic operator that failed in the end, by kind; warns once, or stops the job.

    Example:
        >>> f = Failures("sem_join")
        >>> f.add(4, [{"kind": "length", "message": "cut off"}], lost=8)
        >>> f.failed, f.calls, f.summary()
        (1, 5, '1 of 5 model calls failed (length: 1)')
    """

    operator: str
    calls: int = 0
    failed: int = 0
    lost: int = 0
    kinds: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    last: str = ""

    def add(self, ok: int, errors: list[dict], lost: int = 0) -> None:
        """``ok`` calls answered, ``errors`` (their error records) failed, holding ``lost`` pairs between them."""
        self.calls += ok + len(errors)
        self.failed += len(errors)
        self.lost += lost
        for e in errors:
            self.kinds[str(e.get("kind") or "unknown")] += 1
            self.last = str(e.get("message") or "")[:300]

    def summary(self) -> str:
        kinds = ", ".join(f"{k}: {n}" for k, n in self.kinds.most_common())
        return f"{self.failed} of {self.calls} model calls failed ({kinds})"

    def fix(self) -> str:
        top = self.kinds.most_common(1)[0][0] if self.kinds else ""
        return _FIXES.get(top, "see the errors in last_run() and the run report")

    def check(self) -> None:
        """Stop the job (``ServiceError``) when more than ``MAX_FAILED_SHARE`` of at least ``MIN_CALLS`` calls failed."""
        if self.calls >= MIN_CALLS and self.failed > MAX_FAILED_SHARE * self.calls:
            raise ServiceError(
                f"{self.operator} stopped: {self.summary()}, more than {MAX_FAILED_SHARE:.0%} of the calls; its result "
                f"would miss most pairs. Fix: {self.fix()}. Last error: {self.last}")

    def warn(self) -> None:
        """One ``SemanticFailuresWarning`` with the count, where any call failed."""
        if self.failed:
            lost = f"; the {self.lost} pairs they held are left out of the result" if self.lost else \
                "; their pairs are left out of the result"
            warn_user(f"{self.operator}: {self.summary()}{lost}. Fix: {self.fix()}; on_error='raise' stops at the "
                      f"first failure. Last error: {self.last}", SemanticFailuresWarning)


def ask_in_batches(df: Any, left: pa.Table, candidates: list[list[int]], texts: list[str], template: Template,
                   per_request: int, options: dict, label: str) -> tuple[list[tuple[int, int]], dict]:
    """The (left row, right row) pairs the model says satisfy ``template``, asked in rounds of numbered batches.

    Parameters:
        df: any DataFrame (its class builds each round's job).
        left: the left rows (the template's left columns are read).
        candidates: for each left row, the right rows (indices into ``texts``) to check, in order.
        texts: each right row's text as the request shows it.
        template: the join's template.
        per_request: the most candidates one request holds.
        options: the AI call's options (``on_error`` is applied here, so that a cut-off answer is split, not raised).
        label: the operator's name in ``last_run()``, e.g. ``"sem_join.batch[gpt-5-mini]"``.

    Returns the pairs and the counts (``Calls`` fields, ``split`` requests and ``rounds``).
    """
    raise_first = options.get("on_error") == "raise"
    opts = {**options, "on_error": "null", "error_column": True}
    names = template.columns("left")
    pending = [(i, ids[j:j + per_request]) for i, ids in enumerate(candidates) for j in range(0, len(ids), per_request)]
    found: list[tuple[int, int]] = []
    calls, failures = Calls(), Failures("sem_join")
    split = rounds = checked = 0
    try:
        while pending:
            rounds += 1
            again: list[tuple[int, list[int]]] = []
            parts = [pending[:PROBE], pending[PROBE:]] if rounds == 1 else [pending]
            for part in (p for p in parts if p):
                answers, errors = _round(df, left, names, part, texts, template, opts, calls)
                ok, failed, lost = 0, [], 0
                for (i, ids), answer, error in zip(part, answers, errors):
                    if answer is not None:
                        ok += 1
                        checked += len(ids)
                        found += [(i, ids[n - 1]) for n in _numbers(answer, len(ids))]
                    elif error is not None and error.get("kind") in SPLIT_KINDS and len(ids) > 1:
                        ok += 1  # answered, if cut off: its halves are asked next round
                        split += 1
                        again += [(i, h) for h in halves(ids)]
                    else:
                        if raise_first:
                            raise RowFailed.of(error or {"kind": "unknown", "message": "no answer"})
                        failed.append(error or {"kind": "unknown", "message": "no answer"})
                        lost += len(ids)
                failures.add(ok, failed, lost)
                failures.check()
            pending = again
    finally:
        stats = calls.as_dict(failed=failures.failed, split=split, rounds=rounds)
        record_operator(label, stats)  # last_run(): the rounds as one entry
    failures.warn()
    # every candidate named: the answers carry no information (the quality guard's measurement)
    stats["quality"] = warn_low_information(label[label.find("[") + 1:-1] or None, [all_yes(len(found), checked)],
                                            where="sem_join")
    return found, stats


def _round(df: Any, left: pa.Table, names: list[str], part: list[tuple[int, list[int]]], texts: list[str],
           template: Template, options: dict, calls: Calls) -> tuple[list, list]:
    """One job: each request's answer (its numbers, or None) and error record (or None)."""
    size = max(len(ids) for _, ids in part)
    rows = left.select(names).take(pa.array([i for i, _ in part], pa.int64()))
    numbered = ["\n".join(f"{n}. {texts[r]}" for n, r in enumerate(ids, 1)) for _, ids in part]
    table = rows.append_column(CANDIDATES, pa.array(numbered, pa.string()))
    job = frame(df, table).with_column(ANSWER, batch_check(template, CANDIDATES, size, raw=True, **options))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DriftWarning)  # rounds ask different questions by design
        out = job.select(ANSWER, ANSWER + "_error").to_pydict()
    answers = [None if a is None else (a.get("matches") or []) for a in out[ANSWER]]
    calls.count(answers, last_run())
    return answers, out[ANSWER + "_error"]


def _numbers(answer: list, top: int) -> list[int]:
    """The distinct numbers in 1..top, in order of first mention."""
    out: list[int] = []
    for n in answer:
        if n is not None and 1 <= n <= top and n not in out:
            out.append(int(n))
    return out


def expected_calls(n_requests: Callable[[int | None], int | None]) -> Callable[[int | None], str]:
    """The words ``explain()`` shows for the batched check's calls, given a function of the left rows."""
    def calls(rows: int | None) -> str:
        n = n_requests(rows)
        return "calls unknown" if n is None else f"{n} calls, more where an answer is cut off and split"
    return calls
