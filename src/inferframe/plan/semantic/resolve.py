"""A plan made runnable: its semantic nodes planned and its whole-table operators computed, innermost first.

Statistics a plan choice needs (row counts, samples) and whole-table computations are gathered here,
when a job runs, through the ``Runtime`` the dataframe layer passes in; each node does this once, its
result kept on the node (``whole_table.kept``), the runtime's ``once`` making other threads wait for it.

Example:
    >>> import inferframe as ifr
    >>> plan = ifr.from_pydict({"a": [1]})._plan
    >>> resolve(plan, None) is plan   # nothing semantic: the plan itself
    True
"""

from __future__ import annotations

from inferframe.plan.logical import InMemory, LogicalPlan, Source
from inferframe.plan.whole_table import Planned, Runtime, WholeTable, keep, kept


def resolve(plan: LogicalPlan, runtime: Runtime) -> LogicalPlan:
    """``plan`` with every ``Planned`` node (``SemJoin``) replaced by its chosen plan and every ``WholeTable`` by its computed rows.

    Parameters:
        plan: a logical plan (before optimization: an operator reads its input as the user built it).
        runtime: runs the sub-jobs (counts, samples, whole-table computations); see ``whole_table.Runtime``.
    """
    if isinstance(plan, Planned):
        return resolve(planned(plan, runtime)["plan"], runtime)
    if isinstance(plan, WholeTable):
        if kept(plan) is None:
            runtime.once(plan.key, lambda: _compute(plan, runtime))
        table = kept(plan)["table"]
        return Source(InMemory(table), table.schema)
    kids = plan.children()
    new = tuple(resolve(k, runtime) for k in kids)
    return plan if all(a is b for a, b in zip(new, kids)) else plan.with_children(new)


def planned(node: Planned, runtime: Runtime) -> dict:
    """``node``'s chosen plan and its explain() line ({"plan", "line"}), chosen once and kept on the node."""
    if kept(node) is None:
        runtime.once(node.key, lambda: kept(node) or keep(node, **node.choose(runtime)))
    return kept(node)


def _compute(node: WholeTable, runtime: Runtime) -> None:
    if kept(node) is not None:  # another thread computed it while this one waited
        return
    table, stats = node.run(runtime, resolve(node.input, runtime))
    if table.schema != node.out_schema:
        table = table.cast(node.out_schema)
    keep(node, table=table, stats=stats)
