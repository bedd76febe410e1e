"""A job-wide bound on requests in flight, adapted by AIMD.

Cut multiplicatively on 429s, timeouts and rising latency; grow additively
(about one slot per round trip) while healthy.
"""

from __future__ import annotations

import asyncio
import collections

from inferframe.runtime.clock import REAL, Clock


class AdaptiveLimit:
    """An async semaphore whose size moves between ``minimum`` and ``maximum``.

    Parameters:
        initial: starting bound on requests in flight.
        maximum: the bound never grows past this (the user's max_concurrency).
        minimum: the bound never shrinks below this.
        adaptive: False keeps the bound fixed at ``initial``.
        clock: where time comes from (a FakeClock in tests).
    """

    def __init__(self, initial: int, maximum: int, minimum: int = 1, adaptive: bool = True, clock: Clock = REAL) -> None:
        self.clock = clock
        self.limit = float(max(minimum, min(initial, maximum)))
        self.maximum = maximum
        self.minimum = minimum
        self.adaptive = adaptive
        self.in_flight = 0
        self.peak = 0
        self._waiters: collections.deque[asyncio.Future] = collections.deque()
        self._last_cut = 0.0
        self._base_latency: float | None = None
        self._latency = 0.0

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

    def on_success(self, latency: float) -> None:
        if not self.adaptive:
            return
        base = self._base_latency
        # The best latency seen, drifting up slowly so a permanently slower server becomes the new normal.
        self._base_latency = latency if base is None else min(latency, base * 1.002)
        self._latency = latency if self._latency == 0 else 0.95 * self._latency + 0.05 * latency
        if self._latency > 4 * self._base_latency + 0.05:
            self.on_congestion()  # queueing at the server: back off before it starts failing
            return
        if self.limit < self.maximum:
            grew = int(self.limit)
            self.limit = min(self.maximum, self.limit + 1.0 / max(1.0, self.limit))
            if int(self.limit) > grew:
                self._wake(int(self.limit) - grew)

    def on_congestion(self) -> None:
        if not self.adaptive:
            return
        now = self.clock.monotonic()
        if now - self._last_cut < 1.0:  # one cut per round of feedback, not one per failed row
            return
        self._last_cut = now
        self.limit = max(self.minimum, self.limit * 0.7)
        self._latency = 0.0
