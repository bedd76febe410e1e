"""What an AI operator gets from the run it works in: the coordinator of shared limits and the counters.

A runner makes one ``RunServices`` per job, with the job's own ``RunCounters``, and the executor
hands it, unopened, to every operator class that asks for it (``for_run``). An operator built
without one (a direct call, a bare ``execute``) gets a local coordinator and counters of its own;
a worker process makes its own services and sends their counters back to the driver with its results.

Example:
    >>> services = services_or_default(None)
    >>> services.coordinator.__class__.__name__, services.counters.runs()
    ('LocalCoordinator', [])
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from inferframe.observe.stats import RunCounters
from inferframe.runtime.coordinator import Coordinator, LocalCoordinator


@dataclasses.dataclass
class RunServices:
    """The shared state of one job: limits per endpoint+model, the job's counters (what the driver shows),
    and the secret channel (``worker_env()`` gives the environment that hands keys to a worker process).

    Parameters:
        coordinator: the job's shared limits.
        counters: the job's counters, made for this job only.
        worker_env: the environment that hands keys to a worker process (None: no worker gets keys).

    Example:
        >>> from inferframe.observe.stats import RunCounters
        >>> RunServices(LocalCoordinator(), RunCounters()).worker_env is None
        True
    """

    coordinator: Coordinator
    counters: RunCounters
    worker_env: Callable[[], dict] | None = None

    def __reduce__(self):
        raise TypeError("RunServices belong to one process's run; a worker gets its own (see inferframe.ai.run).")


def local_services(counters: RunCounters | None = None) -> RunServices:
    """Services of a run in this process alone: a local coordinator and ``counters`` (None: new ones).

    A worker process makes these for its model class and sends the counters back with every result.

    Example:
        >>> counters = RunCounters()
        >>> local_services(counters).counters is counters
        True
    """
    return RunServices(LocalCoordinator(), counters if counters is not None else RunCounters())


def services_or_default(services: RunServices | None) -> RunServices:
    """``services``, or new local ones: a local coordinator and counters of their own (no job shows them).

    Example:
        >>> services_or_default(None).counters is services_or_default(None).counters
        False
    """
    return services if services is not None else local_services()
