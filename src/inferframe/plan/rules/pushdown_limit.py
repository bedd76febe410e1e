"""Move limits toward the scan so fewer rows are read and fewer UDF calls are made; tell a filter by an AI predicate its limit.

sem_filter's kept-errors plan (``error_column=``, the default) asks the model in a projection and keeps
a row whose answer is yes or whose call failed (``kept_errors``): a limit above it is told to that
projection's call, which counts a kept failure as a pass.
"""

from __future__ import annotations

import dataclasses

from inferframe.expressions.nodes import Node, UDFCall
from inferframe.plan.ai_nodes import ai_call_of
from inferframe.plan.logical import Filter, IntoBatches, Limit, Project, Source
from inferframe.plan.rules.kept_errors import limited_kept_errors


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
        if predicate is None:
            below = limited_kept_errors(child, plan.n, limited_call)
            return None if below is None else Limit(below, plan.n)
        return Limit(Filter(child.input, predicate), plan.n)
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
    new = limited_call(call, n) if call is not None else None
    if new is None:
        return None
    return predicate.transform_up(lambda node: new if isinstance(node, UDFCall) and node.udf is call.udf else node)


def limited_call(call: UDFCall, n: int) -> UDFCall | None:
    """The AI call told to stop after ``n`` rows pass (its config's ``with_limit``), its batches one at a time, in
    order; None if it takes no limit (or already has one of at most ``n``)."""
    ai = getattr(call.udf, "call", None)
    config = ai.config if ai is not None else None
    if not hasattr(config, "with_limit") or (config.limit is not None and config.limit <= n):
        return None
    args = (config.with_limit(n), *ai.args[1:])
    ai = dataclasses.replace(ai, args=args, sizing=dataclasses.replace(ai.sizing, window=1))
    spec = call.udf
    owner = dataclasses.replace(spec.owner, args=args) if spec.owner is not None else None
    spec = dataclasses.replace(spec, call=ai, owner=owner, max_concurrency=1)
    return UDFCall(spec, call.args)
