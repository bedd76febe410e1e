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

import dataclasses
import threading
from typing import Protocol

from inferframe.providers.interface import LimitHints
from inferframe.runtime.breaker import Breaker
from inferframe.runtime.capacity import CapacityFinder
from inferframe.runtime.clock import REAL, Clock
from inferframe.runtime.concurrency import AdaptiveLimit
from inferframe.runtime.config import RuntimeConfig
from inferframe.runtime.ratelimit import RateLimiter, Ticket


class Admission(Protocol):
    """What the runtime needs of a rate limiter: admit, learn from answers, pause on a spent budget.

    ``RateLimiter`` is the local one; a cluster's leases its budget from one owner.
    """

    paused_until: float  # admission waits until this monotonic time

    async def acquire(self, tokens: int) -> Ticket:
        """Wait until one request of ``tokens`` may go."""

    def release(self, tokens: int, hints: LimitHints | None, ticket: Ticket | None = None,
                refused: bool = False) -> None:
        """An admitted request got its answer (or failed); ``refused``: it refused the request itself."""

    def on_429(self, hints: LimitHints | None, retry_after: float, tokens: int = 0) -> bool:
        """A 429 came back: True when it paused admission for everyone."""

    def correct(self, estimated: int, actual: int) -> None:
        """Charge usage beyond the estimate."""

    def requests_per_second(self) -> float | None:
        """Requests per second the known limits allow (None: none known)."""


class InFlightBound(Protocol):
    """What the runtime needs of the in-flight bound (``AdaptiveLimit``): a slot per request, sized by feedback."""

    async def __aenter__(self): ...

    async def __aexit__(self, *exc): ...

    def enter_now(self) -> bool:
        """Take a place if one is free, without waiting (False: enter with ``async with``)."""

    def leave(self) -> None:
        """Give a place back."""

    def ahead(self):
        """The same bound, entered before the rows waiting for a first attempt (a retry)."""

    def size(self, rate: float | None) -> None:
        """Size the bound from the rate the limits allow."""

    def on_success(self, latency: float, rate: float | None = None, sent_at: float | None = None,
                   load: int | None = None) -> None: ...

    def on_rate_limited(self, spent: bool = False) -> None: ...

    def on_fault(self) -> None: ...

    @property
    def failing(self) -> bool:
        """Failures persist."""


class TripSwitch(Protocol):
    """What the runtime needs of the breaker (``Breaker``): record attempts and rows, trip, say why."""

    reason: str | None

    @property
    def tripped(self) -> bool: ...

    def attempt(self, kind: str | None, message: str, service: str, max_tokens: int | None = None) -> None: ...

    def row(self, ok: bool, kind: str | None, message: str, status: int | None = None,
            recurring: bool = True) -> None: ...

    def rows_ok(self, n: int) -> None: ...

    def trip(self, reason: str, *, notify: bool = True) -> None: ...


class BudgetSource(Protocol):
    """Where a worker gets more of a call's budget: at most the caps in all, across the cluster."""

    async def take(self, label: str, max_cost: float | None, max_tokens: int | None, cost: float,
                   tokens: int) -> tuple[float, int]:
        """Up to (``cost``, ``tokens``) more for the call ``label`` (less, or nothing, once the caps are granted)."""


