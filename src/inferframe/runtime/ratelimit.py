"""Requests-per-minute and tokens-per-minute budgets, set by the user or learned from headers.

Hand-written because the limiter must be shared by every row of a job, honour
Retry-After for everyone, and correct itself from x-ratelimit-* headers; no
well-kept async library does all three.

Budgets are paced, not spent in bursts: each bucket holds at most
``burst_seconds`` of its per-minute rate, because servers differ in how much
of a minute's quota they let through at once and a burst they refuse costs a
storm of 429s.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Mapping


class _Bucket:
    """A token bucket refilled continuously at ``rate`` per minute, holding ``burst_seconds`` of it."""

    def __init__(self, rate: float | None, burst_seconds: float) -> None:
        self.burst_seconds = burst_seconds
        self.rate: float | None = None
        self.level = 0.0
        self.stamp = time.monotonic()
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
            self.stamp = time.monotonic()

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


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?$")


def parse_reset(value: str) -> float | None:
    """Parse OpenAI's reset durations such as '1s', '6m0s', '20ms', '0.5s'."""
    m = _DURATION.match(value.strip())
    if not m or not any(m.groups()):
        try:
            return float(value)
        except ValueError:
            return None
    h, mnt, s, ms = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mnt * 60 + s + ms / 1000


class RateLimiter:
    """Admit requests within RPM/TPM budgets; a 429's Retry-After pauses admission for everyone.

    Parameters:
        rpm: requests per minute (None: unlimited until headers say otherwise).
        tpm: tokens per minute (None: unlimited until headers say otherwise).
        burst_seconds: how many seconds of budget may be spent at once.

    Until the first response arrives, only one request is admitted when the user set no
    limits: the answer's x-ratelimit-* headers say what the limits are, so the job never
    opens with a burst the server refuses.
    """

    def __init__(self, rpm: float | None = None, tpm: float | None = None, burst_seconds: float = 2.0) -> None:
        self.requests = _Bucket(rpm, burst_seconds)
        self.tokens = _Bucket(tpm, burst_seconds)
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
        if self._unlimited() and time.monotonic() >= self.paused_until:
            self._admit(tokens)
            return
        async with self._lock:  # FIFO admission keeps waiting rows in order and avoids stampedes
            while True:
                now = time.monotonic()
                if now < self.paused_until:
                    await asyncio.sleep(self.paused_until - now)
                    continue
                self.requests.refill(now)
                self.tokens.refill(now)
                wait = max(self.requests.wait_for(1), self.tokens.wait_for(tokens))
                if wait <= 0:
                    self.requests.take(1)
                    self.tokens.take(tokens)
                    self._admit(tokens)
                    return
                await asyncio.sleep(max(0.001, min(wait, 1.0)))  # floor: float rounding must not spin

    def _admit(self, tokens: int) -> None:
        self.in_flight_requests += 1
        self.in_flight_tokens += tokens

    def release(self, tokens: int, headers: Mapping[str, str] | None) -> None:
        """A request admitted with ``tokens`` got its answer (or failed): learn from its headers."""
        self.in_flight_requests -= 1
        self.in_flight_tokens -= tokens
        self.observe_headers(headers)
        if not self._probe_done.is_set():
            self._probe_done.set()

    def pause(self, seconds: float) -> None:
        """A 429: stop admitting for ``seconds``, and restart from an empty bucket, not a stampede."""
        self.paused_until = max(self.paused_until, time.monotonic() + seconds)
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

    def observe_headers(self, headers: Mapping[str, str] | None) -> None:
        """Learn limits from x-ratelimit-* headers, and never believe we have more than the server says."""
        if not headers:
            return
        get = headers.get
        now = time.monotonic()
        for bucket, kind, user, pending in (
            (self.requests, "requests", self.user_set[0], self.in_flight_requests),
            (self.tokens, "tokens", self.user_set[1], self.in_flight_tokens),
        ):
            limit = get(f"x-ratelimit-limit-{kind}")
            if limit and not user:
                try:
                    rate = float(limit)
                except ValueError:
                    continue
                if bucket.rate != rate:
                    bucket.set_rate(rate)
            remaining = get(f"x-ratelimit-remaining-{kind}")
            if remaining is not None and bucket.rate is not None:
                try:
                    rem = float(remaining)
                except ValueError:
                    continue
                bucket.refill(now)
                # The server counted this request, not the ones we sent after it: subtract those.
                server_view = rem - max(0.0, pending)
                if server_view < bucket.level:
                    bucket.level = server_view
