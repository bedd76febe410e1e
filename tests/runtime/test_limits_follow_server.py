"""The runtime against model servers with rate limits, in virtual time: no HTTP and no real sleeping.

The servers are MockProviders whose limits are the simulator's own (``inferframe.simulator.ratelimit``:
a continuously refilled bucket, or a per-minute window) and whose headers are read by the OpenAI
wire format's ``limit_hints``, as the real provider does. Many requests are in flight at once with
a latency each, which a FakeClock cannot model (its sleeps add up one after another); these tests
run on an event loop whose clock jumps to the next timer instead of waiting for it.
"""

from __future__ import annotations

import asyncio

from inferframe.ai.options import parse_options
from inferframe.errors import ErrorKind
from inferframe.providers.interface import Capabilities, MockProvider, Outcome, Request
from inferframe.providers.openai_format import limit_hints
from inferframe.runtime import InferenceRuntime, RuntimeConfig
from inferframe.runtime.concurrency import AdaptiveLimit
from inferframe.session import Session
from inferframe.simulator.ratelimit import RateLimiter as ServerLimits
from virtual_time import LoopClock, VirtualTimeLoop


class Server:
    """A model server with the simulator's rate limits; answers after ``latency`` seconds.

    ``stall``: nothing sent before this time reaches the server before it (the client's event
    loop is busy putting a burst on the wire); the server counts a request when it arrives.
    """

    def __init__(self, rpm: int, *, burst_s: float = 1.0, mode: str = "bucket", latency: float = 0.1,
                 stall: float = 0.0) -> None:
        self.limits = ServerLimits(rpm, None, burst_s, mode)
        self.latency, self.stall = latency, stall
        self.ok = self.denied = self.in_flight = self.peak = 0
        self.answered_at: list[float] = []

    async def handle(self, request: Request) -> Outcome:
        loop = asyncio.get_running_loop()
        if loop.time() < self.stall:
            await asyncio.sleep(self.stall - loop.time())
        d = self.limits.acquire("m", 1, loop.time())
        hints = limit_hints(d.headers)
        if not d.allowed:
            self.denied += 1
            return Outcome(status=429, error_kind=ErrorKind.RATE_LIMIT, retry_after=d.retry_after_s, limits=hints,
                           message="HTTP 429: rate limit")
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(self.latency)
        self.in_flight -= 1
        self.ok += 1
        self.answered_at.append(loop.time())
        return Outcome(value="ok", status=200, limits=hints)


def runtime(server: Server, loop: VirtualTimeLoop, **options) -> InferenceRuntime:
    """A runtime as prompt() builds it: options through the one parser, default settings otherwise."""
    parsed = parse_options("prompt", {"cache": False, **options}, Capabilities(), Session(), model="m")
    return InferenceRuntime(MockProvider(server.handle), parsed.runtime, model="m", clock=LoopClock(loop))


def rows(n: int, start: int = 0) -> list[Request]:
    return [Request("chat", {"q": i}, est_tokens=20) for i in range(start, start + n)]


async def timed(rt: InferenceRuntime, requests: list[Request]) -> float:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    results = await rt.run_many(requests)
    assert all(r.value == "ok" for r in results)
    return loop.time() - t0


# --- point 3: no 429s at start-up, near the limit ----------------------------------------------


def test_user_limits_never_burst_past_a_one_second_bucket():
    # 1,200 RPM, the server holds one second of it (20). A client bucket of 2 s opened with 40 at once.
    server, vt = Server(1200, latency=0.1), VirtualTimeLoop()
    took = vt.run(timed(runtime(server, vt, rpm=1200), rows(500)))
    assert server.denied == 0
    possible = 20 + 20 * took  # one bucket at once, then the rate
    assert server.ok / possible >= 0.97


def test_learned_limits_burst_no_more_than_the_server_holds_after_a_pause():
    # Limits learned from headers; the job stops sending for a while (slow input, a stage upstream),
    # then sends again: the client's bucket must have filled no further than the server's.
    server, vt = Server(1200, latency=0.1), VirtualTimeLoop()
    rt = runtime(server, vt)

    async def job():
        await timed(rt, rows(50))
        await asyncio.sleep(5.0)
        return await timed(rt, rows(450, 50))

    took = vt.run(job())
    assert server.denied == 0
    assert server.ok - 50 >= 0.97 * (20 + 20 * took)


