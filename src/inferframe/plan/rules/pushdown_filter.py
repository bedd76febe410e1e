"""Move filters toward the scan: below projections, sorts and the left side of nearest(), and into Parquet scans."""

from __future__ import annotations

from inferframe.expressions.evaluate import to_pyarrow_filter
from inferframe.expressions.nodes import Call, Col, Node, contains_udf
from inferframe.plan.logical import Filter, InMemory, Nearest, Project, Sort, Source, is_passthrough


def rule(plan):
    if not isinstance(plan, Filter) or contains_udf(plan.predicate):
        return None
    child = plan.input
    if isinstance(child, Filter):
        return Filter(child.input, Call("and", (child.predicate, plan.predicate)))
    if isinstance(child, Sort):
        return Sort(Filter(child.input, plan.predicate), child.keys, child.descending, child.nulls_first)
    if isinstance(child, Project):
        renames = {e.name(): is_passthrough(e) for e in child.exprs}
        needed = plan.predicate.referenced_columns()
        if all(renames.get(c) for c in needed):
            def rename(node: Node) -> Node:
                return Col(renames[node.column]) if isinstance(node, Col) else node

            return Project(Filter(child.input, plan.predicate.transform_up(rename)), child.exprs)
        return None
    if isinstance(child, Nearest) and plan.predicate.referenced_columns() <= set(child.left.schema.names):
        # A left row's matches depend on that row alone, so dropping it before the search drops exactly its matches.
        return child.with_children((Filter(child.left, plan.predicate), child.right))
    if isinstance(child, Source) and not isinstance(child.source, InMemory) and child.limit is None:
        if child.source.format == "parquet" and to_pyarrow_filter(plan.predicate) is not None:
            pred = plan.predicate if child.filter is None else Call("and", (child.filter, plan.predicate))
            return Source(child.source, child.source_schema, child.columns, pred, None)
    return None
