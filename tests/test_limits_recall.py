"""A later job of the process starts from the rate limits an earlier job learned, instead of probing again."""

import asyncio

import pytest

import inferframe as ifr
from inferframe.functions import prompt
from inferframe.providers.interface import LimitHints
from inferframe.runtime.config import RuntimeConfig
from inferframe.runtime.coordinator import LocalCoordinator
from inferframe.runtime.ratelimit import RateLimiter

from inferframe.simulator import Simulator

KEY = "openai@http://x/v1|gpt-5-mini"


@pytest.fixture
def sim():
    with Simulator() as s:
        yield s


async def _admitted_without_an_answer(limiter: RateLimiter, n: int) -> int:
    """How many of ``n`` requests are admitted before any answer comes back."""
    tasks = [asyncio.ensure_future(limiter.acquire(10)) for _ in range(n)]
    await asyncio.sleep(0.05)
    done = sum(t.done() for t in tasks)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return done


def test_a_second_coordinator_of_the_same_key_starts_from_the_learned_limits():
    first = LocalCoordinator().limits(KEY, RuntimeConfig(), "acct").limiter
    assert asyncio.run(_admitted_without_an_answer(first, 5)) == 1  # nothing known: one probe
    first.release(10, LimitHints(requests_limit=1200, requests_remaining=1150, requests_reset=2.5))

    again = LocalCoordinator().limits(KEY, RuntimeConfig(), "acct").limiter
    assert again.requests_per_second() == 20.0
    assert asyncio.run(_admitted_without_an_answer(again, 5)) == 5

    other_key = LocalCoordinator().limits(KEY, RuntimeConfig(), "other").limiter
    assert other_key.requests_per_second() is None and asyncio.run(_admitted_without_an_answer(other_key, 5)) == 1
    other_model = LocalCoordinator().limits(KEY + "x", RuntimeConfig(), "acct").limiter
    assert other_model.requests_per_second() is None


def test_an_old_or_user_set_limit_is_not_recalled():
    from inferframe.runtime.clock import FakeClock

    clock = FakeClock()
    old = RateLimiter(clock=clock)
    old.release(10, LimitHints(requests_limit=600, requests_remaining=590))
    clock.now += 601
    assert not RateLimiter(clock=clock).recall(old)
    assert not RateLimiter(rpm=60, clock=clock).recall(old)


def test_a_pause_and_a_shrunk_burst_carry_over():
    old = RateLimiter()
    old.release(10, LimitHints(requests_limit=1200, requests_remaining=19, requests_reset=0.05))
    old.on_429(LimitHints(requests_limit=1200, requests_remaining=5), 2.0)  # not predicted: the burst halves
    old.pause(2.0)
    new = RateLimiter()
    assert new.recall(old)
    assert new.requests.size == old.requests.size < 20 and new.paused_until == old.paused_until > 0


def test_the_second_job_against_a_server_sends_without_waiting_for_a_probe(sim):
    """Two jobs against the simulator: the second's first requests go out together (the server saw them in flight at once)."""
    sim.configure(latency_ms=300)
    df = lambda n: ifr.from_pydict({"q": [f"question {i} {n}" for i in range(4)]}).with_column(
        "a", prompt(ifr.col("q"), provider="openai", base_url=sim.base_url, api_key="sk-test", model="gpt-5-mini",
                    use_chat_completions=True, max_concurrency=4))
    df("first").collect()
    sim.reset()
    df("second").collect()
    assert sim.stats()["max_in_flight"] == 4


def test_a_cluster_jobs_coordinator_starts_from_what_the_last_job_learned():
    """The Spark driver's job service and the Ray driver's host make a coordinator (``LimitsActor``) per job: the next
    job's starts from what the last one's learned, for the same API key only."""
    from inferframe.runners.ray_limits.actor import LimitsActor

    def config(account):
        return {"rpm": None, "tpm": None, "max_concurrency": 8, "adaptive": True, "base": 8, "account": account}

    async def first_lease(actor, account):
        return (await actor.lease(KEY, "w", config(account), 10))["probe"]

    async def main():
        first = LimitsActor()
        assert await first_lease(first, "fp-a")  # nothing known: this job's one probe
        await first.lease(KEY, "w", config("fp-a"), 0, report={"probe_done": True})
        return await first_lease(LimitsActor(), "fp-a"), await first_lease(LimitsActor(), "fp-b")

    again, other_key = asyncio.run(main())
    assert not again  # answered once in this process: no probe
    assert other_key  # another API key's limits are its own


def test_a_cluster_jobs_answers_keep_what_the_next_job_recalls_fresh():
    """A Spark session's jobs run for hours: the coordinator's own answer is the probe's, and its workers' answers
    come in their reports. Before, a job RECALL_SECONDS after the probe probed again, however many answers came."""
    from inferframe.runners.ray_limits.actor import LimitsActor
    from inferframe.runtime.ratelimit import RECALL_SECONDS

    config = {"rpm": None, "tpm": None, "max_concurrency": 8, "adaptive": True, "base": 8, "account": "fp"}

    async def main():
        first = LimitsActor()
        assert (await first.lease(KEY, "w", config, 10))["probe"]
        await first.lease(KEY, "w", config, 0, report={"probe_done": True})
        first.keys[KEY].limiter.answered_at -= RECALL_SECONDS + 1  # the probe answered long ago
        await first.lease(KEY, "w", config, 10, report={"answered": True})  # a worker's answers since
        return (await LimitsActor().lease(KEY, "w", config, 10))["probe"]

    assert not asyncio.run(main())
