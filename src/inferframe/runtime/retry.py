"""Per-row retries: exponential backoff with full jitter; Retry-After always wins."""

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

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random = random._inst) -> float:  # type: ignore[attr-defined]
        backoff = rng.uniform(0, min(self.cap, self.base * 2 ** (attempt - 1)))
        return max(backoff, retry_after) if retry_after is not None else backoff
