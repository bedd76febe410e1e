"""Cheap predicates before expensive ones: a filter's conjuncts run cheapest first, each on the rows the cheaper ones kept.

A filter ``and(sem_filter(...), stars > 3)`` (or two ``where`` calls in any order, which the filter
pushdown merges into one) used to evaluate every conjunct on every row: the model answered rows the
relational test then dropped. This rule splits the conjunction into a stack of filters, the
cheapest innermost, so each costlier test sees only the rows that passed the cheaper ones; the
relational part then moves on toward the scan (``pushdown_filter``).

Cost ranks, cheapest first: no function call (Arrow compute), a Python UDF, an AI call answered
in this process or by the embedded server, an AI call to any other server; ties keep the user's
order. Dropping rows before a test never changes which rows pass a conjunction; a row that fails
a cheap conjunct simply is not asked about (its AI answer was never needed).

Example:
    >>> import inferframe as ifr
    >>> from inferframe import col
    >>> from inferframe.plan.optimizer import optimize
    >>> f = ifr.func(lambda x: x > 1, return_dtype=ifr.DataType.bool())
    >>> plan = optimize(ifr.from_pydict({"a": [1, 2], "b": [3, 4]}).where(f(col("a")) & (col("b") < 4))._plan)
    >>> [cost_rank(plan.predicate), cost_rank(plan.input.predicate)]  # the UDF's filter over the relational one
    [1, 0]
"""

from __future__ import annotations

from inferframe.expressions.nodes import Call, Node, UDFCall
from inferframe.plan.ai_nodes import is_ai_call
from inferframe.plan.logical import Filter


def conjuncts(pred: Node) -> list[Node]:
    """The terms of a conjunction, flattened (``and(and(a, b), c)`` -> ``[a, b, c]``)."""
    if isinstance(pred, Call) and pred.function == "and":
        return [t for a in pred.args for t in conjuncts(a)]
    return [pred]


def cost_rank(pred: Node) -> int:
    """0: no call; 1: a Python UDF; 2: an AI call answered on this machine; 3: an AI call to another server."""
    rank = 0
    for n in pred.walk():
        if is_ai_call(n):
            model = getattr(n.udf.call, "model", None)
            here = model is None or model.in_process or model.caps.local
            rank = max(rank, 2 if here else 3)
        elif isinstance(n, UDFCall):
            rank = max(rank, 1)
    return rank


def conjunction(terms: list[Node]) -> Node:
    """The terms joined by ``and`` (one term: itself)."""
    out = terms[0]
    for t in terms[1:]:
        out = Call("and", (out, t))
    return out


def rule(plan):
    if not isinstance(plan, Filter):
        return None
    terms = conjuncts(plan.predicate)
    if len(terms) < 2:
        return None
    ranks = [cost_rank(t) for t in terms]
    if len(set(ranks)) < 2:  # nothing to put first
        return None
    order = sorted(range(len(terms)), key=lambda i: ranks[i])  # stable: ties keep the user's order
    # Group equal ranks into one filter each, cheapest innermost.
    node = plan.input
    i = 0
    while i < len(order):
        j = i
        while j < len(order) and ranks[order[j]] == ranks[order[i]]:
            j += 1
        node = Filter(node, conjunction([terms[k] for k in order[i:j]]))
        i = j
    return node
