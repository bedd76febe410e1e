"""Prune columns nobody reads, down to the scan, so Parquet reads only what is needed."""

from __future__ import annotations

from inferframe.plan.logical import (
    Aggregate, Explode, Filter, IntoBatches, Limit, LogicalPlan, Nearest, Project, Repartition, Sort, Source,
)


def prune(plan: LogicalPlan, required: set[str] | None = None) -> LogicalPlan:
    """Return ``plan`` reading only the columns in ``required`` (None: all of its output)."""
    if isinstance(plan, Source):
        if required is None:
            return plan
        keep = tuple(n for n in plan.schema.names if n in required)
        if plan.filter is not None and keep == tuple(plan.schema.names):
            return plan
        if keep == tuple(plan.schema.names):
            return plan
        return Source(plan.source, plan.source_schema, keep, plan.filter, plan.limit)
    if isinstance(plan, Project):
        exprs = plan.exprs if required is None else tuple(e for e in plan.exprs if e.name() in required) or plan.exprs[:1]
        needed = set().union(*(e.referenced_columns() for e in exprs)) if exprs else set()
        return Project(prune(plan.input, needed), exprs)
    if isinstance(plan, Filter):
        need = None if required is None else required | plan.predicate.referenced_columns()
        return Filter(prune(plan.input, need), plan.predicate)
    if isinstance(plan, (Limit, IntoBatches)):
        return plan.with_children((prune(plan.input, required),))
    if isinstance(plan, Sort):
        need = None if required is None else required | set(plan.keys)
        return plan.with_children((prune(plan.input, need),))
    if isinstance(plan, Repartition):
        need = None if required is None else required | set(plan.by)
        return plan.with_children((prune(plan.input, need),))
    if isinstance(plan, Aggregate):
        need = set(plan.group_by) | {c for _, c, _ in plan.aggs}
        return plan.with_children((prune(plan.input, need),))
    if isinstance(plan, Explode):
        need = None if required is None else required | set(plan.columns)
        return plan.with_children((prune(plan.input, need),))
    if isinstance(plan, Nearest) and required is not None:
        return plan.with_children(_nearest_inputs(plan, required))
    # Distinct, Join and Concat need every input column to keep their meaning.
    return plan.with_children(tuple(prune(c, None) for c in plan.children()))


def _nearest_inputs(plan: Nearest, required: set[str]) -> tuple[LogicalPlan, LogicalPlan]:
    """Both sides of a nearest() pruned to the columns asked for, plus the vector columns."""
    clashes = set(plan.right.schema.names)
    # A left column named like a right one stays: dropping it would drop the prefix from the right one's name.
    left = {n for n in plan.left.schema.names if n in required or n in clashes} | {plan.on}
    right = {n for out, n in zip(plan.right_names(), plan.right.schema.names) if out in required} | {plan.other_on}
    return prune(plan.left, left), prune(plan.right, right)
