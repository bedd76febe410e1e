"""Run the optimizer rules over a logical plan until nothing changes."""

from __future__ import annotations

from typing import Callable

from inferframe.plan.logical import LogicalPlan
from inferframe.plan.rules import (fuse_projections, order_predicates, pushdown_filter, pushdown_limit,
                                   pushdown_projection)

Rule = Callable[[LogicalPlan], LogicalPlan | None]

# Each rule looks at one node and returns a replacement, or None to leave it.
RULES: tuple[Rule, ...] = (
    order_predicates.rule,
    pushdown_filter.rule,
    pushdown_limit.rule,
    fuse_projections.rule,
)


def _rewrite(plan: LogicalPlan, rule: Rule) -> tuple[LogicalPlan, bool]:
    changed = False
    out = rule(plan)
    if out is not None:
        plan, changed = out, True
    kids = plan.children()
    if kids:
        new_kids = []
        for k in kids:
            nk, c = _rewrite(k, rule)
            new_kids.append(nk)
            changed |= c
        if changed:
            plan = plan.with_children(tuple(new_kids))
    return plan, changed


def optimize(plan: LogicalPlan, max_passes: int = 20) -> LogicalPlan:
    """Apply every rule to a fixpoint, then prune unused columns down to the scans.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"a": [1, 2], "b": [3, 4]}).select("a").limit(1)
        >>> print(optimize(df._plan).tree())
        * Project [col(a)]
          * InMemory rows=2 columns=[a] limit=1
    """
    for _ in range(max_passes):
        changed = False
        for rule in RULES:
            plan, c = _rewrite(plan, rule)
            changed |= c
        if not changed:
            break
    return pushdown_projection.prune(plan)
