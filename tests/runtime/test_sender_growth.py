"""The sender pool grows past 1,024 only while answers keep pace (issue 36, item 3).

A server that queues requests (a constant rate: twice the requests in flight take twice as long)
keeps the pool at 1,024 of a 16,384 bound; a server with a steady latency gets the whole bound; a
bound under 1,024 is used at once. The bound is ``base_concurrency=max_concurrency``, as ``prompt()``
sets it when no rate limit is known.
"""

from __future__ import annotations

import asyncio

from inferframe.providers.interface import MockProvider, Outcome, Request
from inferframe.runtime import InferenceRuntime, RuntimeConfig
from inferframe.runtime.senders import FIRST_SENDERS


def _run(send, rows: int, bound: int):
    """Send ``rows`` rows through a runtime bounded at ``bound``; (peak in flight, peak over the last fifth, runtime)."""
    state = {"now": 0, "peak": 0, "late_peak": 0, "answered": 0}

    async def answer(r):
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        if state["answered"] > rows * 4 // 5:
            state["late_peak"] = max(state["late_peak"], state["now"])
        try:
            await send(state["now"])
        finally:
            state["now"] -= 1
            state["answered"] += 1
        return Outcome(value="ok")

    async def main():
        rt = InferenceRuntime(MockProvider(answer), RuntimeConfig(cache_policy="off", max_concurrency=bound,
                                                                  base_concurrency=bound), model="m")
        out = await rt.send_many([Request("chat", {"q": i}, 5) for i in range(rows)], [None] * rows)
        assert [r.value for r in out] == ["ok"] * rows
        return rt

    rt = asyncio.run(main())
    return state["peak"], state["late_peak"], rt


def test_a_server_that_queues_keeps_the_first_size():
    async def at_its_limit(in_flight):
        # A server at its limit answers 1,000 requests a second however many are in flight, so a request
        # waits for those before it: in flight / rate (Little's law). Its latency is set from the count,
        # not from when this loop got to it: a queue timed by the loop's clock (0.5 ms a request) stopped
        # queueing on a loaded CI machine, whose loop could not send 2,000 a second, and the pool grew to
        # 4,096.
        await asyncio.sleep(in_flight / 1000)

    peak, late_peak, rt = _run(at_its_limit, 8000, 16384)
    # It tried twice the size once (answers came back about twice as slow) and went back; without the rule
    # every row was in flight at once (all 8,000 of them, up to the bound).
    assert rt._grown == FIRST_SENDERS and not rt._growing
    assert peak <= 2 * FIRST_SENDERS
    assert late_peak <= FIRST_SENDERS


def test_a_server_that_queues_sends_the_pool_back_even_when_the_client_is_busy_too(monkeypatch):
    """CI saw the pool stay at 2,048 against a queueing server: at twice the size the process was on a CPU more
    than half the time, and that rule ("the client sets the pace: stay") was judged before the queueing one."""
    from inferframe.runtime import senders

    in_flight = {"now": 0}
    real_cpu = senders._cpu_seconds
    # The client is busy (on a CPU all the time) once more than the first size is in flight, as a loaded machine's.
    monkeypatch.setattr(senders, "_cpu_seconds", lambda: senders.time.monotonic() if in_flight["now"] > 1100 else real_cpu())

    async def at_its_limit(now):
        in_flight["now"] = now
        await asyncio.sleep(now / 1000)

    _, late_peak, rt = _run(at_its_limit, 8000, 16384)
    assert rt._grown == FIRST_SENDERS and not rt._growing
    assert late_peak <= FIRST_SENDERS


def test_a_server_with_a_steady_latency_gets_the_whole_bound():
    async def steady(_in_flight):
        await asyncio.sleep(1.0)

    # 2,048 in flight at 1 s: 2,048 answers a second, well within this thread's CPU (a client too busy to
    # send twice as much stops growing: test_a_client_that_sets_the_pace_stops_growing).
    peak, _, rt = _run(steady, 6000, 2048)
    assert peak == 2048 and rt._grown == 2048 and not rt._growing


def test_a_bound_under_the_first_size_is_used_at_once():
    async def steady(_in_flight):
        await asyncio.sleep(0.05)

    peak, _, rt = _run(steady, 2000, 512)
    assert peak == 512 and rt._grown == 512 and not rt._growing


def test_a_client_that_sets_the_pace_stops_growing(monkeypatch):
    import time

    from inferframe.runtime import senders

    # The process on a CPU 90% of the time (a zero-latency server here: about all of it).
    monkeypatch.setattr(senders, "_cpu_seconds", lambda: 0.9 * time.monotonic())

    async def steady(_in_flight):
        await asyncio.sleep(0.2)

    peak, _, rt = _run(steady, 4000, 16384)
    # A steady latency, so the pool would grow (test_a_server_with_a_steady_latency_gets_the_whole_bound); a
    # trial at twice the size would only queue requests in this thread, and there is none.
    assert rt._grown == FIRST_SENDERS and not rt._growing and peak <= FIRST_SENDERS
