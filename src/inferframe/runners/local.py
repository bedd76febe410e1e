"""The local runner: streams the plan through this process's executor.

Example:
    >>> import inferframe as ifr
    >>> sum(b.num_rows for b in LocalRunner().run(ifr.from_pydict({"a": [1, 2]})._plan))
    2
"""

from __future__ import annotations

from typing import Callable, Iterator

import pyarrow as pa

from inferframe.ai.run import RunServices
from inferframe.execution.executor import execute
from inferframe.observe.stats import RunCounters
from inferframe.plan import physical as pp
from inferframe.plan.physical import PhysicalOp
from inferframe.providers import secrets
from inferframe.runners.base import Runner
from inferframe.runtime.coordinator import LocalCoordinator


class LocalRunner(Runner):
    """Run plans in this process, streaming record batches.

    Each run gets its own services: one coordinator, so every AI call of the job that reaches the
    same endpoint and model shares one rate limit, in-flight bound and breaker; the job's counters
    (the DataFrame's, else new ones); and the secret channel for worker processes (their environment).

    Parameters:
        morsel_size: rows per batch for vectorised work.
    """

    name = "native"

    def __init__(self, morsel_size: int = 8192) -> None:
        self.morsel_size = morsel_size

    def execute(self, op: PhysicalOp, counters: RunCounters | None = None) -> Iterator[pa.RecordBatch]:
        counters = counters if counters is not None else RunCounters()
        services = RunServices(LocalCoordinator(), counters, secrets.worker_env)
        return execute(op, morsel_size=self.morsel_size, services=services)


# Operators that run no user code (no @func, @cls, AI call or operator-defined batch function).
_NO_USER_CODE = (pp.ReadTable, pp.ReadFiles, pp.Project, pp.Filter, pp.Explode, pp.Limit, pp.Rebatch, pp.Union,
                 pp.Exchange)


def on_the_driver_anyway(op: PhysicalOp, read_on_driver: Callable[[pp.ReadFiles], bool]) -> bool:
    """Whether a cluster runner should run ``op`` here: it runs no user code and every row it reads is here already.

    A cluster's job for such a plan (a SQL subquery over an in-memory table, a projection of rows a
    previous step gathered) would only ship the rows to the workers and back: on Spark each such job
    took 0.15-0.3 s on a 2-core machine. ``read_on_driver``: whether the runner reads a file source
    on the driver (an Arrow stream; Spark also reads limited and non-tabular reads there).

    Example:
        >>> import inferframe as ifr
        >>> op = pp.plan_physical(ifr.from_pydict({"a": [1, 2]}).where(ifr.col("a") > 1)._plan)
        >>> on_the_driver_anyway(op, lambda read: False)
        True
    """
    if type(op) not in _NO_USER_CODE:
        return False
    if isinstance(op, pp.ReadFiles) and not read_on_driver(op):
        return False
    return all(on_the_driver_anyway(i, read_on_driver) for i in op.inputs)
