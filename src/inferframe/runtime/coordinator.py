"""Limits that every worker of a job shares: the RPM/TPM budget, a 429's pause, the in-flight bound
and the breaker, per endpoint and model.

The server's limits are per key and model, not per column or per process, so every AI call of a
job that reaches the same endpoint and model must draw from one budget. A runtime asks its
coordinator for the ``SharedLimits`` of its key; the first call's settings win. ``LocalCoordinator``
serves one process (one event loop); a cluster runner supplies a coordinator whose limits lease
budget in chunks from one owner.

Example:
    >>> import asyncio
    >>> async def same():
    ...     c = LocalCoordinator()
    ...     return c.limits("openai:https://x/v1|gpt-5", RuntimeConfig(rpm=60)) is c.limits("openai:https://x/v1|gpt-5", RuntimeConfig())
    >>> asyncio.run(same())
    True
"""

from __future__ import annotations

import abc
import dataclasses
import threading

from inferframe.runtime.breaker import Breaker
from inferframe.runtime.clock import REAL, Clock
from inferframe.runtime.concurrency import AdaptiveLimit
from inferframe.runtime.config import RuntimeConfig
from inferframe.runtime.ratelimit import RateLimiter


@dataclasses.dataclass
class SharedLimits:
    """The limits of one endpoint and model: admission (rate limiter), in-flight bound, breaker.

    The in-flight bound follows the rate limit: the runtime hands ``slots.on_success`` the rate
    that ``limiter.requests_per_second()`` allows with each answer's latency.
    """

    limiter: RateLimiter
    slots: AdaptiveLimit
    breaker: Breaker

    @classmethod
    def for_config(cls, config: RuntimeConfig, clock: Clock = REAL) -> "SharedLimits":
        base = config.concurrency_base
        return cls(
            RateLimiter(config.rpm, config.tpm, clock=clock),
            AdaptiveLimit(config.initial_concurrency or base, config.max_concurrency, adaptive=config.adaptive,
                          clock=clock, base=base),
            Breaker(),
        )


class Coordinator(abc.ABC):
    """Hands out the shared limits of an endpoint+model to every runtime of a job."""

    @abc.abstractmethod
    def limits(self, key: str, config: RuntimeConfig) -> SharedLimits:
        """The limits for ``key`` (endpoint identity and model); built from ``config`` the first time."""


class LocalCoordinator(Coordinator):
    """Shared limits for the runtimes of one job in this process (they run on one event loop).

    Parameters:
        clock: where time comes from (a FakeClock in tests).
    """

    def __init__(self, clock: Clock = REAL) -> None:
        self.clock = clock
        self._limits: dict[str, SharedLimits] = {}
        self._lock = threading.Lock()

    def limits(self, key: str, config: RuntimeConfig) -> SharedLimits:
        with self._lock:
            found = self._limits.get(key)
            if found is None:
                found = self._limits[key] = SharedLimits.for_config(config, self.clock)
            return found
