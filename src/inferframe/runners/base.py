"""The ``Runner`` base class: what a DataFrame asks of whatever runs its plan.

A runner gets an optimized logical plan, turns it into physical operators once with the one
planner (``plan.physical``), and decides only where each operator runs.

Example:
    >>> from inferframe.runners.local import LocalRunner
    >>> isinstance(LocalRunner(), Runner), LocalRunner().writes_in_workers, LocalRunner().to_dataset(None)
    (True, False, None)
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, Iterator

import pyarrow as pa

from inferframe.plan.logical import LogicalPlan
from inferframe.plan.physical import PhysicalOp, plan_physical


class Runner(abc.ABC):
    """Runs plans: to record batches, to part files written by its workers, to a Ray Dataset where it can.

    A subclass implements ``execute`` (physical operators to batches, in order); the rest has defaults.
    Each job's AI calls count into the job's own ``RunCounters`` (``counters``), which the runner hands
    to them through the run's services (``inferframe.ai.run.RunServices``); a runner given none makes
    its own. A DataFrame gives them for a job with AI calls; for one without, ``run`` calls ``execute(op)``.
    """

    name: ClassVar[str]
    # True: ``write_parts`` writes the part files where the rows are made; False: the DataFrame writes the batches.
    writes_in_workers: ClassVar[bool] = False

    def run(self, plan: LogicalPlan, counters: Any = None) -> Iterator[pa.RecordBatch]:
        """The optimized ``plan``'s record batches, in order (``counters``: the job's ``RunCounters``; None: new ones)."""
        op = plan_physical(plan)
        return self.execute(op) if counters is None else self.execute(op, counters=counters)

    @abc.abstractmethod
    def execute(self, op: PhysicalOp, counters: Any = None) -> Iterator[pa.RecordBatch]:
        """The physical plan's record batches, in order (``counters``: the job's ``RunCounters``; None: new ones)."""

    def write_parts(self, plan: LogicalPlan, pending: Any, counters: Any = None) -> list[list[str]]:
        """Write the plan's rows as part files of ``pending`` (an ``io.writers.PendingWrite``); the names, in order.

        Only called when ``writes_in_workers`` is True (``counters``: the job's ``RunCounters``; None: new ones).
        """
        raise NotImplementedError(f"internal: the {self.name} runner does not write in workers")

    def to_dataset(self, plan: LogicalPlan) -> Any:
        """The plan as a Ray Dataset, or None when this runner cannot make one (the DataFrame then uses its result)."""
        return None
