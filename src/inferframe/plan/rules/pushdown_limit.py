"""Move limits toward the scan so fewer rows are read and fewer UDF calls are made."""

from __future__ import annotations

from inferframe.plan.logical import IntoBatches, Limit, Project, Source


def rule(plan):
    if not isinstance(plan, Limit):
        return None
    child = plan.input
    if isinstance(child, Limit):
        return Limit(child.input, min(plan.n, child.n))
    if isinstance(child, (Project, IntoBatches)):
        # Row-wise 1:1 operators: limiting first gives the same rows and skips work.
        return child.with_children((Limit(child.input, plan.n),))
    if isinstance(child, Source):
        if child.limit is not None and child.limit <= plan.n:
            return child
        return Source(child.source, child.source_schema, child.columns, child.filter, plan.n)
    return None