def test_a_burst_that_reaches_the_server_late_is_not_refused():
    # The first burst (a second of 12,000 RPM) reaches the server 0.2 s after the client counted it,
    # together with what was paced behind it: the server's bucket started refilling 0.2 s later
    # than the client's. The reserve for a burst absorbs it.
    server, vt = Server(12000, latency=1.0, stall=0.2), VirtualTimeLoop()
    vt.run(timed(runtime(server, vt, rpm=12000), rows(1000)))
    assert server.denied <= 0.01 * server.ok


def test_a_per_minute_window_is_used_at_once_without_a_storm_of_429s():
    # 600 RPM as a fixed window: 600 may go at once, then nothing until the minute ends.
    server, vt = Server(600, mode="window", latency=0.1), VirtualTimeLoop()
    took = vt.run(timed(runtime(server, vt), rows(900)))
    first_window = sum(t < 10.0 for t in server.answered_at)
    assert first_window >= 0.9 * 600  # the burst was used: paced at 10/s it would be about 100
    assert server.denied <= 5  # one refusal when the window runs out, not a storm
    assert took < 70.0  # the second window's part went at once too


# --- point 4: the in-flight bound follows the limit --------------------------------------------


def test_default_settings_reach_a_fast_limit_at_a_long_latency():
    # 12,000 RPM at 1 s: about 200 requests in flight are needed; a fixed 64 gives a third of it.
    for options in ({}, {"rpm": 12000}):
        server, vt = Server(12000, latency=1.0), VirtualTimeLoop()
        rt = runtime(server, vt, **options)
        took = vt.run(timed(rt, rows(8200)))  # 40 s at the limit: the probe's and the last round trip count little
        assert server.peak >= 190, options
        assert server.ok / (200 + 200 * took) >= 0.9, options
        assert rt.slots.target <= rt.config.max_concurrency


def test_max_concurrency_is_a_hard_ceiling():
    server, vt = Server(12000, latency=1.0), VirtualTimeLoop()
    rt = runtime(server, vt, max_concurrency=100)
    vt.run(timed(rt, rows(600)))
    assert server.peak == 100 and rt.slots.peak == 100


def test_without_known_limits_the_bound_grows_while_the_latency_stays_at_its_floor():
    """Issue 46: the bound of 64 used to stay for the whole job (a quarter of a self-hosted server's capacity)."""
    server, vt = Server(10**9, latency=1.0), VirtualTimeLoop()  # a limit nobody reaches; its headers still tell it
    rt = runtime(server, vt)
    rt.limiter.observe = lambda hints, ticket=None: None  # a server that tells nothing
    vt.run(timed(rt, rows(600)))
    assert rt.slots.peak > 64 and rt.config.max_concurrency == 1024
    assert [r for _, _, r in rt.slots.history][:2] == ["start", "latency"]


def test_aimd_still_cuts_a_sized_bound_and_regrows_slowly():
    vt = VirtualTimeLoop()
    lim = AdaptiveLimit(64, 1024, base=64, clock=LoopClock(vt))

    async def go():
        lim.on_success(1.0, rate=200.0)
        sized = lim.limit
        await asyncio.sleep(2.0)
        lim.on_congestion()  # a 429 or a timeout
        cut = lim.limit
        for _ in range(10):
            lim.on_success(1.0, rate=200.0)
        return sized, cut, lim.limit

    sized, cut, after = vt.run(go())
    assert sized == 400 and cut == 280 and cut < after < cut + 1  # about one slot per round trip
    lim.on_success(1.0, rate=210.0)  # a rate that drifts (a TPM limit, requests of varying size) keeps the cut
    assert lim.limit < 300
    lim.on_success(1.0, rate=400.0)  # new limits: the new size at once
    assert lim.limit == lim.target > 700
