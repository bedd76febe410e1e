"""The most rows a physical operator can give, where the plan alone tells (in-memory sources and what keeps or cuts rows).

A runner uses it to size work it must set up before it sees a row: the Ray runner runs an AI call over
a few known rows as tasks on its already-started workers rather than starting an actor pool for it.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.plan.physical import plan_physical
    >>> rows_at_most(plan_physical(ifr.from_pydict({"a": [1, 2, 3]}).where(ifr.col("a") > 1)._plan))
    3
    >>> rows_at_most(plan_physical(ifr.from_pydict({"a": [[1, 2]]}).explode("a")._plan)) is None
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import MappingProxyType

from inferframe.plan import physical as pp

# Exchanges that give at most their input's rows (an aggregation over the whole table: one row, even of none).
_KEEPS_ROWS = ("sort", "aggregate", "distinct", "repartition")


def rows_at_most(op: pp.PhysicalOp, known: Callable[[pp.PhysicalOp], int | None] = lambda op: None) -> int | None:
    """An upper bound on ``op``'s rows; None where it depends on data the plan does not hold (files, explode, any
    ``map_batches`` function, nearest). ``known``: the rows of an operator the runner has already read (an Arrow
    stream the driver read into the cluster), else None."""
    found = known(op)
    if found is not None:
        return found
    bounds = [rows_at_most(i, known) for i in op.inputs]
    return pp.dispatch(_BOUND, op)(op, bounds)


def _exchange(op: pp.Exchange, bounds: list) -> int | None:
    if None in bounds:
        return None
    if op.kind in _KEEPS_ROWS:
        return max(bounds[0], 1) if op.kind == "aggregate" else bounds[0]
    if op.kind == "join":
        return bounds[0] if op.spec.how in ("semi", "anti") else max(bounds[0], math.prod(bounds))
    return None


def _limit(op: pp.Limit, bounds: list) -> int:
    return op.n if bounds[0] is None else min(op.n, bounds[0])


def _union(op: pp.Union, bounds: list) -> int | None:
    return None if None in bounds else sum(bounds)


def _same(op: pp.PhysicalOp, bounds: list) -> int | None:
    return bounds[0]


def _unknown(op: pp.PhysicalOp, bounds: list) -> None:
    return None


# The nearest class of each operator picks its rule: projections, filters, rebatching and UDF stages keep their
# input's rows; any other per-batch map (explode, map_batches) and a file source may give any number.
_BOUND = MappingProxyType({
    pp.ReadTable: lambda op, bounds: op.table.num_rows, pp.ReadFiles: _unknown, pp.Map: _unknown,
    pp.Project: _same, pp.Filter: _same, pp.Rebatch: _same, pp.UDFStage: _same, pp.Limit: _limit,
    pp.Union: _union, pp.Exchange: _exchange,
})
