"""Requests go at the limit from the moment it is known, in virtual time (no HTTP, no real sleeping).

Issue 36, item 4: against a server that holds one second of its 12,000 RPM, answers after 1 s and
sends no ``x-ratelimit-reset-*`` headers (the independent test server), the sender pool grew by one
sender per answer once the limit was known: 64, 128, 256 requests in the first seconds instead of
200 each, about two seconds of the limit lost per job.
"""

from __future__ import annotations

import asyncio

from inferframe.runtime.concurrency import AdaptiveLimit
from inferframe.simulator.ratelimit import RateLimiter as ServerLimits
from test_limits_follow_server import Server, rows, runtime, timed
from virtual_time import VirtualTimeLoop


def independent_server(rpm: int) -> Server:
    """The independent server of issue 36: a bucket of one second refilled continuously, no reset headers."""
    server = Server(rpm, latency=1.0)
    server.limits = ServerLimits(rpm, None, 1.0, headers="no_reset")
    arrived = server.arrived = []
    acquire = server.limits.acquire

    def counted(key, cost, now):
        arrived.append(now)
        return acquire(key, cost, now)

    server.limits.acquire = counted
    return server


def per_second(times: list[float], start: float, seconds: int) -> list[int]:
    return [sum(start + s <= t < start + s + 1 for t in times) for s in range(seconds)]


def test_requests_go_at_the_limit_from_the_first_answer_on():
    # Learned: the probe's answer at 1 s tells the limit; user-set: it is known before the first request.
    for options, known_at in (({}, 1.0), ({"rpm": 12000}, 0.0)):
        server, vt = independent_server(12000), VirtualTimeLoop()
        vt.run(timed(runtime(server, vt, **options), rows(1500)))
        seconds = per_second(server.arrived, known_at, 4)
        assert min(seconds) >= 190, (options, seconds)  # 200 a second: the limit, not a ramp of the pool
        assert server.denied == 0, options
        if not options:
            assert per_second(server.arrived, 0.0, 1) == [1]  # one probe while nothing is known


def test_a_later_job_recalls_the_limits_and_goes_at_them_at_once():
    from inferframe.runtime.coordinator import LocalCoordinator
    from inferframe.runtime import InferenceRuntime
    from inferframe.providers.interface import MockProvider
    from virtual_time import LoopClock

    server, vt = independent_server(12000), VirtualTimeLoop()
    clock = LoopClock(vt)
    base = runtime(server, vt)

    def job() -> InferenceRuntime:  # each job has its coordinator; the second recalls what the first learned
        limits = LocalCoordinator(clock).limits("test-recall-sized|m", base.config, "acct")
        return InferenceRuntime(MockProvider(server.handle), base.config, model="m", clock=clock, limits=limits)

    async def two_jobs():
        await timed(job(), rows(300))
        await asyncio.sleep(5.0)
        start = asyncio.get_running_loop().time()
        await timed(job(), rows(1500, 300))
        return start

    start = vt.run(two_jobs())
    seconds = per_second(server.arrived, start, 4)
    assert min(seconds) >= 190, seconds
    assert server.denied == 0


def test_the_bound_follows_the_latency_learned_over_the_first_answers():
    # The first answers back are the fastest of the first burst (0.5 s of a 1 s median): the bound sized
    # from them (200 at 200 requests/s) is what the rate needs with no room for the spread. It follows
    # the mean latency as the slower answers come, as long as AIMD has cut nothing since it was sized.
    from inferframe.runtime.clock import FakeClock

    lim = AdaptiveLimit(64, 1024, base=64, clock=FakeClock())
    lim.on_success(0.5, rate=200.0)
    assert lim.limit == 200
    for _ in range(60):
        lim.on_success(1.0, rate=200.0)
    assert lim.limit == lim.target >= 380  # 2 x 200/s x about 1 s; one slot per round trip left it near 200
    lim.on_congestion()  # a cut: AIMD regrows it slowly from here, and a longer latency does not undo it
    cut = lim.limit
    for _ in range(20):
        lim.on_success(1.5, rate=200.0)
    assert cut <= lim.limit < cut + 1
