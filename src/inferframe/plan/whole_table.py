"""``WholeTable``: a lazy operator that needs every row of its input at once and asks the model in rounds of its own.

``sem_topk``, ``sem_agg``, ``sem_dedup`` and ``sem_cluster_by`` are such operators: their algorithm
(a quickselect, a fold, a union-find) decides its next questions from the last answers, so it runs in
Python over small DataFrame jobs rather than as a per-batch stage. The node keeps them lazy like
every other operator: ``explain()`` shows it with the plan and the calls it expects, and a run
computes it first (``resolve``, bottom up), once: its result is kept, so showing and then writing
the result asks the model nothing again, and stays the same rows.

Example:
    >>> import pyarrow as pa
    >>> import inferframe as ifr
    >>> src = ifr.from_pydict({"a": [3, 1, 2]})._plan
    >>> node = WholeTable(src, src.schema, "Largest k=1", lambda df: (df.to_arrow().sort_by([("a", "descending")]).slice(0, 1), {}),
    ...                   lambda rows: f"{rows} rows read, no model call")
    >>> print(node.tree())
    * Largest k=1
      * InMemory rows=3
    >>> resolve(node, lambda plan: ifr.DataFrame(plan)).source.table.to_pydict()
    {'a': [3]}
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.plan.logical import InMemory, LogicalPlan, Source

# (the input as a DataFrame) -> (the result table, the operator's counts of what it asked: ``sem_stats``).
Compute = Callable[[Any], "tuple[pa.Table, dict]"]


@dataclasses.dataclass(frozen=True, eq=False)
class WholeTable(LogicalPlan):
    """The rows ``compute`` makes of all of ``input``'s rows, computed once when a plan above it first runs.

    Parameters:
        input: the plan whose rows the operator reads.
        out_schema: the result's columns (known before the run).
        note: one line for ``explain()``, e.g. ``'SemTopK "{review} is best" k=10 plan=auto'``.
        compute: (input DataFrame) -> (result table, stats); it may run DataFrame jobs of its own.
        calls: (input rows, None where unknown before the run) -> the expected model calls, in words.
        memo: the result once computed ({"table", "stats"}) and the lock of its one computation; shared by
            the copies the optimizer makes.
    """

    input: LogicalPlan
    out_schema: pa.Schema
    note: str
    compute: Compute = dataclasses.field(repr=False)
    calls: Callable[[int | None], str] = dataclasses.field(repr=False)
    memo: dict = dataclasses.field(default_factory=lambda: {"lock": threading.RLock()}, repr=False)

    def __post_init__(self):
        if not isinstance(self.note, str) or not self.note or "\n" in self.note:
            raise PlanError(f"internal: a whole-table operator's note is one non-empty line, got {self.note!r}.")
        self._set_schema(self.out_schema)

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return WholeTable(children[0], self.out_schema, self.note, self.compute, self.calls, self.memo)

    def describe(self) -> str:
        return self.note + (" (computed)" if self.computed else "")

    @property
    def computed(self) -> bool:
        """Whether a run has computed it (its rows are kept: reading them asks the model nothing)."""
        return "table" in self.memo

    @property
    def stats(self) -> dict | None:
        """What the operator asked in its run (``sem_stats``); None before it ran."""
        return self.memo.get("stats")

    def __reduce__(self):
        # compute is a closure over this process's options; a plan is shipped to workers only once resolved.
        raise PlanError(f"internal: {self.note} must be computed before its plan leaves this process.")

    def to_physical(self, inputs: tuple) -> Any:
        raise PlanError(f"internal: {self.note} reached the physical planner uncomputed; run the plan through "
                        "plan.whole_table.resolve first.")


def resolve(plan: LogicalPlan, frame: Callable[[LogicalPlan], Any]) -> LogicalPlan:
    """``plan`` with every ``WholeTable`` computed (innermost first) and read as an in-memory table.

    Parameters:
        plan: a logical plan (before optimization: the operator reads its input as the user built it).
        frame: a plan -> a DataFrame over it (the DataFrame layer's class; this layer does not import it).
    """
    if isinstance(plan, WholeTable):
        table = plan.memo.get("table")
        if table is None:
            with plan.memo["lock"]:  # a second caller (another thread) waits and reads the kept result
                table = plan.memo.get("table")
                if table is None:
                    table, stats = plan.compute(frame(resolve(plan.input, frame)))
                    if table.schema != plan.out_schema:
                        table = table.cast(plan.out_schema)
                    plan.memo["stats"], plan.memo["table"] = stats, table
        return Source(InMemory(table), table.schema)
    kids = plan.children()
    new = tuple(resolve(k, frame) for k in kids)
    return plan if all(a is b for a, b in zip(new, kids)) else plan.with_children(new)