@dataclasses.dataclass
class SharedLimits:
    """The limits of one endpoint and model: admission (rate limiter), in-flight bound, breaker.

    The in-flight bound follows the rate limit: the runtime hands ``slots.on_success`` the rate
    that ``limiter.requests_per_second()`` allows with each answer's latency.
    """

    limiter: Admission
    slots: InFlightBound
    breaker: TripSwitch
    # A cluster's budget grants (``runners.ray_limits.budget_grants``): max_cost/max_tokens_budget hold for every
    # worker together. None: this process's runtime holds the whole budget.
    grants: BudgetSource | None = None

    @classmethod
    def for_config(cls, config: RuntimeConfig, clock: Clock = REAL) -> "SharedLimits":
        base = config.concurrency_base
        return cls(
            RateLimiter(config.rpm, config.tpm, clock=clock),
            AdaptiveLimit(config.initial_concurrency or base, config.max_concurrency, adaptive=config.adaptive,
                          clock=clock, base=base),
            Breaker(),
        ).sized()

    def sized(self) -> "SharedLimits":
        """Size the in-flight bound from the limits known before any answer (the user's, or recalled); returns self.

        The runtime starts no more senders than the bound admits: a bound left at its default until
        the first answer came back started the job with 64 of the 200 requests a second that
        12,000 RPM at 1 s allows (issue 36).
        """
        self.slots.size(self.limiter.requests_per_second())
        return self


class Coordinator(Protocol):
    """Hands out the shared limits of an endpoint+model to every runtime of a job.

    ``LocalCoordinator`` (one process) and the Ray runner's coordinator (a cluster) satisfy it.
    """

    def limits(self, key: str, config: RuntimeConfig, account: str = "") -> SharedLimits:
        """The limits for ``key`` (endpoint identity and model); built from ``config`` the first time.

        ``account``: a fingerprint of the API key (``secrets.fingerprint``): limits are the key's.
        """


# The rate limiter of this process's latest job per endpoint, model and key: the next job's starts from
# what it learned (``RateLimiter.recall``) instead of probing the server with one request again.
_EARLIER: dict[tuple[str, str], RateLimiter] = {}
_EARLIER_CAPACITY: dict[tuple[str, str], CapacityFinder] = {}
_EARLIER_LOCK = threading.Lock()


def learned_earlier(key: str, account: str, limiter: RateLimiter,
                    capacity: CapacityFinder | None) -> tuple[bool, CapacityFinder | None]:
    """Start ``limiter`` from what this process's latest job at ``key`` with ``account`` learned, and make ``limiter``
    and ``capacity`` what the next job starts from: (limits recalled, the capacity finder the latest job had).

    One home for what jobs remember: a job in this process (``LocalCoordinator``) and a cluster job's coordinator
    (the Spark driver's job service, the Ray driver's host) both go through it.

    Example:
        >>> from inferframe.providers.interface import LimitHints
        >>> first = RateLimiter(); first.release(1, LimitHints(requests_limit=600, requests_remaining=599))
        >>> learned_earlier("doc|m", "", first, None)
        (False, None)
        >>> later = RateLimiter(); learned_earlier("doc|m", "", later, None)[0], later.probe_out
        (True, False)
    """
    with _EARLIER_LOCK:
        earlier = _EARLIER.get((key, account))
        recalled = earlier is not None and limiter.recall(earlier)
        _EARLIER[(key, account)] = limiter
        known = _EARLIER_CAPACITY.get((key, account))
        if capacity is not None:
            _EARLIER_CAPACITY[(key, account)] = capacity
    return recalled, known


class LocalCoordinator:
    """Shared limits for the runtimes of one job in this process (they run on one event loop).

    Parameters:
        clock: where time comes from (a FakeClock in tests).
    """

    def __init__(self, clock: Clock = REAL) -> None:
        self.clock = clock
        self._limits: dict[str, SharedLimits] = {}
        self._lock = threading.Lock()

    def limits(self, key: str, config: RuntimeConfig, account: str = "") -> SharedLimits:
        with self._lock:
            found = self._limits.get(key)
            if found is None:
                found = self._limits[key] = SharedLimits.for_config(config, self.clock)
                # The capacity found (a self-hosted server's: no limit headers) is remembered with the limits.
                capacity = getattr(found.slots, "capacity", None)
                recalled, known = learned_earlier(key, account, found.limiter, capacity)
                if recalled:
                    found.sized()
                if capacity is not None and known is not None:
                    found.slots.recall_capacity(known)
            return found
