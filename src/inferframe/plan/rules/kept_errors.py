"""sem_filter's kept-errors plan, recognised by the rules: a filter keeping the rows an AI projection said yes to or failed on.

``sem_filter(error_column=...)`` (the default) asks the model in a projection, the call's value and
error as columns ``<name>`` and ``<name>_error``, then keeps the rows where
``fill_null(<name>, False) or not_null(<name>_error)``. The filter reads the call's output, so the
limit pushdown cannot hand its limit to a predicate; this module finds the call under it so the
limit goes to that call (its operator counts a kept failure as a pass: ``keep_errors``).

Example:
    >>> import inferframe as ifr
    >>> df = ifr.from_pydict({"r": ["a"]}).sem_filter("{r} is fine", error_column=True, model="gemma-3-270m")
    >>> from inferframe.plan.optimizer import optimize
    >>> f = optimize(df._plan).input
    >>> kept_name(f.predicate)
    'sem_filter'
"""

from __future__ import annotations

from typing import Callable

from inferframe.expressions.nodes import Alias, Call, Col, Lit, Node, UDFCall
from inferframe.plan.ai_nodes import is_ai_call
from inferframe.plan.logical import Filter, LogicalPlan, Project


def kept_name(predicate: Node) -> str | None:
    """``<name>`` where ``predicate`` is ``or(fill_null(col(<name>), False), not_null(col(<name>_error)))``, else None."""
    if not (isinstance(predicate, Call) and predicate.function == "or" and len(predicate.args) == 2):
        return None
    value, error = predicate.args
    if not (isinstance(value, Call) and value.function == "fill_null" and len(value.args) == 2
            and isinstance(value.args[0], Col) and isinstance(value.args[1], Lit) and value.args[1].value is False):
        return None
    if not (isinstance(error, Call) and error.function == "not_null" and len(error.args) == 1
            and isinstance(error.args[0], Col) and error.args[0].column == value.args[0].column + "_error"):
        return None
    return value.args[0].column


def _field_of(expr: Node | None, field: str) -> str | None:
    """The column ``expr`` takes ``field`` of (``struct.get(col(S), field=...) as ...``), else None."""
    node = expr.child if isinstance(expr, Alias) else expr
    if (isinstance(node, Call) and node.function == "struct.get" and dict(node.params).get("field") == field
            and len(node.args) == 1 and isinstance(node.args[0], Col)):
        return node.args[0].column
    return None


def limited_kept_errors(plan: Filter, n: int, limit: Callable[[UDFCall, int], UDFCall | None]) -> LogicalPlan | None:
    """``plan`` (a kept-errors filter) with its AI call told to stop once ``n`` rows are kept; None if it is not one.

    ``limit(call, n)``: the AI call limited (``pushdown_limit.limited_call``), None if it takes no limit.
    """
    name = kept_name(plan.predicate)
    fields = plan.input
    if name is None or not isinstance(fields, Project) or not isinstance(fields.input, Project):
        return None
    exprs = {e.name(): e for e in fields.exprs}
    stage = _field_of(exprs.get(name), "value")
    if stage is None or _field_of(exprs.get(name + "_error"), "error") != stage:
        return None
    calls = fields.input
    new, found = [], False
    for e in calls.exprs:
        call = e.child if isinstance(e, Alias) and e.name() == stage else None
        config = getattr(getattr(call.udf, "call", None), "config", None) if is_ai_call(call) else None
        if getattr(config, "keep_errors", False):
            limited = limit(call, n)
            if limited is None:
                return None
            e, found = Alias(limited, stage), True
        new.append(e)
    if not found:
        return None
    return Filter(Project(Project(calls.input, tuple(new)), fields.exprs), plan.predicate)


def without_kept_errors(plan: LogicalPlan) -> LogicalPlan | None:
    """A kept-errors filter taken out with its AI call (the call's columns null): a superset of its rows that asks
    no model, for estimates of the calls after it; None if ``plan`` is not one."""
    if not isinstance(plan, Filter) or kept_name(plan.predicate) is None:
        return None
    fields = plan.input
    if not isinstance(fields, Project) or not isinstance(fields.input, Project):
        return None
    calls = fields.input
    new, found = [], False
    for e in calls.exprs:
        if isinstance(e, Alias) and is_ai_call(e.child) and getattr(getattr(e.child.udf, "call", None), "config", None) \
                is not None and getattr(e.child.udf.call.config, "keep_errors", False):
            e, found = Alias(Lit(None, calls.schema.field(e.name()).type), e.name()), True
        new.append(e)
    return Project(Project(calls.input, tuple(new)), fields.exprs) if found else None
