"""Unit tests of the runtime's parts; no network and no real sleeping."""

import asyncio
import random

import pytest

from inferframe.providers.interface import LimitHints
from inferframe.providers.openai_format import estimate_tokens, limit_hints, parse_reset
from inferframe.runtime.breaker import Breaker
from inferframe.runtime.clock import FakeClock
from inferframe.runtime.concurrency import AdaptiveLimit
from inferframe.runtime.pricing import cost_of, price_of
from inferframe.runtime.ratelimit import RateLimiter
from inferframe.runtime.retry import RetryPolicy
from inferframe.session import current, set_prices


def test_parse_reset():
    assert parse_reset("1s") == 1.0
    assert parse_reset("6m0s") == 360.0
    assert parse_reset("20ms") == pytest.approx(0.02)
    assert parse_reset("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_reset("junk") is None


def test_limiter_learns_from_headers_and_never_refunds():
    lim = RateLimiter()
    assert lim.requests.rate is None
    lim.in_flight_requests, lim.in_flight_tokens = 1, 100
    lim.release(100, limit_hints({"x-ratelimit-limit-requests": "600", "x-ratelimit-limit-tokens": "60000",
                                  "x-ratelimit-remaining-requests": "5", "x-ratelimit-remaining-tokens": "50000"}))
    assert lim.requests.rate == 600 and lim.tokens.rate == 60000
    assert lim.requests.level <= 5  # never more than the server says is left
    before = lim.tokens.level
    lim.correct(estimated=100, actual=40)
    assert lim.tokens.level == before  # the server charged the estimate: no refund
    lim.correct(estimated=100, actual=150)
    assert lim.tokens.level == before - 50


def test_user_limits_win_over_headers_and_pause_empties_buckets():
    lim = RateLimiter(rpm=60)
    lim.in_flight_requests = 1
    lim.release(0, LimitHints(requests_limit=6000))
    assert lim.requests.rate == 60
    lim.pause(2.0)
    assert lim.requests.level <= 0


def test_limiter_paces_at_the_rate():
    clock = FakeClock(1000.0)

    async def run():
        lim = RateLimiter(rpm=600, burst_seconds=1, clock=clock)  # 10 per second, 10 at once less a reserve of 1
        start = clock.now
        for _ in range(30):
            await lim.acquire(1)
            lim.release(1, None)
        return clock.now - start

    elapsed = asyncio.run(run())
    assert elapsed == pytest.approx(2.1, abs=0.05)  # 9 at once, then 21 more at 10/s


def test_probe_then_everyone():
    async def run():
        lim = RateLimiter()
        order = []

        async def row(i):
            await lim.acquire(1)
            order.append(i)
            await asyncio.sleep(0.01 if i == 0 else 0)
            lim.release(1, None)

        await asyncio.gather(*(row(i) for i in range(5)))
        return order

    order = asyncio.run(run())
    assert order[0] == 0 and sorted(order) == [0, 1, 2, 3, 4]


def test_aimd_cuts_on_congestion_and_grows_when_healthy():
    lim = AdaptiveLimit(initial=100, maximum=200)
    lim.on_congestion()
    assert lim.limit == pytest.approx(70)
    lim.on_congestion()  # a second signal in the same round does not cut again
    assert lim.limit == pytest.approx(70)
    for _ in range(700):
        lim.on_success(0.1)
    assert 75 < lim.limit <= 200
    fixed = AdaptiveLimit(initial=10, maximum=10, adaptive=False)
    fixed.on_congestion()
    assert fixed.limit == 10


def test_aimd_bounds_in_flight():
    async def run():
        lim = AdaptiveLimit(initial=3, maximum=3)
        peak = 0

        async def work():
            nonlocal peak
            async with lim:
                peak = max(peak, lim.in_flight)
                await asyncio.sleep(0)

        await asyncio.gather(*(work() for _ in range(50)))
        return peak, lim.in_flight

    assert asyncio.run(run()) == (3, 0)


def test_retry_policy():
    p = RetryPolicy(max_attempts=3, base=1.0, cap=8.0)
    assert p.should_retry("rate_limit", 1) and p.should_retry("server", 2)
    assert not p.should_retry("server", 3)
    for kind in ("bad_request", "not_found", "auth", "length", "refusal"):
        assert not p.should_retry(kind, 1)
    rng = random.Random(0)
    delays = [p.delay(4, None, rng) for _ in range(200)]
    assert 0 <= min(delays) and max(delays) <= 8.0 and len(set(delays)) > 100  # full jitter, capped
    assert p.delay(1, 5.0, rng) >= 5.0  # Retry-After always honoured


def test_breaker():
    b = Breaker(min_rows=5)
    b.attempt("auth", "HTTP 401: bad key", "svc")
    assert b.tripped and "401" in b.reason
    b = Breaker(unreachable_after=3)
    for _ in range(3):
        b.attempt("connection", "refused", "svc at http://x")
    assert b.tripped and "Cannot reach" in b.reason
    b = Breaker(window=10, min_rows=10)
    b.attempt(None, "", "svc")
    for _ in range(9):
        b.row(False, "server", "HTTP 500")
    assert not b.tripped
    b.row(False, "server", "HTTP 500")
    assert b.tripped
    ok = Breaker(window=10, min_rows=10)
    for i in range(30):
        ok.row(i % 5 != 0, "server", "x")
    assert not ok.tripped


def test_breaker_trips_when_nothing_is_answered_in_time():
    """Issue 31 item 1: 5 rows all timing out ran 846 s (30 requests) and the job was recorded 'ok'."""
    b = Breaker()
    for _ in range(2):
        b.attempt("timeout", "No answer within 120 s", "svc")
    assert not b.tripped
    b.attempt("timeout", "No answer within 120 s", "svc")
    assert b.tripped and "max_tokens" in b.reason and "timeout" in b.reason
    late = Breaker()  # a server that answered before: a slow spell is not a dead job
    late.attempt(None, "", "svc")
    for _ in range(5):
        late.attempt("timeout", "No answer within 120 s", "svc")
    assert not late.tripped


def test_breaker_trips_when_the_first_rows_all_fail_the_same_way():
    b = Breaker()  # min_rows=20: a 5-row job never reached it before
    for _ in range(2):
        b.row(False, "timeout", "No answer within 120 s")
    assert not b.tripped
    b.row(False, "timeout", "No answer within 120 s")
    assert b.tripped and "first 3 rows" in b.reason
    mixed = Breaker()
    for kind in ("timeout", "server", "timeout"):
        mixed.row(False, kind, "x")
    assert not mixed.tripped
    after_ok = Breaker()
    after_ok.rows_ok(1)
    for _ in range(5):
        after_ok.row(False, "timeout", "x")
    assert not after_ok.tripped
    bad_input = Breaker()  # a row's own fault (a 400 that says something else each time) says nothing of the next row
    for i in range(5):
        bad_input.row(False, "bad_request", f"HTTP 400: input {i} too long", status=400)
    assert not bad_input.tripped
    kept = Breaker()  # on_error="null" given: the same refusal on every row stays data (issue 41 item 1)
    for _ in range(5):
        kept.row(False, "bad_request", "HTTP 400", status=400, recurring=False)
    assert not kept.tripped


def test_prices_and_estimates():
    assert price_of("gpt-4o-2024-08-06") == price_of("gpt-4o")
    set_prices({"mine": (1.0, 2.0)})
    assert cost_of(current().price_of("mine"), 1_000_000, 500_000) == pytest.approx(2.0)
    assert cost_of(None, 10, 10) == 0
    inp, out = estimate_tokens({"messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 7}, None)
    assert 100 <= inp <= 110 and out == 7


def test_reset_headers_become_hints():
    hints = limit_hints({"x-ratelimit-limit-requests": "1200", "x-ratelimit-remaining-requests": "19",
                         "x-ratelimit-reset-requests": "50ms", "x-ratelimit-limit-tokens": "60000",
                         "x-ratelimit-remaining-tokens": "59000", "x-ratelimit-reset-tokens": "1s"})
    assert hints.requests_reset == pytest.approx(0.05) and hints.tokens_reset == 1.0


def test_limiter_holds_no_more_than_the_servers_bucket():
    # The server holds one second (20 at 1,200 RPM): remaining 19 + 50 ms of refill. A user-given
    # rate starts with one second too, less the reserve; a per-minute window lets the minute go at once.
    lim = RateLimiter(rpm=1200, clock=FakeClock())
    assert lim.requests.capacity == 19
    lim.observe(LimitHints(requests_limit=1200, requests_remaining=19, requests_reset=0.05))
    assert lim.requests.size == pytest.approx(20) and lim.requests.capacity == pytest.approx(19)
    window = RateLimiter(clock=FakeClock())
    window.observe(LimitHints(requests_limit=600, requests_remaining=599, requests_reset=60.0))
    assert window.requests.size == 600 and window.requests.level > 500


def test_limiter_reads_a_hint_against_what_was_sent_after_it():
    clock = FakeClock(10.0)

    async def run():
        lim = RateLimiter(rpm=600, clock=clock)  # 10/s; the server holds one second (10), less a reserve of 0.5
        first = await lim.acquire(1)
        for _ in range(5):
            await lim.acquire(1)
        mine = lim.requests.level
        # The first answer: 9 were left when the server counted it, and 5 went after it: 4 now, not 9.
        lim.release(1, LimitHints(requests_limit=600, requests_remaining=9, requests_reset=0.1), first)
        after_first = lim.requests.level
        # An answer that was slow to come back, 0.5 s after it went: it says 3 were left then. Since
        # then 5 more went, and at most 5 refilled: it may lower the level, never raise it.
        clock.now += 0.5
        slow = await lim.acquire(1)
        for _ in range(4):
            await lim.acquire(1)
        before = lim.requests.level
        lim.release(1, LimitHints(requests_limit=600, requests_remaining=3, requests_reset=0.7), slow)
        return mine, after_first, before, lim.requests.level

    mine, after_first, before, after_slow = asyncio.run(run())
    assert mine == pytest.approx(3.5) and after_first == pytest.approx(3.5)  # 4 left less the reserve
    assert after_slow <= before and after_slow <= 3 - 4 + 5 - 0.5


def test_a_steady_mix_of_cache_hits_and_misses_is_not_queueing():
    """Label scoring on llama.cpp: a row's second label request finds its whole prompt cached (about
    20 ms) and its first does not (about 400 ms). Judged against the fastest single answer, the mix
    read as queueing and cut the bound again and again (few-shot label scoring on the embedded
    server, 8 slots: sampled in flight mostly 1-5; with smoothed latencies on both sides, 8)."""
    from inferframe.runtime.clock import FakeClock

    clock = FakeClock()
    lim = AdaptiveLimit(initial=8, maximum=8, clock=clock)
    for i in range(400):
        lim.on_success(0.02 if i % 2 else 0.4)
        clock.now += 0.05
    assert lim.cuts == 0 and lim.limit == 8
    # Latency that really rises (every answer ten times slower than the mix was) is queueing.
    for _ in range(100):
        lim.on_success(4.0)
        clock.now += 0.05
    assert lim.cuts >= 1 and lim.limit < 8


@pytest.mark.parametrize("payload", [
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "How are you?"}],
    [{"type": "input_image", "image_url": "data:image/png;base64,AAAA"}, {"role": "user", "content": "q"}],
    [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]}],
    [], "plain", [{"role": "user", "content": None}],
])
def test_the_flat_text_shortcut_reads_what_the_general_walk_reads(payload):
    from inferframe.providers import openai_format as wire

    flat = wire._flat_texts(payload)
    if flat is not None:
        assert flat == list(wire._texts(payload))
    body = {"messages": payload} if isinstance(payload, list) else {"input": payload}
    assert wire.estimate_tokens(body, "gpt-5-mini")[0] == wire.count_text("\n".join(wire._texts(body.get("messages") or body.get("input") or "")), "gpt-5-mini") + 4
