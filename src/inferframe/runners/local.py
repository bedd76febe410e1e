"""The local runner: streams the plan through this process's executor.

Example:
    >>> import inferframe as ifr
    >>> sum(b.num_rows for b in LocalRunner().run(ifr.from_pydict({"a": [1, 2]})._plan))
    2
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from inferframe.ai.run import RunServices
from inferframe.execution.executor import execute
from inferframe.observe.stats import RunCounters
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
