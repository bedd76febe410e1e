"""Requests-per-minute and tokens-per-minute budgets, set by the user or learned from headers.

Hand-written because the limiter must be shared by every row of a job, honour
Retry-After for everyone, and correct itself from the server's limit hints; no
well-kept async library does all three. The hints come as neutral ``LimitHints``:
which headers carry them is the provider's business.

Budgets are paced, not spent in bursts: each bucket holds at most
``burst_seconds`` of its per-minute rate, because servers differ in how much
of a minute's quota they let through at once and a burst they refuse costs a
storm of 429s.
"""

from __future__ import annotations

import asyncio

from inferframe.providers.interface import LimitHints
from inferframe.runtime.clock import REAL, Clock


class _Bucket:
    """A token bucket refilled continuously at ``rate`` per minute, holding ``burst_seconds`` of it."""

    def __init__(self, rate: float | None, burst_seconds: float, clock: Clock = REAL) -> None:
        self.burst_seconds = burst_seconds
        self.clock = clock
        self.rate: float | None = None
        self.level = 0.0
        self.stamp = clock.monotonic()
        if rate is not None:
            self.set_rate(rate)

    @property
    def capacity(self) -> float:
        return max(1.0, (self.rate or 0.0) * self.burst_seconds / 60.0)

    def set_rate(self, rate: float) -> None:
        first = self.rate is None
        self.rate = rate
        if first:
            self.level = self.capacity
            self.stamp = self.clock.monotonic()

    def refill(self, now: float) -> None:
        if self.rate is None:
            return
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate / 60.0)
        self.stamp = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` is available (0 when it is now)."""
        if self.rate is None:
            return 0.0
        # A request larger than the bucket waits until the bucket is full, then goes (and borrows).
        amount = min(amount, self.capacity)
        if self.level >= amount:
            return 0.0
        return (amount - self.level) * 60.0 / self.rate

    def take(self, amount: float) -> None:
        if self.rate is not None:
            self.level -= amount


class RateLimiter:
    """Admit requests within RPM/TPM budgets; a 429's Retry-After pauses admission for everyone.

    Parameters:
        rpm: requests per minute (None: unlimited until headers say otherwise).
        tpm: tokens per minute (None: unlimited until headers say otherwise).
        burst_seconds: how many seconds of budget may be spent at once.
        clock: where time comes from (a FakeClock in tests).

    Until the first response arrives, only one request is admitted when the user set no
    limits: the first answer's limit hints say what the limits are, so the job never
    opens with a burst the server refuses.
    """

    def __init__(self, rpm: float | None = None, tpm: float | None = None, burst_seconds: float = 2.0,
                 clock: Clock = REAL) -> None:
        self.clock = clock
        self.requests = _Bucket(rpm, burst_seconds, clock)
        self.tokens = _Bucket(tpm, burst_seconds, clock)
        self.user_set = (rpm is not None, tpm is not None)
        self.paused_until = 0.0
        self.in_flight_requests = 0
        self.in_flight_tokens = 0.0
        self._lock = asyncio.Lock()
        self._probe_done = asyncio.Event()
        self._probing = False
        if rpm is not None or tpm is not None:
            self._probe_done.set()

    def _unlimited(self) -> bool:
        return self.requests.rate is None and self.tokens.rate is None

    async def acquire(self, tokens: int) -> None:
        if not self._probe_done.is_set():
            if self._probing:
                await self._probe_done.wait()
            else:
                self._probing = True  # this row is the probe; the others wait for its headers
        if self._unlimited() and self.clock.monotonic() >= self.paused_until:
            self._admit(tokens)
            return
        async with self._lock:  # FIFO admission keeps waiting rows in order and avoids stampedes
            while True:
                now = self.clock.monotonic()
                if now < self.paused_until:
                    await self.clock.sleep(self.paused_until - now)
                    continue
                self.requests.refill(now)
                self.tokens.refill(now)
                wait = max(self.requests.wait_for(1), self.tokens.wait_for(tokens))
                if wait <= 0:
                    self.requests.take(1)
                    self.tokens.take(tokens)
                    self._admit(tokens)
                    return
                await self.clock.sleep(max(0.001, min(wait, 1.0)))  # floor: float rounding must not spin

    def _admit(self, tokens: int) -> None:
        self.in_flight_requests += 1
        self.in_flight_tokens += tokens

    def release(self, tokens: int, hints: LimitHints | None) -> None:
        """A request admitted with ``tokens`` got its answer (or failed): learn from its limit hints."""
        self.in_flight_requests -= 1
        self.in_flight_tokens -= tokens
        self.observe(hints)
        if not self._probe_done.is_set():
            self._probe_done.set()

    def pause(self, seconds: float) -> None:
        """A 429: stop admitting for ``seconds``, and restart from an empty bucket, not a stampede."""
        self.paused_until = max(self.paused_until, self.clock.monotonic() + seconds)
        for bucket in (self.requests, self.tokens):
            if bucket.rate is not None:
                bucket.level = min(bucket.level, 0.0)

    def correct(self, estimated: int, actual: int) -> None:
        """Charge usage beyond the estimate.

        Never refund: servers charge the estimate (prompt + max_tokens) when a request
        arrives, as OpenAI does, so a refund would make us believe in budget they don't have.
        """
        if actual > estimated:
            self.tokens.take(actual - estimated)

    def observe(self, hints: LimitHints | None) -> None:
        """Learn limits from the server's hints, and never believe we have more than the server says."""
        if hints is None:
            return
        now = self.clock.monotonic()
        for bucket, limit, remaining, user, pending in (
            (self.requests, hints.requests_limit, hints.requests_remaining, self.user_set[0], self.in_flight_requests),
            (self.tokens, hints.tokens_limit, hints.tokens_remaining, self.user_set[1], self.in_flight_tokens),
        ):
            if limit and not user and bucket.rate != limit:
                bucket.set_rate(limit)
            if remaining is not None and bucket.rate is not None:
                bucket.refill(now)
                # The server counted this request, not the ones we sent after it: subtract those.
                server_view = remaining - max(0.0, pending)
                if server_view < bucket.level:
                    bucket.level = server_view
