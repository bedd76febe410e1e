"""Move limits toward the scan so fewer rows are read and fewer UDF calls are made; tell a filter by an AI predicate its limit."""

from __future__ import annotations

import dataclasses

from inferframe.expressions.nodes import Node, UDFCall
from inferframe.plan.ai_nodes import ai_call_of
from inferframe.plan.logical import Filter, IntoBatches, Limit, Project, Source


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
    if isinstance(child, Filter):
        predicate = limited_predicate(child.predicate, plan.n)
        return None if predicate is None else Limit(Filter(child.input, predicate), plan.n)
    return None


def limited_predicate(predicate: Node, n: int) -> Node | None:
    """The predicate with its AI call told to stop after ``n`` rows pass (its config's ``with_limit``); None if it takes none.

    The call's batches then go one at a time, in order, so the rows that passed before are known.

    Example:
        >>> import inferframe as ifr
        >>> limited_predicate((ifr.col("a") > 1)._node, 5) is None
        True
    """
    call = ai_call_of(predicate)
    ai = getattr(call.udf, "call", None) if call is not None else None
    config = ai.config if ai is not None else None
    if not hasattr(config, "with_limit") or (config.limit is not None and config.limit <= n):
        return None
    args = (config.with_limit(n), *ai.args[1:])
    ai = dataclasses.replace(ai, args=args, sizing=dataclasses.replace(ai.sizing, window=1))
    spec = call.udf
    owner = dataclasses.replace(spec.owner, args=args) if spec.owner is not None else None
    spec = dataclasses.replace(spec, call=ai, owner=owner, max_concurrency=1)
    new = UDFCall(spec, call.args)
    return predicate.transform_up(lambda node: new if isinstance(node, UDFCall) and node.udf is call.udf else node)
