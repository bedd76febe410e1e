"""OpenAI-style rate limiting: continuously refilled buckets, or fixed per-minute windows.

``mode="bucket"`` (OpenAI's way): each bucket holds up to ``limit * burst_s / 60``
units and refills at ``limit / 60`` units per second, so over any minute at most
about ``limit`` units pass (``burst_s=60`` allows a whole minute's quota at once,
``burst_s=1`` about one second of it, as hosted APIs do).

``mode="window"``: a fixed window of ``window_s`` seconds (a minute by default)
starts with the first request and allows ``limit * window_s / 60`` units, all at
once if the client likes (a burst); nothing comes back until the window ends,
then the whole budget does.  ``x-ratelimit-reset-*`` and Retry-After tell the time
until the window ends.

``mode="quantized"`` (what OpenAI's rate-limit guide warns of: "60,000 requests/minute
may be enforced as 1,000 requests/second"): the headers speak of a per-minute bucket
(``x-ratelimit-remaining-requests: 1187`` of 1,200), but a second bucket of
``quantum_s`` seconds of the rate (one second by default) is what admits: the 21st
request within one second at 1,200 RPM is refused although the headers say 1,187 are
left.  Retry-After tells when the small bucket has room again.

``headers``: ``"all"`` (limit, remaining and reset), ``"no_reset"`` (no
``x-ratelimit-reset-*``), or ``"none"`` (no ``x-ratelimit-*`` at all; 429s still carry
Retry-After), for clients that must cope with servers that tell less.

A request needs 1 request unit and ``cost`` token units; a denied request
consumes nothing.  Headers follow OpenAI: ``x-ratelimit-limit-*``,
``x-ratelimit-remaining-*``, ``x-ratelimit-reset-*`` (the time until the budget is
whole again, as Go-style durations such as ``"1s"``, ``"6m0s"``, ``"20ms"``).

Example:
    >>> import time
    >>> rl = RateLimiter(rpm=60, tpm=None)
    >>> d = rl.acquire("gpt-4o-mini", cost=10, now=time.monotonic())
    >>> d.allowed, d.headers["x-ratelimit-remaining-requests"]
    (True, '59')
    >>> w = RateLimiter(rpm=60, tpm=None, mode="window")
    >>> [w.acquire("m", cost=1, now=0.0).allowed for _ in range(61)].count(True)   # the minute at once
    60
    >>> d = w.acquire("m", cost=1, now=20.0)
    >>> d.allowed, d.retry_after_s, d.headers["x-ratelimit-reset-requests"]     # nothing back until the window ends
    (False, 40.0, '40s')
    >>> w.acquire("m", cost=1, now=60.0).allowed
    True
    >>> q = RateLimiter(rpm=1200, tpm=None, mode="quantized")
    >>> [q.acquire("m", cost=1, now=0.0).allowed for _ in range(21)].count(True)   # 20 a second, not 1,200
    20
    >>> d = q.acquire("m", cost=1, now=0.0)
    >>> d.allowed, d.headers["x-ratelimit-remaining-requests"], round(d.retry_after_s, 3)   # "1,180 left", refused
    (False, '1180', 0.05)
"""

from __future__ import annotations

import math
from typing import Optional

__all__ = ["RateLimiter", "Decision", "format_duration"]


