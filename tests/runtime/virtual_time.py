"""Virtual time for runtime tests: an event loop whose clock jumps to the next timer, and the runtime's clock on it."""

from __future__ import annotations

import asyncio

from inferframe.runtime.clock import Clock


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose time moves to the next timer at once when nothing else is ready."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        select = self._selector.select

        def jump(timeout=None):
            if timeout:
                self.now += timeout
            return select(0)

        self._selector.select = jump

    def time(self) -> float:
        return self.now

    def run(self, coro):
        try:
            return self.run_until_complete(coro)
        finally:
            self.close()


class LoopClock(Clock):
    """The runtime's clock read from ``loop`` (virtual time in these tests)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def monotonic(self) -> float:
        return self.loop.time()
