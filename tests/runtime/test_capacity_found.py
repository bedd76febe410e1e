"""A self-hosted server's capacity is found from latency alone (issue 46): no limit headers, no 429s.

The server here is the simulator's own model of one (``simulator.capacity.ServingSlots``: C requests
served at once, the rest wait first come first served) behind the real runtime, in virtual time
(the loop's clock jumps to the next timer), so a 1 s latency costs no wall time.
"""

from __future__ import annotations

import asyncio
import collections

import pytest

from inferframe.providers.interface import MockProvider, Outcome, Request
from inferframe.runtime import InferenceRuntime, RuntimeConfig
from inferframe.runtime.capacity import CapacityFinder
from inferframe.runtime.clock import FakeClock
from inferframe.runtime.concurrency import AdaptiveLimit
from inferframe.simulator.capacity import ServingSlots
from tests.runtime.virtual_time import LoopClock, VirtualTimeLoop


def _fifo_server(loop, capacity: int, latency: float, waits: list):
    """A provider's answer from a server of ``capacity`` slots (FIFO beyond); each request's queue wait goes to ``waits``."""
    slots = ServingSlots(capacity)

    async def answer(r):
        began = loop.time()
        async with slots.slot():
            waits.append(loop.time() - began)
            await asyncio.sleep(latency)
        return Outcome(value="ok")

    return answer


def _serve(capacity: int, latency: float, rows: int, **config):
    """Rows through a runtime with default settings against a FIFO server: (rows/s, mean queued s, history, slots)."""
    loop = VirtualTimeLoop()
    waits = []

    async def main():
        answer = _fifo_server(loop, capacity, latency, waits)
        rt = InferenceRuntime(MockProvider(answer), RuntimeConfig(cache_policy="off", **config), model="m",
                              clock=LoopClock(loop))
        t0 = loop.time()
        out = await rt.send_many([Request("chat", {"q": i}, 5) for i in range(rows)], [None] * rows)
        assert [r.value for r in out] == ["ok"] * rows
        return rows / (loop.time() - t0), rt

    rate, rt = loop.run(main())
    return rate, sum(waits) / len(waits), rt.slots.history, rt.slots


@pytest.mark.parametrize("capacity", [32, 256])
def test_default_settings_find_the_capacity_without_a_queue(capacity):
    latency = 1.0
    rate, queued, history, slots = _serve(capacity, latency, capacity * 30)
    best = capacity / latency
    assert rate >= 0.85 * best, (rate, history)
    assert queued <= 0.5 * latency, (queued, history)
    assert slots.capacity.found and abs(slots.capacity.bound - capacity) <= 0.3 * capacity, history
    assert {reason for _, _, reason in history} >= {"start", "capacity"}


def test_main_s_fixed_start_of_64_is_what_it_replaces():
    """adaptive=False keeps the bound where it starts: a quarter of a capacity-256 server (the issue's 24%)."""
    rate, queued, history, _ = _serve(256, 1.0, 256 * 10, adaptive=False, base_concurrency=64)
    assert rate <= 0.3 * 256
    assert history == [[0.0, 64, "start"]]


def test_the_user_s_max_concurrency_caps_what_is_found():
    rate, queued, history, slots = _serve(1024, 1.0, 4000, max_concurrency=200)
    assert slots.peak <= 200
    assert history[-1][1] == 200 and history[-1][2] == "cap", history


def test_a_rate_limit_still_governs_and_a_capacity_found_caps_it():
    lim = AdaptiveLimit(initial=64, maximum=1024, base=64, clock=FakeClock())
    lim.size(200.0)  # 200 requests/s known from the headers: 400 in flight at 1 s
    lim.on_success(1.0, rate=200.0)
    assert int(lim.limit) == 400 and lim.history[-1][2] == "limits"
    lim.capacity.found, lim.capacity.bound = True, 150  # a capacity found below the rate's need
    lim.size(200.0)
    assert int(lim.limit) == 150 and lim.history[-1][2] == "capacity"


