"""The logical plans a ``SemJoin`` (``plan.semantic.join``) runs once its plan is chosen: for each of
"projection", "nested", "blocking", "batched" and "blocking_batched", the plan built from ordinary nodes
(``Rel``), the join's AI steps, its counted checks (``guard``) and its batched asking (``batches``), over
the working column names of ``names``; and the k sample that picks blocking's number of candidates."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa

from inferframe.errors import warn_user
from inferframe.expressions.expression import col, lit
from inferframe.plan import logical as lp
from inferframe.plan.semantic.join.batches import batched
from inferframe.plan.semantic.join.guard import Tally, guarded
from inferframe.plan.semantic.join.names import CHECK, DEFAULT_K, KEY, LVEC, ONE, RANK, ROW, RVEC, SCORE
from inferframe.plan.semantic.rel import Rel
from inferframe.plan.whole_table import Runtime


def build_plan(node: Any, chosen: str, k: int | None) -> lp.LogicalPlan:
    """The chosen plan over ``node``'s sides (a ``SemJoin``), with left's columns then right's (renamed as ``join`` does)."""
    s = node.spec
    left, right = Rel(node.left), Rel(node.right)
    if chosen == "projection":
        return _projection(node, left, right).plan
    if chosen == "nested":
        return _checked(node, _cross(left, right, s.prefix), left.names).plan
    k = s.k or k
    if chosen == "blocking":
        return _checked(node, _blocked(node, left, right, k), left.names).plan
    return _batched(node, left, right, None if chosen == "batched" else k).plan


def _projection(node: Any, left: Rel, right: Rel) -> Rel:
    """Each side's property as a key column, then a hash join on it (equality, or "different" through explode)."""
    s, steps = node.spec, node.steps
    values = (None if s.property_values is None else list(s.property_values))
    sides = []
    tally = Tally(parts=2)  # both sides' failures: one warning
    for r, side in ((left, "left"), (right, "right")):
        asked = r.with_column(KEY, steps.prop(side, s.on_property, values))
        if KEY + "_error" in asked.names:
            asked = Rel(guarded(asked.select(*r.names, KEY, KEY + "_error").plan, KEY, r.names, "sem_join.property",
                                tally))
        sides.append(asked.with_column(KEY, steps.key(values)).select(*r.names, KEY))
    lk, rk = sides
    if s.relation == "different":
        # Each left row's key becomes the list of the other values; one row per value, then equality.
        others = {v: [w for w in values if w != v] for v in values}
        expr = lit(others[values[-1]])
        for v in reversed(values[:-1]):
            expr = (col(KEY) == lit(v)).if_else(lit(others[v]), expr)
        lk = lk.with_column(KEY, expr).explode(KEY)
    return lk.join(rk, KEY, s.prefix).exclude(KEY)


def _cross(left: Rel, right: Rel, prefix: str) -> Rel:
    """Every pair of rows: a hash join on a constant key."""
    return left.with_column(ONE, lit(1)).join(right.with_column(ONE, lit(1)), ONE, prefix).exclude(ONE)


def _blocked(node: Any, left: Rel, right: Rel, k: int) -> Rel:
    """The ``k`` right rows nearest to each left row by their sides' texts' embeddings (score and rank kept)."""
    lv = left.with_column(LVEC, node.steps.embed("left")).select(*left.names, LVEC)
    rv = right.with_column(RVEC, node.steps.embed("right")).select(*right.names, RVEC)
    return lv.nearest(rv, LVEC, RVEC, k, SCORE, RANK, node.spec.prefix)


def _checked(node: Any, pairs: Rel, left_names: list[str], keep: tuple = (), guard: bool = True) -> Rel:
    """The pairs the model says yes to, with left's and right's columns (and ``keep``).

    With ``guard``, the checks run as one job that a ``WholeTable`` collects and counts: failed checks give one
    ``SemanticFailuresWarning``, and more than half of them (of at least 10) a ``ServiceError``.
    """
    checked = pairs.with_column(CHECK, node.steps.check)
    names = [*left_names, *node.spec.right_names, *keep]
    if guard and CHECK + "_error" in checked.names:  # error_column=False: nothing to count
        checked = Rel(guarded(checked.select(*names, CHECK, CHECK + "_error").plan, CHECK, names, "sem_join.check",
                              Tally(parts=1)))
    return checked.where(col(CHECK) == lit("yes")).select(*names)


def _batched(node: Any, left: Rel, right: Rel, k: int | None) -> Rel:
    """Each left row's candidates (every right row, or blocking's ``k`` nearest), ``pairs_per_request`` numbered
    ones per request, asked in rounds: a ``WholeTable`` over left that reads right when it runs (``batches``)."""
    return Rel(batched(node, left.plan, right.plan, k))


def choose_k(node: Any, runtime: Runtime, n_right: int) -> tuple[int, float]:
    """The k whose nearest candidates hold ``target_recall`` of every sampled row's matches (all its pairs checked).

    Each sampled left row with a match needs some k to reach the target on its own pairs; the
    largest of these is taken, so that rows outside the sample (which vary as much) reach it too.
    Returns k and the share of all the sample's matches within it.
    """
    s = node.spec
    table = runtime.table(node.left)
    rng = np.random.default_rng(s.seed)
    take = np.sort(rng.choice(table.num_rows, size=min(s.sample_size, table.num_rows), replace=False))
    rows = table.take(pa.array(take, pa.int64()))
    rows = rows.append_column(ROW, pa.array(np.arange(rows.num_rows), pa.int64()))
    sample = Rel(lp.Source(lp.InMemory(rows), rows.schema))
    ranked = _blocked(node, sample, Rel(node.right), max(n_right, 1))
    found = runtime.table(_checked(node, ranked, sample.names, keep=(RANK,), guard=False).plan).to_pydict()
    if not found[RANK]:
        warn_user(f"sem_join(): the model found no match among the {len(take)} sampled left rows' pairs; "
                  f"blocking uses k={min(n_right, DEFAULT_K)}. Pass k=... or a larger sample_size=.", UserWarning)
        return max(1, min(n_right, DEFAULT_K)), 0.0
    per_row: dict[int, list[int]] = {}
    for row, rank in zip(found[ROW], found[RANK]):
        per_row.setdefault(row, []).append(rank)
    k = max(sorted(r)[max(0, math.ceil(s.target_recall * len(r)) - 1)] for r in per_row.values())
    ranks = found[RANK]
    return int(k), sum(r <= k for r in ranks) / len(ranks)
