"""One compute-bound prefill engine that every request queues for, first come first served.

A GPU server's prompt processing is bounded by its compute: the prefills of all
requests share one engine of ``tokens_per_second``.  The engine keeps virtual
time: a request that arrives at ``now`` starts when the engine is free (or
now, if idle), holds it for ``tokens / tokens_per_second`` and is answered
when that ends.  Only the tokens the prefix cache did not serve are given to
it, which is what makes a cached prefix answer faster.

Because the queue is FIFO and serial, every request reserved before another
has finished its prefill by the time the later one starts; the caller may
therefore look up and fill the prefix cache at reservation time.

Example:
    >>> e = PrefillEngine(tokens_per_second=1000)
    >>> e.reserve(500, now=10.0), e.reserve(500, now=10.0)   # the second waits for the first
    (0.5, 1.0)
    >>> round(e.reserve(100, now=20.0), 6)                    # idle again: only its own work
    0.1
"""

from __future__ import annotations

__all__ = ["PrefillEngine"]


class PrefillEngine:
    """FIFO prefill engine in virtual time (see module docstring).

    Params:
        tokens_per_second: prefill throughput (> 0).
    Attributes:
        busy_s: seconds of prefill work given to the engine so far.
    """

    __slots__ = ("rate", "free_at", "busy_s")

    def __init__(self, tokens_per_second: float) -> None:
        if not tokens_per_second > 0:
            raise ValueError("tokens_per_second must be > 0")
        self.rate = float(tokens_per_second)
        self.free_at = float("-inf")
        self.busy_s = 0.0

    def reserve(self, tokens: int, now: float) -> float:
        """Queue a prefill of ``tokens`` arriving at ``now`` (monotonic seconds); seconds until it is done."""
        work = tokens / self.rate
        start = self.free_at if self.free_at > now else now
        self.free_at = start + work
        self.busy_s += work
        return self.free_at - now
