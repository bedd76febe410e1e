"""sem_join's batched check in rounds: several right rows per request, a cut-off answer split in two and asked again.

A request holds up to ``pairs_per_request`` numbered candidates and its answer is a JSON list of the
numbers that satisfy the predicate. The list is bounded (``maxItems``) so that it fits the output
budget, and ``pairs_per_request`` is lowered to what ``max_tokens`` holds (``fit_pairs``). An
answer that was still cut off (``finish_reason='length'``) or that does not parse is not lost: its
candidates are split in two halves, asked in the next round, down to single candidates. Each round
is one job of ordinary AI calls (cache, limits, retries, errors as data), run by ``rounds.ask``.

The asking is a ``WholeTable`` over the left side whose planner is a ``Batches``: it reads the right
side when it runs. Failures that remain are counted by ``rounds.Calls``: one ``SemanticFailuresWarning``
names the count; with ``on_error="raise"`` the first one stops the job (``RowFailed``); when more than
``rounds.MAX_FAILED_SHARE`` of the calls failed (after at least ``rounds.MIN_CALLS``), the job stops
with one ``ServiceError`` naming the count and the fix.

Example:
    >>> fit_pairs(8, None), fit_pairs(8, 16), fit_pairs(8, 4)
    (8, 2, 1)
    >>> halves([1, 2, 3, 4, 5])
    [[1, 2, 3], [4, 5]]
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pyarrow as pa

from inferframe.errors import RowFailed
from inferframe.observe.progress import record_operator
from inferframe.observe.quality import all_yes, warn_low_information
from inferframe.observe.recorder import DriftWarning
from inferframe.plan.logical import LogicalPlan
from inferframe.plan.semantic.join.names import ANSWER, CANDIDATES, LVEC, RANK, ROW, RROW, RVEC, SCORE, side_text
from inferframe.plan.semantic.rel import Rel
from inferframe.plan.semantic.rounds import Calls, ask, in_memory
from inferframe.plan.whole_table import Runtime, WholeTable

# Requests of the first round asked before the rest, so that a job failing every call stops early.
PROBE = 16
# Error kinds a smaller request can cure: the answer was cut off, or did not parse / fit the schema.
SPLIT_KINDS = ("length", "schema")
# Output tokens of the answer's frame ``{"matches":[]}`` and of one number with its comma (two digits).
FRAME_TOKENS, TOKENS_PER_PAIR = 10, 3


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


@dataclasses.dataclass(frozen=True, eq=False)
class Batches:
    """The batched asking's planner (a ``whole_table.Operator``) over the left side: each left row's candidates
    (every right row, or its ``k`` nearest by embedding), ``per_request`` per request, asked in rounds.

    Parameters:
        right: the right side's plan (read when it runs); ``right_names``: its columns as the join names them.
        k: candidates per left row (None: every right row); ``per_request``: the most candidates a request holds.
        left_columns, right_columns: the template's columns of each side.
        steps: the join's AI steps (``join.node.Steps``): ``round_check``, ``embed``, ``model``, ``raise_first``.
        out_schema: the pairs' columns, left's then right's.
    """

    right: LogicalPlan
    right_names: tuple
    k: int | None
    per_request: int
    left_columns: tuple
    right_columns: tuple
    steps: Any = dataclasses.field(repr=False)
    out_schema: pa.Schema = dataclasses.field(repr=False)

    @property
    def label(self) -> str:
        return f"sem_join.batch[{self.steps.model}]"

    @property
    def note(self) -> str:
        what = "every right row" if self.k is None else f"its {self.k} nearest right rows"
        return f"SemJoinBatches {self.label} per_request={self.per_request} candidates={what}"

    def calls(self, rows: int | None) -> str:
        n = None if rows is None or self.k is None else rows * math.ceil(self.k / self.per_request)
        return "calls unknown" if n is None else f"{n} calls, more where an answer is cut off and split"

    def line(self, input: LogicalPlan, stats: dict | None) -> str:
        return self.note

    def run(self, runtime: Runtime, input: LogicalPlan) -> tuple[pa.Table, dict]:
        """The pairs found, left's columns then right's, and the rounds' counts."""
        lt, rt = runtime.table(input), runtime.table(self.right)
        texts = [side_text(self.right_columns, r) for r in rt.select(list(self.right_columns)).to_pylist()]
        if self.k is None:
            candidates = [list(range(rt.num_rows))] * lt.num_rows
        else:
            candidates = self._nearest_ids(runtime, lt, rt)
        found, stats = self._ask(runtime, lt, candidates, texts)
        lpart = lt.take(pa.array([i for i, _ in found], pa.int64()))
        rpart = rt.take(pa.array([r for _, r in found], pa.int64()))
        return pa.Table.from_arrays([*lpart.columns, *rpart.columns], schema=self.out_schema), stats

    def _nearest_ids(self, runtime: Runtime, lt: pa.Table, rt: pa.Table) -> list[list[int]]:
        """Each left row's ``k`` nearest right rows (their row numbers), nearest first."""
        numbered = lt.append_column(ROW, pa.array(np.arange(lt.num_rows), pa.int64()))
        rnum = rt.append_column(RROW, pa.array(np.arange(rt.num_rows), pa.int64()))
        lv = Rel(in_memory(numbered)).with_column(LVEC, self.steps.embed("left")).select(ROW, LVEC)
        rv = Rel(in_memory(rnum)).with_column(RVEC, self.steps.embed("right")).select(RROW, RVEC)
        near = runtime.table(lv.nearest(rv, LVEC, RVEC, self.k, SCORE, RANK, "right.").select(ROW, RROW, RANK).plan)
        near = near.to_pydict()
        out: list[list[tuple[int, int]]] = [[] for _ in range(lt.num_rows)]
        for row, rrow, rank in zip(near[ROW], near[RROW], near[RANK]):
            out[row].append((rank, rrow))
        return [[r for _, r in sorted(c)] for c in out]

    def _ask(self, runtime: Runtime, left: pa.Table, candidates: list[list[int]],
             texts: list[str]) -> tuple[list[tuple[int, int]], dict]:
        """The (left row, right row) pairs the model says satisfy the predicate, asked in rounds of numbered batches;
        and the counts (``Calls`` fields, ``split`` requests and ``rounds``)."""
        per = self.per_request
        pending = [(i, ids[j:j + per]) for i, ids in enumerate(candidates) for j in range(0, len(ids), per)]
        found: list[tuple[int, int]] = []
        calls = Calls()
        split = rounds = checked = 0
        try:
            while pending:
                rounds += 1
                again: list[tuple[int, list[int]]] = []
                parts = [pending[:PROBE], pending[PROBE:]] if rounds == 1 else [pending]
                for part in (p for p in parts if p):
                    answers, errors = self._round(runtime, left, part, texts, calls)
                    failed, lost = [], 0
                    for (i, ids), answer, error in zip(part, answers, errors):
                        if answer is not None:
                            checked += len(ids)
                            found += [(i, ids[n - 1]) for n in clean_numbers(answer, len(ids))]
                        elif error is not None and error.get("kind") in SPLIT_KINDS and len(ids) > 1:
                            split += 1  # answered, if cut off: its halves are asked next round
                            again += [(i, h) for h in halves(ids)]
                        else:
                            if self.steps.raise_first:
                                raise RowFailed.of(error or {"kind": "unknown", "message": "no answer"})
                            failed.append(error or {"kind": "unknown", "message": "no answer"})
                            lost += len(ids)
                    calls.failures(failed, lost)
                    calls.check("sem_join")
                pending = again
        finally:
            stats = calls.as_dict(split=split, rounds=rounds)
            record_operator(self.label, stats)  # last_run(): the rounds as one entry
        calls.warn("sem_join", f"the {calls.lost} pairs they held are left out of the result")
        # every candidate named: the answers carry no information (the quality guard's measurement)
        stats["quality"] = warn_low_information(self.steps.model or None, [all_yes(len(found), checked)],
                                                where="sem_join")
        return found, stats

    def _round(self, runtime: Runtime, left: pa.Table, part: list[tuple[int, list[int]]], texts: list[str],
               calls: Calls) -> tuple[list, list]:
        """One job: each request's answer (its numbers, or None) and error record (or None)."""
        size = max(len(ids) for _, ids in part)
        rows = left.select(list(self.left_columns)).take(pa.array([i for i, _ in part], pa.int64()))
        numbered = ["\n".join(f"{n}. {texts[r]}" for n, r in enumerate(ids, 1)) for _, ids in part]
        table = rows.append_column(CANDIDATES, pa.array(numbered, pa.string()))
        answers, errors = ask(runtime, table, ANSWER, self.steps.round_check(size), calls, errors=True,
                              quiet=(DriftWarning,))  # as sem_join's rounds always were: only drift is silenced
        return [None if a is None else (a.get("matches") or []) for a in answers], errors


def clean_numbers(numbers: list | None, top: int) -> list[int] | None:
    """The distinct numbers in 1..top, in order of first mention; null stays null (a failed request).

    Example:
        >>> clean_numbers([3, 1, 3, 9, None], top=4), clean_numbers(None, top=4)
        ([3, 1], None)
    """
    if numbers is None:
        return None
    out: list[int] = []
    for n in numbers:
        if n is not None and 1 <= n <= top and n not in out:
            out.append(int(n))
    return out


def batched(node: Any, left: LogicalPlan, right: LogicalPlan, k: int | None) -> WholeTable:
    """The batched asking over ``node``'s (a ``SemJoin``'s) sides: a ``WholeTable`` over ``left`` holding a ``Batches``."""
    s = node.spec
    schema = pa.schema([*left.schema, *(pa.field(n, t) for n, t in zip(s.right_names, right.schema.types))])
    op = Batches(right, tuple(s.right_names), k, s.pairs_per_request, tuple(s.left_columns), tuple(s.right_columns),
                 node.steps, schema)
    return WholeTable(left, schema, op)
