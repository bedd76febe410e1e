"""How the runtime reacts to 429s and faults (issue 15): a rate limit pauses everyone, a fault retries its row.

In virtual time (an event loop whose clock jumps to the next timer), with MockProviders that fail
chosen attempts of chosen rows; no HTTP, no real sleeping, and no assertion about how long a run
took in real time: what is checked is who was sent when (in virtual time), how often the in-flight
bound was cut, and what the progress counters said while rows waited.
"""

from __future__ import annotations

import asyncio
import collections

import pytest

from inferframe.errors import ErrorKind, ServiceError
from inferframe.observe.progress import render_line
from inferframe.observe.stats import RunCounters, RunStats
from inferframe.providers.interface import LimitHints, MockProvider, Outcome, Request
from inferframe.runners.ray_limits import LeasedLimiter, SharedBreaker, SharedSlots
from inferframe.runtime import InferenceRuntime, RuntimeConfig
from inferframe.runtime.clock import FakeClock
from inferframe.runtime.concurrency import AdaptiveLimit
from inferframe.runtime.ratelimit import RateLimiter
from virtual_time import LoopClock, VirtualTimeLoop


class Server:
    """Answers "ok" after ``latency``, except the attempts ``fail(row, attempt)`` returns an Outcome for.

    Records every send as (virtual time, row, attempt) and the runtime's in-flight bound at each send.
    """

    def __init__(self, fail, latency: float = 0.1) -> None:
        self.fail, self.latency = fail, latency
        self.sends: list[tuple[float, int, int]] = []
        self.bounds: list[float] = []
        self.attempts: collections.Counter = collections.Counter()
        self.rt: InferenceRuntime | None = None
        self.seen: list = []  # what on_send saw

    async def handle(self, request: Request) -> Outcome:
        loop = asyncio.get_running_loop()
        row = request.body["q"]
        attempt = self.attempts[row]
        self.attempts[row] += 1
        self.sends.append((loop.time(), row, attempt))
        self.bounds.append(self.rt.slots.limit)
        self.on_send(row, attempt)
        out = self.fail(row, attempt)
        if out is not None and out.error_kind == ErrorKind.RATE_LIMIT and out.status == 429 and out.message == "fast":
            return out  # a rate limiter's 429 comes back at once
        await asyncio.sleep(self.latency)
        return out if out is not None else Outcome(value=f"ok {row}", status=200)

    def on_send(self, row: int, attempt: int) -> None:
        pass

    def cuts(self) -> int:
        """How many times the in-flight bound was lower at a send than at the send before it."""
        return sum(1 for a, b in zip(self.bounds, self.bounds[1:]) if b < a)


def runtime(server: Server, loop: VirtualTimeLoop, **config) -> InferenceRuntime:
    cfg = RuntimeConfig(cache_policy="off", max_concurrency=64, **config)
    rt = InferenceRuntime(MockProvider(server.handle), cfg, model="m", clock=LoopClock(loop), seed=0)
    server.rt = rt
    return rt


def rows(n: int) -> list[Request]:
    return [Request("chat", {"q": i}, est_tokens=20) for i in range(n)]


def answered(results) -> bool:
    return all(r.value == f"ok {i}" for i, r in enumerate(results))


def rate_limited(retry_after: float, limits: LimitHints | None = None, fast: bool = False) -> Outcome:
    return Outcome(status=429, error_kind=ErrorKind.RATE_LIMIT, retry_after=retry_after, limits=limits,
                   message="fast" if fast else "HTTP 429: rate limit")


# --- point 1: an isolated 429 retries its row; a spent budget pauses everyone ---------------------


def test_an_isolated_429_retries_only_its_row_after_its_retry_after():
    server, vt = Server(lambda row, a: rate_limited(5.0) if row == 5 and a == 0 else None), VirtualTimeLoop()
    rt = runtime(server, vt)
    results = vt.run(rt.run_many(rows(300)))
    assert answered(results)
    others = [t for t, row, _ in server.sends if row != 5]
    retry = [t for t, row, a in server.sends if row == 5 and a == 1]
    assert max(others) < 5.0  # the other 299 rows went on: nobody waited for row 5's Retry-After
    assert retry and retry[0] >= 5.0  # ... and row 5 waited for it
    assert rt.stats.rate_limited == 1 and rt.stats.pauses == 0


def test_a_429_with_budget_left_in_its_headers_is_isolated_too():
    hints = LimitHints(requests_limit=60_000, requests_remaining=900, requests_reset=0.1)
    server = Server(lambda row, a: rate_limited(5.0, hints) if row == 5 and a == 0 else None)
    vt = VirtualTimeLoop()
    rt = runtime(server, vt)
    assert answered(vt.run(rt.run_many(rows(300))))
    assert max(t for t, row, _ in server.sends if row != 5) < 5.0
    assert rt.stats.pauses == 0


@pytest.mark.parametrize("hints", [LimitHints(requests_remaining=0),
                                   LimitHints(tokens_limit=100_000, tokens_remaining=12, tokens_reset=0.2)],
                         ids=["requests-spent", "tokens-spent"])
