"""Move filters toward the scan: below projections, sorts, joins and the left side of nearest(), and into Parquet scans.

Through a join, each conjunct that reads one side only goes to that side where the join allows it
(left: inner, left, semi and anti joins; right: inner and right joins), a semantic or UDF test
included: it then asks about each input row once, before the join pairs it with others (the
pairs of a semantic join grow as the product of its sides).
"""

from __future__ import annotations

from inferframe.expressions.evaluate import to_pyarrow_filter
from inferframe.expressions.nodes import Alias, Call, Col, Node, contains_udf
from inferframe.plan.logical import Filter, InMemory, Join, Nearest, Project, Sort, Source, is_passthrough
from inferframe.plan.rules.order_predicates import conjuncts, conjunction

_LEFT_SIDE = frozenset(("inner", "left", "semi", "anti"))
_RIGHT_SIDE = frozenset(("inner", "right"))


def _through_join(plan: Filter, join: Join):
    """The filter's one-sided conjuncts moved below ``join``; None when none can move."""
    left_names = set(join.left.schema.names)
    right_of = {}  # output name -> the right input's name (keys are the left's columns)
    for f in join.right.schema:
        if f.name not in join.right_on:
            right_of[join.prefix + f.name if f.name in left_names else f.name] = f.name
    left, right, stay = [], [], []
    for term in conjuncts(plan.predicate):
        cols = term.referenced_columns()
        if join.how in _LEFT_SIDE and cols <= left_names:
            left.append(term)
        elif join.how in _RIGHT_SIDE and cols and cols <= right_of.keys():
            rename = {c: right_of[c] for c in cols}
            right.append(term.transform_up(lambda n: Col(rename[n.column]) if isinstance(n, Col) else n))
        else:
            stay.append(term)
    if not left and not right:
        return None
    moved = join.with_children((Filter(join.left, conjunction(left)) if left else join.left,
                                Filter(join.right, conjunction(right)) if right else join.right))
    return Filter(moved, conjunction(stay)) if stay else moved


def rule(plan):
    if not isinstance(plan, Filter):
        return None
    child = plan.input
    if isinstance(child, Join):
        return _through_join(plan, child)
    if isinstance(child, Filter) and isinstance(child.input, Join):
        # Filters commute: one that can pass the join goes on past a filter that stays above it.
        moved = _through_join(Filter(child.input, plan.predicate), child.input)
        if moved is not None:
            return Filter(moved, child.predicate)
    if contains_udf(plan.predicate):
        return None
    if isinstance(child, Filter):
        return Filter(child.input, Call("and", (child.predicate, plan.predicate)))
    if isinstance(child, Sort):
        return Sort(Filter(child.input, plan.predicate), child.keys, child.descending, child.nulls_first)
    if isinstance(child, Project):
        # Each conjunct that reads only columns the projection passes through goes below it; one that reads a
        # computed column (sem_filter's kept-errors test of its AI projection's answer) stays. So a cheap test
        # written after sem_filter(...) runs before the model is asked.
        # Beside a model call, a column the projection computes without one (Arrow) is read by its expression.
        inline = any(contains_udf(e) for e in child.exprs)
        defs: dict[str, Node] = {}
        for e in child.exprs:
            source = is_passthrough(e)
            if source:
                defs[e.name()] = Col(source)
            elif inline and not contains_udf(e):
                defs[e.name()] = e.child if isinstance(e, Alias) else e
        move, stay = [], []
        for term in conjuncts(plan.predicate):
            (move if all(c in defs for c in term.referenced_columns()) else stay).append(term)
        if not move:
            return None

        def rename(node: Node) -> Node:
            return defs[node.column] if isinstance(node, Col) else node

        below = Project(Filter(child.input, conjunction(move).transform_up(rename)), child.exprs)
        return Filter(below, conjunction(stay)) if stay else below
    if isinstance(child, Nearest) and plan.predicate.referenced_columns() <= set(child.left.schema.names):
        # A left row's matches depend on that row alone, so dropping it before the search drops exactly its matches.
        return child.with_children((Filter(child.left, plan.predicate), child.right))
    if isinstance(child, Source) and not isinstance(child.source, InMemory) and child.limit is None:
        if child.source.format == "parquet" and to_pyarrow_filter(plan.predicate) is not None:
            pred = plan.predicate if child.filter is None else Call("and", (child.filter, plan.predicate))
            return Source(child.source, child.source_schema, child.columns, pred, None)
    return None
