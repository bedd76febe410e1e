"""The cluster coordinator (runners.ray_limits) on a real local Ray cluster: worker actors in their own
processes lease one budget from one coordinator actor.

Each test starts its own coordinator; four worker actors (num_cpus=0) are shared by the module.
Times are wall-clock (``time.time()``: one clock for every process of this machine).
"""

from __future__ import annotations

import asyncio
import bisect
import os
import pickle
import sys
import time

import pytest
import ray

from inferframe.errors import ServiceError
from inferframe.observe.stats import RunCounters
from inferframe.runners.ray_limits import CHUNK_SECONDS, RayCoordinator, start_coordinator
from inferframe.runners.ray_limits.tuning import CALL_TIMEOUT_S
from inferframe.runtime.config import RuntimeConfig

# The worker actors' class lives in this module, which the workers cannot import: send it by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

KEY = "openai:http://127.0.0.1/v1|gpt-4o-mini"
WORKERS = 4


@ray.remote(num_cpus=0)
class Worker:
    """A worker process running an InferenceRuntime-like loop (acquire, hold a slot, release) on its limits."""

    def __init__(self) -> None:
        self.coordinators: dict[str, RayCoordinator] = {}

    def _limits(self, coordinator: RayCoordinator, config: RuntimeConfig):
        # One coordinator object per job in this process, as the runner unpickles it once per actor.
        return self.coordinators.setdefault(coordinator.name, coordinator).limits(KEY, config)

    def pid(self) -> int:
        import inferframe.runners.ray_limits  # noqa: F401  (import once, before the timed parts)

        return os.getpid()

    async def run(self, coordinator, config, start_at: float, seconds: float, tasks: int = 4, hold_s: float = 0.0,
                  pause_at: float | None = None, pause_s: float = 0.0) -> dict:
        limits = self._limits(coordinator, config)
        lim, slots = limits.limiter, limits.slots
        admitted, intervals, ceilings, paused = [], [], [], []
        await asyncio.sleep(max(0.0, start_at - time.time()))
        end = start_at + seconds

        async def loop() -> None:
            while time.time() < end:
                try:
                    ticket = await asyncio.wait_for(lim.acquire(1), max(0.01, end - time.time()))
                except asyncio.TimeoutError:
                    return
                admitted.append(time.time())
                slots.size(lim.requests_per_second())
                async with slots:
                    entered = time.time()
                    await asyncio.sleep(hold_s)
                    intervals.append((entered, time.time()))
                lim.release(1, None, ticket)
                ceilings.append(slots.maximum)

        async def pauser() -> None:
            await asyncio.sleep(max(0.0, pause_at - time.time()))
            paused.append(time.time())
            lim.pause(pause_s)

        jobs = [loop() for _ in range(tasks)] + ([pauser()] if pause_at is not None else [])
        await asyncio.gather(*jobs)
        return {"admitted": admitted, "intervals": intervals, "ceilings": ceilings, "paused": paused,
                "ceiling": slots.maximum, "calls": lim.calls}

    async def trip(self, coordinator, config, reason: str) -> None:
        limits = self._limits(coordinator, config)
        limits.breaker.trip(reason)
        await limits.limiter.flush()

    async def until_tripped(self, coordinator, config, timeout: float) -> tuple:
        limits = self._limits(coordinator, config)
        lim, leases = limits.limiter, 0
        end = time.time() + timeout
        while not limits.breaker.tripped and time.time() < end:
            calls = lim.calls
            ticket = await lim.acquire(1)
            lim.release(1, None, ticket)
            leases += lim.calls > calls
        return limits.breaker.tripped, limits.breaker.reason, leases

    async def tripped(self, coordinator, config) -> bool:
        return self._limits(coordinator, config).breaker.tripped

    async def report(self, coordinator, source: str, snapshots: list) -> None:
        await coordinator.report_counters(source, snapshots)

    async def prompts(self, coordinator, base_url: str, n: int, start_at: float) -> dict:
        """Run ``n`` chat requests through an InferenceRuntime against the simulator, with this job's limits."""
        from inferframe.providers.interface import Request
        from inferframe.providers.openai import OpenAIProvider
        from inferframe.providers.spec import ProviderSpec
        from inferframe.runtime import InferenceRuntime

        config = RuntimeConfig(cache_policy="off")  # no rpm: the limits are learned from the server's headers
        runtime = InferenceRuntime(OpenAIProvider(ProviderSpec("openai"), base_url=base_url, api_key="sk-test"),
                                   config, model="gpt-4o-mini", limits=self._limits(coordinator, config))
        body = {"model": "gpt-4o-mini", "max_tokens": 8}
        requests = [Request("chat", {**body, "messages": [{"role": "user", "content": f"row {i}"}]}, est_tokens=20)
                    for i in range(n)]
        await asyncio.sleep(max(0.0, start_at - time.time()))
        t0 = time.time()
        results = await runtime.run_many(requests)
        t1 = time.time()
        await runtime.aclose()
        return {"ok": sum(r.value is not None for r in results), "t0": t0, "t1": t1,
                "rate_limited": runtime.stats.rate_limited}