def test_a_429_that_says_the_budget_is_spent_pauses_everyone(hints):
    server = Server(lambda row, a: rate_limited(5.0, hints, fast=True) if row == 70 and a == 0 else None)
    vt = VirtualTimeLoop()
    rt = runtime(server, vt)
    assert answered(vt.run(rt.run_many(rows(300))))
    t429 = next(t for t, row, a in server.sends if row == 70 and a == 0)
    during = [t for t, _, _ in server.sends if t429 < t < t429 + 4.99]
    assert not during  # admission stopped for every row until the Retry-After passed
    assert rt.stats.pauses == 1


def test_several_429s_in_a_short_window_pause_everyone_without_headers():
    # Ten rows of one round answered 429 at once, no headers: a limit, not a fault.
    server = Server(lambda row, a: rate_limited(5.0, fast=True) if 10 <= row < 20 and a == 0 else None)
    vt = VirtualTimeLoop()
    rt = runtime(server, vt)
    assert answered(vt.run(rt.run_many(rows(300))))
    first = min(t for t, row, a in server.sends if 10 <= row < 20)
    assert not [t for t, _, _ in server.sends if first < t < first + 4.99]
    assert rt.stats.pauses >= 1


def test_isolated_429s_lower_the_bound_once_not_once_per_429():
    # One row in 40 gets a 429 first (no headers): about 8 a second over 6 s of virtual time.
    server = Server(lambda row, a: rate_limited(0.5) if row % 40 == 7 and a == 0 else None)
    vt = VirtualTimeLoop()
    rt = runtime(server, vt)
    assert answered(vt.run(rt.run_many(rows(2000))))
    assert rt.stats.rate_limited == 50 and rt.stats.pauses == 0
    assert server.cuts() == 1
    assert int(rt.slots.limit) == 64  # grown back after the one cut


