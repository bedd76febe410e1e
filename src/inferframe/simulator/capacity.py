"""A self-hosted server's capacity: at most ``capacity`` requests served at once, the rest wait in a FIFO.

vLLM, llama.cpp's server, TGI and SGLang batch the requests they serve: up to the batch size the
latency stays about flat, past it requests queue. They send no ``x-ratelimit-*`` headers and no
429s; a client that sends more than the batch only makes its requests wait. This models that:
``capacity`` requests are served at once; a request that finds them all busy waits, first come
first served, and its wait is counted (``queued``, ``queue_wait_s`` in ``/_sim/stats``).
``slowdown``: a batch of decode steps takes a little longer the more requests it holds; a request
served with ``n`` others takes ``latency x (1 + slowdown x n / capacity)``.

Example:
    >>> import asyncio
    >>> async def two_at_once():
    ...     slots = ServingSlots(capacity=1)
    ...     async def one():
    ...         async with slots.slot() as factor:
    ...             await asyncio.sleep(0.01)
    ...     await asyncio.gather(one(), one())
    ...     return slots.queued, slots.queue_wait_s > 0.005
    >>> asyncio.run(two_at_once())
    (1, True)
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from time import monotonic

__all__ = ["ServingSlots"]


class ServingSlots:
    """``capacity`` requests served at once, the rest queued first come first served (see module docstring).

    Attributes:
        serving: requests being served now; ``waiting``: requests queued now.
        served: requests that took a slot; ``queued``: those that had to wait first;
        ``queue_wait_s``: their waits summed, in seconds.
        max_waiting: the longest queue seen.
    """

    def __init__(self, capacity: int, slowdown: float = 0.0) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self.slowdown = slowdown
        self.serving = 0
        # Hand-written: asyncio.Semaphore does not promise FIFO order across releases, which this model needs.
        self._queue: collections.deque[asyncio.Future] = collections.deque()
        self.served = 0
        self.queued = 0
        self.queue_wait_s = 0.0
        self.max_waiting = 0

    @property
    def waiting(self) -> int:
        return len(self._queue)

    @contextlib.asynccontextmanager
    async def slot(self):
        """Hold one of the slots while served; yields the latency factor of the batch it joined."""
        self.served += 1
        if self.serving >= self.capacity or self._queue:
            fut = asyncio.get_running_loop().create_future()
            self._queue.append(fut)
            self.max_waiting = max(self.max_waiting, len(self._queue))
            began = monotonic()
            try:
                await fut  # the slot is handed over by the request that leaves it (``serving`` unchanged)
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._leave()
                else:
                    self._queue.remove(fut)
                raise
            finally:
                self.queued += 1
                self.queue_wait_s += monotonic() - began
        else:
            self.serving += 1
        try:
            yield 1.0 + self.slowdown * (self.serving - 1) / self.capacity
        finally:
            self._leave()

    def _leave(self) -> None:
        while self._queue:
            fut = self._queue.popleft()
            if not fut.done():
                fut.set_result(None)  # the slot passes to the next in line
                return
        self.serving -= 1
