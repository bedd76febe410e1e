"""Fuse two adjacent projections into one, substituting the inner expressions."""

from __future__ import annotations

from collections import Counter

from inferframe.expressions.nodes import Alias, Col, Node, contains_udf
from inferframe.plan.logical import Project


def rule(plan):
    if not (isinstance(plan, Project) and isinstance(plan.input, Project)):
        return None
    inner = plan.input
    by_name = {e.name(): e for e in inner.exprs}
    uses = Counter(c for e in plan.exprs for n in e.walk() if isinstance(n, Col) for c in [n.column])
    # Substituting a UDF used twice would call it twice per row: keep those projections apart.
    for name, count in uses.items():
        if count > 1 and contains_udf(by_name[name]):
            return None

    def substitute(node: Node) -> Node:
        if isinstance(node, Col):
            src = by_name[node.column]
            return src.child if isinstance(src, Alias) else src
        return node

    fused = []
    for e in plan.exprs:
        new = e.transform_up(substitute)
        if new.name() != e.name():
            new = Alias(new, e.name())
        fused.append(new)
    return Project(inner.input, tuple(fused))
