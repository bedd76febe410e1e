"""One budget for every Spark executor of a job: leases from the driver's job service, as Ray workers lease.

Spark has no actors: the job's coordinator is the driver's ``JobService`` (``spark_service``), which runs
the Ray runner's coordinator logic (``ray_limits.LimitsActor``) on one event loop. Each Python worker
holds a ``SparkCoordinator`` whose limits are ``ray_limits.LeasedLimiter``s: they spend a local lease and
ask the driver for the next chunk (about 100 ms of the worker's part of the rate) before it runs out.
So the cluster shares ONE requests/tokens-per-minute budget, ONE 429 pause, ONE in-flight bound and
ONE breaker per endpoint+model, whatever the number of executors. A service that cannot be reached
within the link's timeout stops the task with one ``ServiceError``, never a hang.

Example:
    >>> from inferframe.runners.spark_service import JobService
    >>> from inferframe.runtime.config import RuntimeConfig
    >>> with JobService() as service:
    ...     coordinator = SparkCoordinator(service.link())
    ...     limits = coordinator.limits("openai:https://x/v1|gpt-5", RuntimeConfig(rpm=600))
    ...     same = limits is coordinator.limits("openai:https://x/v1|gpt-5", RuntimeConfig(rpm=600))
    >>> type(limits.limiter).__name__, same
    ('LeasedLimiter', True)
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from inferframe.errors import ServiceError
from inferframe.runners.ray_limits.budget_grants import BudgetGrants
from inferframe.runners.ray_limits.limits import LeasedLimiter, shared_breaker, shared_slots
from inferframe.runners.ray_limits.tuning import LEASE_WAIT_S
from inferframe.runtime.config import RuntimeConfig
from inferframe.runtime.coordinator import SharedLimits


class LeaseLink:
    """What ``LeasedLimiter`` calls: the job service's ``lease``, awaited off the event loop."""

    def __init__(self, link: Any) -> None:
        self.link = link
        self.wait_s = min(LEASE_WAIT_S, link.timeout_s / 3)

    def unreachable(self, why: str) -> ServiceError:
        return self.link.unreachable(why)

    async def call(self, method: str, *args: Any) -> Any:
        return await asyncio.to_thread(self.link.call, method, *args)


class SparkCoordinator:
    """Shared limits for every Python worker of a Spark job (``runtime.coordinator.Coordinator``).

    Parameters:
        link: the job's ``ServiceLink`` (one per worker process and job).
    """

    def __init__(self, link: Any) -> None:
        self.link = LeaseLink(link)
        self._limits: dict[str, SharedLimits] = {}
        self._lock = threading.Lock()

    def limits(self, key: str, config: RuntimeConfig, account: str = "") -> SharedLimits:
        """The leased limits of ``key`` in this process (``account``, the key's fingerprint, goes with its leases: the
        driver holds what was learned, and a later job's starts from it)."""
        with self._lock:
            found = self._limits.get(key)
            if found is None:
                slots, breaker = shared_slots(config), shared_breaker()
                found = self._limits[key] = SharedLimits(LeasedLimiter(self.link, key, config, slots, breaker, account),
                                                         slots, breaker, BudgetGrants(self.link, key))
            return found

    def task_ended(self) -> None:
        """This worker's task ended: each key's in-flight share goes back to the job now (``LeasedLimiter.task_ended``)."""
        with self._lock:
            limits = list(self._limits.values())
        for found in limits:
            found.limiter.task_ended()
