"""What an AI operator gets from the run it works in: the coordinator of shared limits and the counters.

A runner makes one ``RunServices`` per job and the executor hands it, unopened, to every operator
class that asks for it (``for_run``). An operator built without one (a worker process, a direct
call) gets a local coordinator and this process's counters, which the worker sends back to the
driver with its results.

Example:
    >>> services_or_default(None).coordinator.__class__.__name__
    'LocalCoordinator'
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from inferframe.observe.stats import CURRENT_RUN, RunCounters
from inferframe.runtime.coordinator import Coordinator, LocalCoordinator


@dataclasses.dataclass
class RunServices:
    """The shared state of one job: limits per endpoint+model, the counters the driver shows, and the
    secret channel (``worker_env()`` gives the environment that hands keys to a worker process).
    """

    coordinator: Coordinator
    counters: RunCounters
    worker_env: Callable[[], dict] | None = None

    def __reduce__(self):
        raise TypeError("RunServices belong to one process's run; a worker gets its own (see inferframe.ai.run).")


def services_or_default(services: RunServices | None) -> RunServices:
    """``services``, or a local coordinator with this process's counters."""
    return services if services is not None else RunServices(LocalCoordinator(), CURRENT_RUN)