@pytest.fixture(scope="module")
def workers(ray_cluster):
    ws = [Worker.remote() for _ in range(WORKERS)]
    ray.get([w.pid.remote() for w in ws])  # started and importing before any timed test
    yield ws
    for w in ws:
        ray.kill(w)


@pytest.fixture
def coordinator(ray_cluster):
    coord = start_coordinator()
    yield coord
    coord.close()


def run_all(workers, coordinator, config, seconds, **kw) -> tuple[float, list[dict]]:
    start_at = time.time() + 0.5
    out = ray.get([w.run.remote(coordinator, config, start_at, seconds, **kw) for w in workers])
    return start_at, out


def test_workers_share_one_rpm_budget(workers, coordinator):
    # 600 RPM = 10/s for the whole cluster; the bucket holds one second of it (10, less the reserve).
    seconds, rate, bucket = 6.0, 10.0, 10.0
    start, out = run_all(workers, coordinator, RuntimeConfig(rpm=600), seconds)
    times = sorted(t for o in out for t in o["admitted"])
    assert all(o["admitted"] for o in out), "every worker got budget"
    # Never above the limit: at any moment, the admissions so far fit one bucket plus the rate since,
    # plus at most one chunk (one request here) each worker held when counting started.
    for i, t in enumerate(times):
        assert i + 1 <= bucket + rate * (t - start) + WORKERS, (i + 1, t - start)
        # ... and in any one-second window: one bucket, one second of rate, the chunks held.
        in_window = i + 1 - bisect.bisect_left(times, t - 1.0)
        assert in_window <= bucket + rate + WORKERS, (in_window, t - start)
    # Together they reach the limit (the first second's bucket aside).
    assert len(times) >= 0.85 * rate * seconds, len(times)


def test_a_pause_in_one_worker_stops_the_others_within_a_chunk(workers, coordinator):
    config = RuntimeConfig(rpm=600)
    start_at = time.time() + 0.5
    refs = [w.run.remote(coordinator, config, start_at, 5.0, pause_at=start_at + 1.5 if i == 0 else None,
                         pause_s=2.0) for i, w in enumerate(workers)]
    out = ray.get(refs)
    paused_at = out[0]["paused"][0]
    heard = coordinator.describe(KEY)["keys"][KEY]["paused_at"]
    assert heard is not None and paused_at <= heard < paused_at + 2.0, (paused_at, heard)  # heard while it lasted
    # Counted, not timed. The other workers learn of the pause from the coordinator, which hears of it one actor
    # call after the pause: on a loaded machine that call took 0.3 s (CI), and a lease granted before it arrived
    # is spent after it. Once the coordinator knows, each worker may spend only the chunk granted before that
    # (one lease is in flight at a time), and nothing more. One chunk: at 10/s over four workers a lease is one
    # request (CHUNK_SECONDS of a worker's share, at least one).
    chunk = max(1, round(CHUNK_SECONDS * 10.0 / WORKERS))
    for o in out:
        during = [t for t in o["admitted"] if heard < t < paused_at + 1.9]
        assert len(during) <= chunk, [round(t - heard, 3) for t in during]
    before = [t for o in out[1:] for t in o["admitted"] if paused_at - 1.0 < t < paused_at]
    after = [t for o in out for t in o["admitted"] if paused_at + 2.0 <= t]
    assert len(before) >= 5 and len(after) >= 10, (len(before), len(after))  # admitting before, and again after