def test_a_slower_server_is_a_new_floor_not_a_queue():
    """A server that became twice as slow for good (not a queue: fewer requests in flight do not help) is cut
    once, then its latency is the new floor: the bound does not fall to the minimum."""
    clock = FakeClock()
    finder = CapacityFinder(start=64, maximum=1024, clock=clock)
    for _ in range(64):
        finder.sent()
    clock.now = 1.0
    for _ in range(64):
        finder.on_answer(1.0, 64, sent_at=0.0)
    for window in range(8):
        clock.now += 0.5
        for _ in range(200):
            finder.sent()
        clock.now += 2.0
        for _ in range(200):
            finder.on_answer(2.0, int(finder.bound), sent_at=clock.now - 2.0)
    assert finder.bound >= 32, finder.bound
    assert finder.floor >= 1.9


def test_the_simulator_counts_a_capacity_s_queue():
    from inferframe.simulator import SimState, SimulatorConfig

    state = SimState(SimulatorConfig(capacity=2, capacity_slowdown=0.5))
    snap = state.stats_snapshot()
    assert (snap["capacity"], snap["queued"], snap["mean_queue_wait_s"]) == (2, 0, 0.0)
    with pytest.raises(ValueError, match="capacity must be None or an int >= 1"):
        SimulatorConfig(capacity=0)


def test_a_capacity_found_is_remembered_by_the_next_job_of_the_process():
    from inferframe.runtime.coordinator import LocalCoordinator

    config = RuntimeConfig()
    first = LocalCoordinator().limits("openai:http://gpu-box/v1|m", config, "k")
    first.slots.capacity.floor, first.slots.capacity.bound, first.slots.capacity.found = 0.05, 300, True
    second = LocalCoordinator().limits("openai:http://gpu-box/v1|m", config, "k")
    assert int(second.slots.limit) == 300 and second.slots.capacity.found
    other = LocalCoordinator().limits("openai:http://other/v1|m", config, "k")
    assert int(other.slots.limit) == 64


class _InProcess:
    """The lease calls of ``ray_limits.transport.ActorLink``, answered by an in-process LimitsActor."""

    wait_s = 1.0

    def __init__(self, actor) -> None:
        self.actor = actor

    def unreachable(self, why: str):
        return RuntimeError(why)

    async def call(self, method: str, *args):
        return await getattr(self.actor, method)(*args)


def test_cluster_workers_find_one_capacity_through_the_coordinator():
    """Four workers (their real leased limits, one LimitsActor) against one capacity-256 server: the coordinator's
    one finder finds the capacity from all their answers, and their shares split it (no worker probes alone)."""
    from inferframe.runners.ray_limits import IDLE_S, LeasedLimiter, LimitsActor, shared_breaker, shared_slots
    from inferframe.runtime.coordinator import SharedLimits

    capacity, latency, workers, rows = 256, 1.0, 4, 256 * 6
    loop = VirtualTimeLoop()
    clock = LoopClock(loop)
    actor = LimitsActor(clock=clock)
    waits = []

    async def main():
        answer = _fifo_server(loop, capacity, latency, waits)
        config = RuntimeConfig(cache_policy="off")
        runtimes = []
        for _ in range(workers):
            slots, breaker = shared_slots(config, clock), shared_breaker()
            lim = LeasedLimiter(_InProcess(actor), "k", config, slots, breaker)
            lim.clock = clock
            runtimes.append(InferenceRuntime(MockProvider(answer), config, model="m", clock=clock,
                                             limits=SharedLimits(lim, slots, breaker)))
        t0 = loop.time()
        outs = await asyncio.gather(*(rt.send_many([Request("chat", {"q": i}, 5) for i in range(rows)], [None] * rows)
                                      for rt in runtimes))
        assert all(r.value == "ok" for out in outs for r in out)
        took = loop.time() - t0
        await asyncio.sleep(IDLE_S)  # virtual: the leases' heartbeats end before the loop closes
        return workers * rows / took, runtimes

    rate, runtimes = loop.run(main())
    state = actor.describe("k")["keys"]["k"]
    # Found, then held within the finder's steady state: it grows while the queue is under a tenth of the floor.
    assert state["found"] and 0.8 * capacity <= state["bound"] <= 1.4 * capacity, state
    # The shares split it (a share grows only into what the others gave up, so the last growth may lag a call).
    assert 0.85 * state["bound"] <= sum(state["shares"].values()) <= state["bound"], state
    assert all(rt.slots.capacity.found for rt in runtimes)
    assert rate >= 0.7 * capacity / latency, rate  # slow start included (one process: 0.67 over as many rows)
    assert sum(waits) / len(waits) <= 0.5 * latency


