"""A worker whose requests ended gives its in-flight share back at once, not after the coordinator's IDLE_S.

Found on Spark: a small AI job's first task took the whole share (the cluster's in-flight bound), finished,
and the other task's worker got a share of 0 until the coordinator forgot the first one 10 s later (one of
two tasks of each corpus query ran 10.4 s longer than the other, in Spark's event log). The driver's real
job service and two workers' leased limits, on one event loop, in real time.
"""

from __future__ import annotations

import asyncio

from inferframe.runners.ray_limits.tuning import IDLE_GRACE_S, IDLE_S
from inferframe.runners.spark_limits import SparkCoordinator
from inferframe.runners.spark_service import JobService
from inferframe.runtime.config import RuntimeConfig

KEY = "openai:http://127.0.0.1:9/v1|m"
CONFIG = RuntimeConfig(max_concurrency=8)  # no rate known: the in-flight bound is what is shared


async def _send(limiter, n: int) -> None:
    for _ in range(n):
        ticket = await limiter.acquire(10)
        limiter.release(10, None, ticket)


def test_a_worker_whose_requests_ended_gives_its_share_to_the_next_at_once():
    async def main(service):
        first = SparkCoordinator(service.link()).limits(KEY, CONFIG).limiter
        second = SparkCoordinator(service.link()).limits(KEY, CONFIG).limiter
        await _send(first, 3)
        assert first.share == 8  # alone: the whole bound
        # The second worker asks once the first is done; before, it got no share until IDLE_S had passed.
        await asyncio.wait_for(_send(second, 1), timeout=IDLE_S / 2)
        assert second.share == 8 and first.share == 0
        await asyncio.wait_for(_send(first, 1), timeout=IDLE_S / 2)  # back again: it asks and gets a share
        assert first.share >= 1

    with JobService() as service:
        asyncio.run(main(service))


def test_a_worker_with_requests_in_flight_keeps_its_share():
    async def main(service):
        busy = SparkCoordinator(service.link()).limits(KEY, CONFIG).limiter
        await _send(busy, 2)
        ticket = await busy.acquire(10)  # one in flight, past the grace
        await asyncio.sleep(3 * IDLE_GRACE_S)
        assert busy.share == 8 and busy.in_flight_requests == 1
        busy.release(10, None, ticket)
        for _ in range(100):  # then nothing in flight: it leaves within a few graces
            if busy.share == 0:
                break
            await asyncio.sleep(IDLE_GRACE_S / 5)
        assert busy.share == 0

    with JobService() as service:
        asyncio.run(main(service))
