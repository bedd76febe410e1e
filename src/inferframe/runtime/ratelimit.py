"""Requests-per-minute and tokens-per-minute budgets, set by the user or learned from headers.

Hand-written because the limiter must be shared by every row of a job, honour
Retry-After for everyone, and correct itself from x-ratelimit-* headers; no
well-kept async library does all three.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Mapping


class _Bucket:
    """A token bucket refilled continuously at ``capacity`` per minute."""

    def __init__(self, capacity: float | None) -> None:
        self.capacity = capacity
        self.level = capacity or 0.0
        self.stamp = time.monotonic()

    def refill(self, now: float) -> None:
        if self.capacity is None:
            return
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.capacity / 60.0)
        self.stamp = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` is available (0 when it is now)."""
        if self.capacity is None:
            return 0.0
        amount = min(amount, self.capacity)
        if self.level >= amount:
            return 0.0
        return (amount - self.level) * 60.0 / self.capacity

    def take(self, amount: float) -> None:
        if self.capacity is not None:
            self.level -= amount

    def set_capacity(self, capacity: float) -> None:
        if self.capacity is None:
            self.level = capacity
        self.capacity = capacity


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
    """

    def __init__(self, rpm: float | None = None, tpm: float | None = None) -> None:
        self.requests = _Bucket(rpm)
        self.tokens = _Bucket(tpm)
        self.user_set = (rpm is not None, tpm is not None)
        self.paused_until = 0.0
        self._lock = asyncio.Lock()

    async def acquire(self, tokens: int) -> None:
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
                    return
                await asyncio.sleep(min(wait, 1.0))

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, time.monotonic() + seconds)

    def correct(self, estimated: int, actual: int) -> None:
        """Charge the difference between the estimate and the usage that came back."""
        self.tokens.take(actual - estimated)

    def observe_headers(self, headers: Mapping[str, str] | None) -> None:
        """Learn limits from x-ratelimit-* headers, and never believe we have more than the server says."""
        if not headers:
            return
        get = headers.get
        for bucket, kind, user in ((self.requests, "requests", self.user_set[0]), (self.tokens, "tokens", self.user_set[1])):
            limit = get(f"x-ratelimit-limit-{kind}")
            if limit and not user:
                try:
                    cap = float(limit)
                except ValueError:
                    continue
                if bucket.capacity != cap:
                    bucket.set_capacity(cap)
            remaining = get(f"x-ratelimit-remaining-{kind}")
            if remaining is not None and bucket.capacity is not None:
                try:
                    rem = float(remaining)
                except ValueError:
                    continue
                bucket.refill(time.monotonic())
                if rem < bucket.level:
                    bucket.level = rem