def _fifo_steps(finder: CapacityFinder, clock: FakeClock, capacity: int, steps: int):
    """A FIFO server on a fake clock, one floor (1 s) a step: the client fills the bound, each request sent with the
    count in flight as it left; a step later the server has answered the first ``capacity`` waiting (latency: the
    steps each waited, plus one). Yields the bound after each step."""
    waiting: collections.deque[float] = collections.deque()
    for _ in range(steps):
        now = clock.now
        while len(waiting) < finder.bound:
            waiting.append(now)
            finder.sent(now, in_flight=len(waiting))
        clock.now = now + 1.0
        for _ in range(min(capacity, len(waiting))):
            sent_at = waiting.popleft()
            finder.on_answer(clock.now - sent_at, len(waiting) + 1, sent_at=sent_at)
        yield finder.bound


def test_slow_start_doubles_once_a_round_trip():
    """TCP's slow start: each answer at the floor lets the bound grow to twice the requests in flight it proves the
    server serves, so 64 reaches 1,024 in 4 round trips (64, 128, 256, 512, 1,024). Judged a window at a time, the
    bound doubled once a window, and a window began half a floor after the last move: 8 round trips."""
    clock = FakeClock()
    finder = CapacityFinder(start=64, maximum=1024, clock=clock)
    bounds = list(_fifo_steps(finder, clock, capacity=10**6, steps=4))
    assert bounds == [128, 256, 512, 1024], bounds
    assert not finder.found and finder.reason == "cap"


def test_slow_start_grows_only_from_what_came_back_at_the_floor():
    """The bound never passes twice the most in flight that came back at the floor: in a FIFO the requests sent past
    the capacity queue and prove nothing, so slow start overshoots a capacity of 100 by 2x at most. It ends once
    answers queued and the delivery rate stopped growing (BBR's full pipe: 64, 100, 100 answers a round trip), a
    round trip after the first queued answer, cut to the capacity."""
    clock = FakeClock()
    finder = CapacityFinder(start=64, maximum=1024, clock=clock)
    capacity, cut = 100, None
    for step, bound in enumerate(_fifo_steps(finder, clock, capacity, steps=8)):
        assert bound <= 2 * capacity, bound
        if finder.found and cut is None:
            cut = (step, bound)  # slow start ended: cut to about what the server served at once
    assert cut is not None and cut[0] <= 3 and capacity <= cut[1] <= 1.1 * capacity, cut
    assert capacity <= finder.bound <= capacity + capacity ** 0.5 + 1, finder.bound  # then the gradient's headroom


def _moves(history: list, capacity: int) -> tuple[float, float, int]:
    """When the bound first passed ``capacity``, when it was first cut for a queue, and the most it was after that."""
    over = next(t for t, bound, _ in history if bound > capacity)
    cut = next(t for t, _, reason in history if reason == "capacity")
    return over, cut, max(bound for t, bound, _ in history if t >= cut)


def test_a_queue_cuts_the_bound_as_soon_as_its_answers_come_back():
    """The requests sent past the capacity come back a floor late (they waited a round trip): slow start ends at the
    first of them, two round trips after the bound passed the capacity, not a judged window later (three)."""
    capacity, latency = 256, 1.0
    rate, queued, history, slots = _serve(capacity, latency, capacity * 20)
    over, cut, _ = _moves(history, capacity)
    assert cut - over <= 2 * latency, history
    # Cut to what the server serves at once: the most in flight that came back at the floor, or the last round's
    # delivery rate x the floor (here the answers of the round plus the queued ones that ended slow start).
    assert all(capacity <= bound <= 1.05 * capacity for t, bound, _ in history if t == cut), history


def test_a_capacity_found_is_not_crept_past_into_a_standing_queue():
    """Past a capacity found the bound grows only while the answers to requests sent at it (a round trip after
    the others, for those a FIFO queued) show at most a tenth queued: capacity 32 holds within its square root.
    Judged by the cohort's quartile alone, 5 or 10 of 37 or 43 queued left it at the floor: the bound crept to 49,
    then a cut overshot to 24 (0.35x the latency queued, 91% of the best rate)."""
    capacity, latency = 32, 1.0
    rate, queued, history, slots = _serve(capacity, latency, capacity * 30)
    _, _, most = _moves(history, capacity)
    assert most <= capacity + int(capacity ** 0.5) + 1, history
    assert rate >= 0.93 * capacity / latency, (rate, history)