def test_faults_retry_their_row_and_do_not_shrink_the_bound():
    kinds = [ErrorKind.SERVER, ErrorKind.CONNECTION, ErrorKind.MALFORMED, ErrorKind.TIMEOUT]

    def fail(row, attempt):
        if row % 10 == 3 and attempt == 0:  # 10% of the rows, each kind in turn
            return Outcome(status=503, error_kind=kinds[(row // 10) % 4], message="fault")
        return None

    server, vt = Server(fail), VirtualTimeLoop()
    rt = runtime(server, vt)
    assert answered(vt.run(rt.run_many(rows(2000))))
    assert rt.stats.retries == 200
    assert server.cuts() == 0
    assert max(t for t, row, a in server.sends if a == 0) < 4.0  # 2,000 rows at 64 x 10/s: about 3.2 s, no pause


def test_persistent_faults_shrink_the_bound():
    server = Server(lambda row, a: Outcome(status=503, error_kind=ErrorKind.SERVER, message="overloaded")
                    if row % 2 == 0 and a == 0 else None)
    vt = VirtualTimeLoop()
    rt = runtime(server, vt)
    assert answered(vt.run(rt.run_many(rows(1000))))
    assert server.cuts() >= 1


def test_a_row_failing_again_among_healthy_rows_is_not_backed_off_further():
    server = Server(lambda row, a: Outcome(status=500, error_kind=ErrorKind.SERVER, message="HTTP 500")
                    if row == 5 and a < 4 else None)
    vt = VirtualTimeLoop()
    rt = runtime(server, vt)
    assert answered(vt.run(rt.run_many(rows(2000))))
    sent = [t for t, row, _ in server.sends if row == 5]
    assert len(sent) == 5
    # Each wait is the answer's latency plus a backoff of at most the policy's base: no doubling.
    assert all(b - a <= server.latency + rt.config.retry.base + 1e-9 for a, b in zip(sent, sent[1:]))


def test_a_dead_service_still_stops_the_job_with_one_service_error():
    server = Server(lambda row, a: Outcome(status=503, error_kind=ErrorKind.SERVER, message="HTTP 503: down"))
    vt = VirtualTimeLoop()
    rt = runtime(server, vt)
    with pytest.raises(ServiceError, match="service looks down"):
        vt.run(rt.run_many(rows(500)))


# --- the pieces, without a runtime --------------------------------------------------------------


def test_limiter_tells_a_spent_budget_from_an_isolated_429():
    clock = FakeClock(100.0)
    lim = RateLimiter(clock=clock)
    lim.release(0, None)
    assert lim.on_429(None, 1.0, tokens=20) is False  # no headers, alone: this row only
    assert lim.paused_until <= clock.now
    assert lim.on_429(LimitHints(requests_remaining=3, tokens_remaining=5000), 1.0, tokens=20) is False
    assert lim.on_429(LimitHints(tokens_remaining=12), 1.0, tokens=20) is True  # less left than this request costs
    assert lim.paused_until == pytest.approx(101.0)


def test_limiter_counts_a_storm_of_429s_as_a_limit():
    clock = FakeClock(100.0)
    lim = RateLimiter(clock=clock)
    verdicts = []
    for i in range(6):
        lim.release(0, None)
        verdicts.append(lim.on_429(None, 2.0, tokens=20))
    assert verdicts == [False] * 4 + [True, True]
    assert lim.paused_until == pytest.approx(102.0)


def test_isolated_429s_cut_once_per_episode():
    clock = FakeClock()
    lim = AdaptiveLimit(initial=100, maximum=100, clock=clock)
    for _ in range(5):  # one every 2 s: each past the one-cut-per-second guard
        lim.on_rate_limited()
        clock.now += 2.0
    assert lim.limit == pytest.approx(90) and lim.cuts == 1
    clock.now += 60.0  # a quiet minute ends the episode: the next one cuts again
    lim.on_rate_limited()
    assert lim.limit == pytest.approx(81) and lim.cuts == 2


def test_a_high_failure_share_cuts_but_a_low_one_does_not():
    clock = FakeClock()
    lim = AdaptiveLimit(initial=100, maximum=100, clock=clock)
    for i in range(200):  # 10% faults, spread
        clock.now += 0.01
        lim.on_fault() if i % 10 == 0 else lim.on_success(0.1)
    assert lim.limit == 100
    for i in range(80):  # then half of them fail
        clock.now += 0.01
        lim.on_fault() if i % 2 == 0 else lim.on_success(0.1)
    assert lim.limit < 100


def test_ray_workers_share_only_the_pauses_of_a_spent_budget():
    cfg = RuntimeConfig()
    lim = LeasedLimiter(None, "k", cfg, SharedSlots(cfg), SharedBreaker())
    lim.release(0, None)
    assert lim.on_429(None, 1.0, tokens=20) is False
    assert lim._pending.pause_until == 0.0  # nothing to tell the other workers
    lim.release(0, None)
    assert lim.on_429(LimitHints(requests_remaining=0), 1.0, tokens=20) is True
    assert lim._pending.pause_until > 0.0  # goes to the coordinator, which pauses every worker


# --- point 3: the progress line says what the job waits for ------------------------------------


def test_progress_says_rows_are_retrying_instead_of_0_in_flight():
    s = RunStats(label="prompt[m]", rows_done=90, retrying=12)
    line = render_line(s, 100)
    assert "retrying 12 rows" in line and "0 in flight" not in line
    s.in_flight = 5
    assert "5 in flight" in render_line(s, 100) and "retrying 12 rows" in render_line(s, 100)


def test_progress_says_admission_is_paused_for_a_rate_limit():
    s = RunStats(label="prompt[m]", rows_done=10)
    s.pause_for(30.0)
    line = render_line(s, 100)
    assert "paused " in line and " s: rate limit" in line and "0 in flight" not in line
    assert "paused" not in render_line(RunStats(label="prompt[m]"), 100)


def test_waiting_counters_merge_across_processes():
    counters = RunCounters()
    s = RunStats(label="prompt[m]", retrying=3, pauses=1)
    counters.add(s)
    counters.merge("w1", [{"label": "prompt[m]", "retrying": 4, "pauses": 2, "paused_for": 20.0}])
    (total,) = counters.runs()
    assert total.retrying == 7 and total.pauses == 3
    assert "paused " in render_line(total, None) and "retrying 7 rows" in render_line(total, None)
    snap = RunStats(label="x")
    snap.pause_for(20.0)
    assert 0 < snap.snapshot()["paused_for"] <= 20.0


async def run_and_watch(rt: InferenceRuntime, n: int) -> tuple[list, list[tuple[float, str]]]:
    """Run ``n`` rows and render the progress line every 0.25 s of virtual time meanwhile."""
    loop, lines = asyncio.get_running_loop(), []

    async def watch():
        while True:
            await asyncio.sleep(0.25)
            lines.append((loop.time(), render_line(rt.stats, n)))

    watcher = asyncio.ensure_future(watch())
    try:
        return await rt.run_many(rows(n)), lines
    finally:
        watcher.cancel()


def test_the_progress_line_of_a_run_says_rows_are_retrying():
    server = Server(lambda row, a: rate_limited(5.0) if row == 5 and a == 0 else None)
    vt = VirtualTimeLoop()
    rt = runtime(server, vt)
    results, lines = vt.run(run_and_watch(rt, 300))
    assert answered(results) and rt.stats.retrying == 0
    done = max(t for t, row, _ in server.sends if row != 5) + 0.2  # every other row answered by then
    waiting = [line for t, line in lines if done < t < 4.9]
    assert waiting and all("retrying 1 row" in line and "0 in flight" not in line for line in waiting)


def test_the_progress_line_of_a_run_says_admission_is_paused():
    spent = LimitHints(requests_remaining=0)
    server = Server(lambda row, a: rate_limited(5.0, spent, fast=True) if row == 70 and a == 0 else None)
    vt = VirtualTimeLoop()
    rt = runtime(server, vt)
    results, lines = vt.run(run_and_watch(rt, 300))
    assert answered(results) and rt.stats.pauses == 1
    t429 = next(t for t, row, a in server.sends if row == 70 and a == 0)
    paused = [line for t, line in lines if t429 + 0.2 < t < t429 + 4.9]  # what was in flight has answered
    assert paused and all("s: rate limit" in line and "0 in flight" not in line for line in paused)