def format_duration(seconds: float) -> str:
    """Format like Go's time.Duration (as OpenAI's reset headers do).

    Example:
        >>> [format_duration(s) for s in (0, 0.02, 1, 59.56, 360, 3725)]
        ['0s', '20ms', '1s', '59.56s', '6m0s', '1h2m5s']
    """
    if seconds <= 0:
        return "0s"
    if seconds < 1.0:
        ms = math.ceil(seconds * 1000)
        return "1s" if ms >= 1000 else f"{ms}ms"
    total_ms = math.ceil(seconds * 1000)
    h, rem = divmod(total_ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    sec = f"{s}.{ms:03d}".rstrip("0").rstrip(".") if ms else str(s)
    if h:
        return f"{h}h{m}m{sec}s"
    if m:
        return f"{m}m{sec}s"
    return f"{sec}s"


class _Bucket:
    __slots__ = ("capacity", "rate", "level", "last")

    def __init__(self, limit: int, burst_s: float, now: float) -> None:
        self.rate = limit / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self.last = now

    def refill(self, now: float) -> float:
        level = self.level + (now - self.last) * self.rate
        if level > self.capacity:
            level = self.capacity
        self.level = level
        self.last = now
        return level

    def wait(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` is there (after :meth:`refill`)."""
        return (amount - self.level) / self.rate

    def reset_in(self, now: float) -> float:
        """Seconds until the bucket is full again."""
        return (self.capacity - self.level) / self.rate

    def take(self, amount: float) -> None:
        self.level -= amount

    def shown(self) -> float:
        """The level the headers tell."""
        return self.level


class _Window:
    """A fixed window of ``length`` seconds holding ``limit * length / 60`` units, refilled whole when it ends."""

    __slots__ = ("capacity", "length", "level", "start")

    def __init__(self, limit: int, length: float, now: float) -> None:
        self.capacity = max(1.0, limit * length / 60.0)
        self.length = length
        self.level = self.capacity
        self.start = now

    def refill(self, now: float) -> float:
        if now >= self.start + self.length:
            self.start = now - (now - self.start) % self.length
            self.level = self.capacity
        return self.level

    def wait(self, amount: float, now: float) -> float:
        return self.start + self.length - now

    def reset_in(self, now: float) -> float:
        return 0.0 if self.level >= self.capacity else self.start + self.length - now

    def take(self, amount: float) -> None:
        self.level -= amount

    def shown(self) -> float:
        return self.level


class _Quantized:
    """A per-minute bucket that the headers tell of, enforced by a bucket of ``quantum_s`` seconds of the rate."""

    __slots__ = ("minute", "quantum", "capacity")

    def __init__(self, limit: int, quantum_s: float, now: float) -> None:
        self.minute = _Bucket(limit, 60.0, now)
        self.quantum = _Bucket(limit, quantum_s, now)
        self.capacity = self.minute.capacity  # what "used" in a 429's message counts against

    def refill(self, now: float) -> float:
        """The level that admits: what both buckets hold."""
        return min(self.minute.refill(now), self.quantum.refill(now))

    def wait(self, amount: float, now: float) -> float:
        return max(self.minute.wait(amount, now), self.quantum.wait(amount, now))

    def reset_in(self, now: float) -> float:
        return self.minute.reset_in(now)

    def take(self, amount: float) -> None:
        self.minute.take(amount)
        self.quantum.take(amount)

    def shown(self) -> float:
        return self.minute.level


class Decision:
    """Outcome of :meth:`RateLimiter.acquire`.

    Attributes: allowed, headers (x-ratelimit-* to put on the response),
    reason ('requests' | 'tokens' | 'too_large' | None), retry_after_s, used, limit.
    """

    __slots__ = ("allowed", "headers", "reason", "retry_after_s", "used", "limit")

    def __init__(self, allowed, headers, reason=None, retry_after_s=0.0, used=0, limit=0):
        self.allowed = allowed
        self.headers = headers
        self.reason = reason
        self.retry_after_s = retry_after_s
        self.used = used
        self.limit = limit


class RateLimiter:
    """Request/token buckets per key (the model, or one global key).

    Params:
        rpm, tpm: limits per minute (None = unlimited for that dimension).
        burst_s: bucket capacity in seconds of refill (default 60; mode 'bucket').
        mode: 'bucket' (continuous refill), 'window' (fixed windows of ``window_s``) or
            'quantized' (per-minute headers, enforced per ``quantum_s``).
        window_s: length of a window (mode 'window').
        quantum_s: seconds of the rate the enforcing bucket holds (mode 'quantized').
        headers: 'all', 'no_reset' (no x-ratelimit-reset-*) or 'none' (no x-ratelimit-*).
    """

    def __init__(self, rpm: Optional[int], tpm: Optional[int], burst_s: float = 60.0, mode: str = "bucket",
                 window_s: float = 60.0, quantum_s: float = 1.0, headers: str = "all") -> None:
        self.rpm = rpm
        self.tpm = tpm
        self.burst_s = burst_s
        if mode == "window":
            self._new = lambda limit, now: _Window(limit, window_s, now)
        elif mode == "quantized":
            self._new = lambda limit, now: _Quantized(limit, quantum_s, now)
        else:
            self._new = lambda limit, now: _Bucket(limit, burst_s, now)
        self._headers = headers != "none"
        self._reset = headers == "all"
        self._req: dict[str, _Bucket] = {}
        self._tok: dict[str, _Bucket] = {}
        self._rpm_s = str(rpm) if rpm else ""
        self._tpm_s = str(tpm) if tpm else ""

    @property
    def active(self) -> bool:
        return bool(self.rpm or self.tpm)

    def acquire(self, key: str, cost: int, now: float) -> Decision:
        """Take 1 request and ``cost`` tokens from ``key``'s buckets if both suffice."""
        headers: dict[str, str] = {}
        rb = tb = None
        rlevel = tlevel = 0.0
        if self.rpm:
            rb = self._req.get(key)
            if rb is None:
                rb = self._req[key] = self._new(self.rpm, now)
            rlevel = rb.refill(now)
        if self.tpm:
            tb = self._tok.get(key)
            if tb is None:
                tb = self._tok[key] = self._new(self.tpm, now)
            tlevel = tb.refill(now)
        reason = None
        wait = 0.0
        used = limit = 0
        if tb is not None and cost > tb.capacity:
            reason, used, limit = "too_large", cost, self.tpm or 0
        else:
            if rb is not None and rlevel < 1.0:
                reason = "requests"
                wait = rb.wait(1.0, now)
                used, limit = int(rb.capacity - rb.shown()), self.rpm or 0
            if tb is not None and tlevel < cost:
                w = tb.wait(cost, now)
                if reason is None or w > wait:
                    reason, wait = "tokens", w
                    used, limit = int(tb.capacity - tb.shown()), self.tpm or 0
        allowed = reason is None
        if allowed:
            if rb is not None:
                rb.take(1.0)
            if tb is not None:
                tb.take(cost)
        if rb is not None and self._headers:
            headers["x-ratelimit-limit-requests"] = self._rpm_s
            headers["x-ratelimit-remaining-requests"] = str(int(rb.shown()))
            if self._reset:
                headers["x-ratelimit-reset-requests"] = format_duration(rb.reset_in(now))
        if tb is not None and self._headers:
            headers["x-ratelimit-limit-tokens"] = self._tpm_s
            headers["x-ratelimit-remaining-tokens"] = str(max(0, int(tb.shown())))
            if self._reset:
                headers["x-ratelimit-reset-tokens"] = format_duration(tb.reset_in(now))
        return Decision(allowed, headers, reason, wait, used, limit)