def test_a_trip_in_one_worker_trips_every_worker(workers, coordinator):
    config = RuntimeConfig(rpm=600)
    run_all(workers[:2], coordinator, config, 0.5)  # both hold limits for the key
    assert not any(ray.get([w.tripped.remote(coordinator, config) for w in workers[:2]]))
    ray.get(workers[0].trip.remote(coordinator, config, "HTTP 401: invalid API key"))
    tripped, reason, leases = ray.get(workers[1].until_tripped.remote(coordinator, config, 5.0))
    assert tripped and reason == "HTTP 401: invalid API key"
    assert leases <= 2  # told by its next lease (the second if one was already on its way)
    assert coordinator.describe(KEY)["keys"][KEY]["tripped"] == "HTTP 401: invalid API key"


def test_requests_in_flight_across_workers_stay_within_max_concurrency(workers, coordinator):
    # A fast limit (1,000/s) and more tasks than slots: the in-flight bound is what binds.
    limit = 8
    config = RuntimeConfig(rpm=60_000, max_concurrency=limit)
    _, out = run_all(workers, coordinator, config, 2.5, tasks=8, hold_s=0.05)
    events = sorted([(a, 1) for o in out for a, _ in o["intervals"]] + [(b, -1) for o in out for _, b in o["intervals"]],
                    key=lambda e: (e[0], e[1]))  # an exit before an entry at the same instant
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    assert limit // 2 <= peak <= limit, peak  # bounded, and the bound is used
    assert sum(o["ceiling"] for o in out) <= limit, [o["ceiling"] for o in out]
    assert all(o["intervals"] for o in out), "every worker got a share"
    state = coordinator.describe(KEY)["keys"][KEY]
    assert sum(state["held"].values()) <= limit and sum(state["shares"].values()) <= limit, state


# A restart spawns a worker process: 8 s was too short on a CI machine running another test process beside
# this one ("no answer within 8 s" while restarting), and 20 s beside two busy processes (1 of 3 failed on main).
# The product's own default, as a user has it. A call to a live actor answers in milliseconds.
CALL_S = CALL_TIMEOUT_S


def test_a_restarted_coordinator_recovers_and_a_dead_one_raises(ray_cluster):
    # The restart spawns a worker process: seconds on a loaded machine, so the bound is not cut too fine.
    coord = start_coordinator(call_timeout_s=CALL_S)
    lim = coord.limits(KEY, RuntimeConfig(rpm=600)).limiter

    async def use(n: int) -> None:
        for _ in range(n):
            ticket = await lim.acquire(1)
            lim.release(1, None, ticket)

    async def scenario() -> float:
        await use(3)
        ray.kill(coord.handle, no_restart=False)  # Ray restarts it, with empty state
        await use(5)
        await lim.flush()
        state = await asyncio.to_thread(coord.describe, KEY)
        assert state["restarted"] and state["keys"][KEY]["rpm"] == 600  # the user's rpm, from the lease's config
        ray.kill(coord.handle, no_restart=True)  # gone for good
        t0 = time.monotonic()
        with pytest.raises(ServiceError, match="coordinator .* cannot be reached"):
            await use(20)
        return time.monotonic() - t0

    took = asyncio.run(scenario())
    # A few call timeouts at most (a loaded machine restarts actors slowly), never a hang.
    assert took < 3 * CALL_S
    # A copy sent to a worker finds no actor by that name: the same one error.
    copy = pickle.loads(pickle.dumps(coord))
    with pytest.raises(ServiceError, match="cannot be reached"):
        asyncio.run(copy.limits(KEY, RuntimeConfig(rpm=600)).limiter.flush())
    coord.close()


