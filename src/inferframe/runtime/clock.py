"""Time as the runtime sees it: injectable, so limits and retries are tested without real sleeping.

Example:
    >>> import asyncio
    >>> clock = FakeClock()
    >>> asyncio.run(clock.sleep(2.5)); clock.monotonic()
    2.5
"""

from __future__ import annotations

import asyncio
import time


class Clock:
    """Wall time: ``time.monotonic`` and ``asyncio.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock(Clock):
    """Virtual time for tests: ``sleep`` moves the clock forward at once (and yields to other tasks)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(0.0, seconds)
        await asyncio.sleep(0)


REAL = Clock()
