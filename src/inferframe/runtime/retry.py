"""Per-row retries: backoff with full jitter, exponential while failures persist; Retry-After always wins."""

from __future__ import annotations

import dataclasses
import random

from inferframe.errors import ErrorKind


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before trying a row again.

    Parameters:
        max_attempts: attempts per row, the first included.
        base: first backoff ceiling in seconds.
        cap: largest backoff ceiling in seconds.
    """

    max_attempts: int = 6
    base: float = 0.5
    cap: float = 30.0

    def should_retry(self, kind: str, attempt: int) -> bool:
        return ErrorKind(kind).retryable and attempt < self.max_attempts

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random = random._inst,  # type: ignore[attr-defined]
              escalate: bool = True) -> float:
        """Seconds to wait before attempt ``attempt + 1``: at least ``retry_after`` when the server gave one.

        ``escalate``: failures persist (``AdaptiveLimit.failing``): the ceiling doubles with each
        attempt. Without that, one row failing again is bad luck among answers that mostly
        succeed, not a server to spare: its ceiling stays ``base``. Doubling for it put a row that
        failed four times seconds behind the rest of the job, at its end (issue 15).

        Example:
            >>> p, rng = RetryPolicy(base=0.5, cap=30.0), random.Random(1)
            >>> max(p.delay(4, None, rng) for _ in range(200)) > 2.0     # persisting: up to 4 s
            True
            >>> max(p.delay(4, None, rng, escalate=False) for _ in range(200)) <= 0.5
            True
            >>> p.delay(4, 1.5, rng, escalate=False) >= 1.5                # Retry-After always
            True
        """
        ceiling = min(self.cap, self.base * 2 ** (attempt - 1)) if escalate else min(self.cap, self.base)
        backoff = rng.uniform(0, ceiling)
        return max(backoff, retry_after) if retry_after is not None else backoff
