"""One token bucket of the client's rate limiter: refilled continuously at a rate per minute, never
larger than the server's bucket as its limit hints tell, keeping a reserve above empty, and halving its
burst when a 429 contradicts the hints (growing back slowly after). ``RateLimiter`` (``ratelimit``)
holds one for requests and one for tokens; why each rule is there is told in its docstring."""

from __future__ import annotations

import math

from inferframe.runtime.clock import REAL, Clock

__all__ = ["Bucket", "MIN_BURST_SECONDS", "REGROW_SECONDS", "RESERVE_SECONDS", "SHRINK", "SHRINK_GAP_S",
           "WINDOW_EXCESS"]

# Seconds of budget kept in the server's bucket, so that jitter in when requests arrive never finds it empty.
RESERVE_SECONDS = 0.05
# A hint whose ``remaining + reset * rate`` exceeds the minute's budget by this factor is a fixed window:
# its reset is the time until the window ends, not what was spent (a continuously refilled bucket).
WINDOW_EXCESS = 1.05
# A 429 the headers did not predict halves the burst; later ones within this many seconds (the rest of
# the same burst coming back) count once.
SHRINK = 0.5
SHRINK_GAP_S = 1.0
# The smallest burst a 429 leaves: this many seconds of the rate (at least one request).
MIN_BURST_SECONDS = 0.05
# While no unpredicted 429 comes, a shrunk burst grows by exp(seconds / REGROW_SECONDS).
REGROW_SECONDS = 30.0


class Bucket:
    """A token bucket refilled continuously at ``rate`` per minute, no larger than the server's."""

    def __init__(self, rate: float | None, burst_seconds: float, clock: Clock = REAL) -> None:
        self.burst_seconds = burst_seconds
        self.clock = clock
        self.rate: float | None = None
        self.server_size: float | None = None  # how much the server lets through at once, once a hint tells
        self.window = False  # a hint showed a fixed window: what it says is left may all go at once
        self.cap = math.inf  # the burst the server's 429s allow (``contradicted``); inf: as the hints say
        self.shrunk_at = -math.inf
        self.level = 0.0
        self.stamp = clock.monotonic()
        self.sent = 0.0  # everything admitted so far, to read a hint against what was sent after it
        self.reserve_seconds = RESERVE_SECONDS  # set by the limiter from the size of a burst
        if rate is not None:
            self.set_rate(rate)

    @property
    def hinted(self) -> float:
        """The server's bucket as its hints tell (else ``burst_seconds`` of the rate)."""
        if self.server_size is not None:
            return self.server_size
        return (self.rate or 0.0) * self.burst_seconds / 60.0

    @property
    def size(self) -> float:
        """The server's bucket: as the hints tell, no larger than its 429s allow."""
        return min(self.hinted, self.cap)

    @property
    def reserve(self) -> float:
        # Never more than half the bucket, nor so large that a bucket of one request could not be spent. A
        # window does not refill while a burst reaches it, so a burst's late arrival needs no reserve there:
        # at 12,000 RPM it kept 4,800 of the window's 12,000 unused, and the job waited for the next minute.
        size = self.size
        seconds = RESERVE_SECONDS if self.window else self.reserve_seconds
        return min((self.rate or 0.0) / 60.0 * seconds, size / 2, max(0.0, size - 1.0))

    @property
    def capacity(self) -> float:
        """What may be spent at once: the server's bucket less the reserve."""
        return max(1.0, self.size - self.reserve)

    def set_rate(self, rate: float) -> None:
        first = self.rate is None
        self.rate = rate
        if first:
            self.level = self.capacity
            self.stamp = self.clock.monotonic()

    def refill(self, now: float) -> None:
        if self.rate is None:
            return
        elapsed = now - self.stamp
        if self.cap != math.inf and elapsed > 0:  # no unpredicted 429 since the last refill: grow back
            self.cap *= math.exp(elapsed / REGROW_SECONDS)
            if self.cap >= self.hinted:
                self.cap = math.inf
        self.level = min(self.capacity, self.level + elapsed * self.rate / 60.0)
        self.stamp = now

    def contradicted(self, now: float) -> None:
        """A 429 the hints did not predict: empty the bucket, and halve the burst (once per ``SHRINK_GAP_S``)."""
        if self.rate is None:
            return
        self.refill(now)
        if now - self.shrunk_at >= SHRINK_GAP_S:
            self.shrunk_at = now
            floor = max(1.0, self.rate / 60.0 * MIN_BURST_SECONDS)
            self.cap = max(floor, self.size * SHRINK)
        self.level = min(self.level, 0.0)

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
        self.sent += amount
        if self.rate is not None:
            self.level -= amount

    def observe(self, limit: float | None, remaining: float | None, reset: float | None, user_set: bool,
                sent_then: float | None, sent_at: float, now: float) -> None:
        """Learn the rate and the server's size from one hint, and bring the level within what it implies."""
        if limit and not user_set and self.rate != limit:
            self.set_rate(limit)
        if self.rate is None or remaining is None:
            return
        server_rate = limit or self.rate
        if reset is not None:  # at most a minute of our own rate: a user's lower rpm is kept at any size
            claim = remaining + reset * server_rate / 60.0
            if claim > WINDOW_EXCESS * server_rate + 1.0:
                self.window = True
            size = min(server_rate, self.rate, claim)
            if not self.window:  # a bucket that claims more than a second may be quantized: not trusted
                size = min(size, self.rate * self.burst_seconds / 60.0)
            self.server_size = size if self.server_size is None else max(self.server_size, size)
        self.refill(now)
        since = max(0.0, self.sent - sent_then) if sent_then is not None else 0.0
        low = remaining - since  # what the server has now if nothing refilled since it answered
        high = low + max(0.0, now - sent_at) * server_rate / 60.0  # ... and if it refilled all along
        reserve = self.reserve
        level = min(self.level, high - reserve)
        # Raised to what the server surely has (a window's burst is used, a level the client lowered too far
        # comes back), where the hint describes the bucket modelled here: a window, or a remaining budget that
        # fits in it. "1,187 left" of a bucket held to 20 speaks of a minute that may be quantized.
        if self.window or remaining <= self.size + 1.0:
            level = max(level, min(low - reserve, self.capacity))
        self.level = level
