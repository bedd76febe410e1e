"""A job-wide bound on requests in flight: sized from the rate limit and the latency, adapted by AIMD.

When the rate limit is known (given or learned from the server's hints), the bound follows it by
Little's law: requests in flight = rate x latency, times ``HEADROOM`` for the spread of latencies
and the first burst, never below the bound used while nothing is known and never above the hard
ceiling. A fixed bound either starves a fast limit at a long latency (30,000 RPM at 1 s needs
about 500 in flight) or floods a server that has no limit to speak of. AIMD still moves the bound
below that size: cut multiplicatively on 429s, timeouts and rising latency; grow additively (about
one slot per round trip) while healthy.
"""

from __future__ import annotations

import asyncio
import collections
import math

from inferframe.runtime.clock import REAL, Clock

# In flight = rate x mean latency (Little's law) times this, for the spread of latencies and bursts.
HEADROOM = 2.0


class AdaptiveLimit:
    """An async semaphore whose size moves between ``minimum`` and a target of at most ``maximum``.

    Parameters:
        initial: starting bound on requests in flight (clamped to the target).
        maximum: the hard ceiling: the bound never grows past this (the user's max_concurrency).
        minimum: the bound never shrinks below this.
        adaptive: False keeps the bound fixed at ``initial``.
        clock: where time comes from (a FakeClock in tests).
        base: the target while no rate limit is known to size it from (None: ``maximum``);
            once sized, the target never goes below it.

    Example:
        >>> lim = AdaptiveLimit(initial=64, maximum=1024, base=64)
        >>> lim.on_success(1.0, rate=200.0)         # 200 requests/s at 1 s: 2 x 200 in flight
        >>> lim.target, int(lim.limit)
        (400, 400)
    """

    def __init__(self, initial: int, maximum: int, minimum: int = 1, adaptive: bool = True, clock: Clock = REAL,
                 *, base: int | None = None) -> None:
        self.clock = clock
        self.maximum = maximum
        self.minimum = minimum
        self.base = min(base, maximum) if base is not None else maximum
        self.target = self.base
        self.limit = float(max(minimum, min(initial, self.target)))
        self.adaptive = adaptive
        self.in_flight = 0
        self.peak = 0
        self._waiters: collections.deque[asyncio.Future] = collections.deque()
        self._last_cut = -math.inf
        self._base_latency: float | None = None
        self._latency = 0.0
        self._mean_latency: float | None = None
        self._sized: tuple[float, bool] | None = None

    async def __aenter__(self):
        # Single-threaded asyncio: no await between the check and the increment, so no lock is needed.
        while self.in_flight >= int(self.limit):
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._wake(1)  # pass on the slot we were handed
                raise
        self.in_flight += 1
        if self.in_flight > self.peak:
            self.peak = self.in_flight
        return self

    async def __aexit__(self, *exc):
        self.in_flight -= 1
        if self._waiters:
            self._wake(1)

    def _wake(self, n: int) -> None:
        while n > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                n -= 1

    def _set_limit(self, limit: float) -> None:
        grew = int(self.limit)
        self.limit = limit
        if int(limit) > grew:
            self._wake(int(limit) - grew)

    def size(self, rate: float | None) -> None:
        """Size the target from ``rate`` (requests/s the limits allow) and the mean latency seen.

        With a rate but no answer yet, the target is the ceiling: the rate limiter paces the first
        round trip, and the first latency measured brings the target down to its size.
        """
        if not self.adaptive or not rate:
            return
        latency = self._mean_latency
        if latency is None:
            self.target = self.maximum
        else:
            self.target = max(self.base, min(self.maximum, math.ceil(HEADROOM * rate * latency)))
        known = self._sized
        if known is None or known[1] != (latency is not None) or abs(rate - known[0]) > 0.25 * known[0]:
            # New limits, or the first latency: go to the new size at once (one slot per round trip would take
            # minutes). A rate that drifts (a TPM limit over requests of varying size) does not undo AIMD's cuts.
            self._sized = (rate, latency is not None)
            self._set_limit(float(max(self.minimum, self.target)))
        elif self.limit > self.target:
            self.limit = float(max(self.minimum, self.target))

    def on_success(self, latency: float, rate: float | None = None) -> None:
        """One answer came back after ``latency`` seconds; ``rate``: requests/s the known limits allow."""
        if not self.adaptive:
            return
        self._mean_latency = latency if self._mean_latency is None else 0.95 * self._mean_latency + 0.05 * latency
        self.size(rate)
        base = self._base_latency
        # The best latency seen, drifting up slowly so a permanently slower server becomes the new normal.
        self._base_latency = latency if base is None else min(latency, base * 1.002)
        self._latency = latency if self._latency == 0 else 0.95 * self._latency + 0.05 * latency
        if self._latency > 4 * self._base_latency + 0.05:
            self.on_congestion()  # queueing at the server: back off before it starts failing
            return
        if self.limit < self.target:
            self._set_limit(min(self.target, self.limit + 1.0 / max(1.0, self.limit)))

    def on_congestion(self) -> None:
        if not self.adaptive:
            return
        now = self.clock.monotonic()
        if now - self._last_cut < 1.0:  # one cut per round of feedback, not one per failed row
            return
        self._last_cut = now
        self.limit = max(self.minimum, self.limit * 0.7)
        self._latency = 0.0