def test_counter_reports_round_trip(workers, coordinator):
    ray.get([workers[0].report.remote(coordinator, "w0", [{"label": "prompt[m]", "rows_done": 3, "requests": 4}]),
             workers[1].report.remote(coordinator, "w1", [{"label": "prompt[m]", "rows_done": 2, "requests": 2}])])
    # A later snapshot of a source replaces its earlier one (they are cumulative).
    ray.get(workers[0].report.remote(coordinator, "w0", [{"label": "prompt[m]", "rows_done": 5, "requests": 6}]))
    reports = coordinator.counter_reports()
    assert set(reports) == {"w0", "w1"} and reports["w0"][0]["rows_done"] == 5
    counters = RunCounters()
    coordinator.merge_counters(counters)
    [run] = counters.runs()
    assert (run.label, run.rows_done, run.requests) == ("prompt[m]", 7, 8)


def test_runtimes_in_three_workers_share_the_servers_limit(workers, coordinator):
    from inferframe.simulator import Simulator, SimulatorConfig

    # 600 RPM, a one-second bucket (as hosted APIs): not told to the client, learned from the headers.
    with Simulator.spawn(SimulatorConfig(rpm=600, ratelimit_burst_s=1.0, latency_ms=50)) as sim:
        start_at = time.time() + 0.5
        out = ray.get([w.prompts.remote(coordinator, sim.base_url, 30, start_at) for w in workers[:3]])
        stats = sim.stats()
    assert [o["ok"] for o in out] == [30, 30, 30]
    denied = stats["by_status"].get("429", 0)
    # One budget for three processes: no storm of 429s (three unshared budgets draw dozens here). Cold workers on a
    # loaded machine may land a request or two late and bunched: a few, not a storm.
    assert denied <= 3, stats["by_status"]
    took = max(o["t1"] for o in out) - min(o["t0"] for o in out)
    assert 90 <= 10 + 10 * took + 3, took  # and the server's own limit was what paced them


def test_workers_find_one_servers_capacity_together(workers, coordinator):
    """Four workers against one self-hosted server (64 served at once, FIFO beyond, no limit headers): the
    coordinator's one capacity finder bounds them together. Each probing alone from its share of max_concurrency
    (256 each) sent 4 x 64 at the start and queued the server for seconds."""
    from inferframe.simulator import Simulator, SimulatorConfig

    # 450 rows a worker: 28 round trips at the capacity. In 19 (300 rows) on a loaded machine (the full suite, or two
    # busy processes beside it) slow start's one round trip past the capacity weighed 0.101-0.108 s of queueing a row.
    capacity, latency, rows = 64, 0.2, 450
    with Simulator.spawn(SimulatorConfig(capacity=capacity, latency_ms=latency * 1000)) as sim:
        start_at = time.time() + 0.5
        out = ray.get([w.prompts.remote(coordinator, sim.base_url, rows, start_at) for w in workers])
        stats = sim.stats()
    assert [o["ok"] for o in out] == [rows] * WORKERS
    state = coordinator.describe(KEY)["keys"][KEY]
    found = state["capacity"], state["floor"]  # the moves (when, bound, why) and the latency floor, for a failure
    assert stats["mean_queue_wait_s"] <= 0.5 * latency, (stats["mean_queue_wait_s"], stats["max_in_flight"], found)
    assert stats["max_in_flight"] <= 2 * capacity, stats  # a slow-start probe past the capacity at most, not 4x
    # And the bound they shared settled at the server's capacity, not a trickle below it. (Their throughput is a
    # benchmark's to measure, bench/self_hosted_cluster.py: a wall-time floor here failed CI on a slower machine.) Under two
    # spinning processes beside the suite the bound settled at 38-93; a collapse would leave it a few requests.
    assert state["found"] and state["bound"] >= capacity / 4, found
