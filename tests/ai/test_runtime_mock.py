"""The runtime against MockProvider and a FakeClock: no HTTP, no monkeypatching, no real sleeping."""

import asyncio

import pytest

from inferframe.errors import ErrorKind, RowFailed, ServiceError
from inferframe.providers.interface import LimitHints, MockProvider, Outcome, Request, Usage
from inferframe.runtime import InferenceRuntime, LocalCoordinator, RuntimeConfig
from inferframe.runtime.clock import FakeClock

OFF = dict(cache_policy="off")


def run(coro):
    return asyncio.run(coro)


def test_a_429_waits_its_retry_after_on_the_clock_then_answers():
    answers = iter([Outcome(error_kind=ErrorKind.RATE_LIMIT, status=429, retry_after=7.5), Outcome(value="ok")])
    clock = FakeClock()
    rt = InferenceRuntime(MockProvider(lambda r: next(answers)), RuntimeConfig(**OFF), model="m", clock=clock)
    result = run(rt.run_one(Request("chat", {"q": 1})))
    assert result.value == "ok" and result.attempts == 2
    assert 7.5 in clock.slept and clock.monotonic() >= 7.5
    assert rt.stats.rate_limited == 1 and rt.stats.retries == 1


def test_a_bad_request_is_data_and_never_retried():
    provider = MockProvider(lambda r: Outcome(error_kind="bad_request", status=400, message="HTTP 400: nope"))
    rt = InferenceRuntime(provider, RuntimeConfig(**OFF), model="m", clock=FakeClock())
    result = run(rt.run_one(Request("chat", {"q": 1})))
    assert result.error.kind is ErrorKind.BAD_REQUEST and result.error.as_dict()["kind"] == "bad_request"
    assert len(provider.requests) == 1


def test_on_error_raise_stops_at_the_first_failed_row():
    provider = MockProvider(lambda r: Outcome(error_kind=ErrorKind.REFUSAL, status=200, message="no"))
    rt = InferenceRuntime(provider, RuntimeConfig(on_error="raise", **OFF), model="m", clock=FakeClock())
    with pytest.raises(RowFailed, match="refusal"):
        run(rt.run_one(Request("chat", {"q": 1})))


def test_an_auth_failure_trips_the_breaker_for_the_whole_job():
    provider = MockProvider(lambda r: Outcome(error_kind=ErrorKind.AUTH, status=401, message="HTTP 401: bad key"))
    rt = InferenceRuntime(provider, RuntimeConfig(**OFF), model="m", clock=FakeClock())
    with pytest.raises(ServiceError, match="401"):
        run(rt.run_many([Request("chat", {"q": i}) for i in range(50)]))
    assert len(provider.requests) < 50


def test_limit_hints_set_the_budget_and_cost_uses_the_configured_price():
    clock = FakeClock()
    hints = LimitHints(requests_limit=120, requests_remaining=119)
    provider = MockProvider(lambda r: Outcome(value="x", usage=Usage(1_000_000, 0), limits=hints))
    rt = InferenceRuntime(provider, RuntimeConfig(price=(2.0, 8.0), **OFF), model="m", clock=clock)
    results = run(rt.run_many([Request("chat", {"q": i}) for i in range(5)]))
    assert rt.limiter.requests.rate == 120  # learned from the neutral hints
    assert [r.cost for r in results] == [2.0] * 5 and rt.stats.cost == 10.0


def test_runtimes_with_one_coordinator_share_one_in_flight_bound():
    async def go():
        peak, now = [0], [0]

        async def handler(r):
            now[0] += 1
            peak[0] = max(peak[0], now[0])
            await asyncio.sleep(0.01)
            now[0] -= 1
            return Outcome(value="x")

        coordinator = LocalCoordinator()
        config = RuntimeConfig(max_concurrency=4, adaptive=False, **OFF)
        a, b = (InferenceRuntime(MockProvider(handler), config, model="m", limits=coordinator.limits("k", config))
                for _ in range(2))
        await asyncio.gather(a.run_many([Request("chat", {"a": i}) for i in range(40)]),
                             b.run_many([Request("chat", {"b": i}) for i in range(40)]))
        return peak[0]

    assert run(go()) == 4
