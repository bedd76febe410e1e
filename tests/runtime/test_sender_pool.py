"""send_many's fixed pool of senders: no task per row, order and sharing kept, nothing left behind."""

import asyncio

import pytest

from inferframe.errors import ErrorKind, RowFailed
from inferframe.providers.interface import MockProvider, Outcome, Request
from inferframe.runtime import InferenceRuntime, RuntimeConfig
from inferframe.runtime.cache import cache_key
from inferframe.runtime.clock import FakeClock


def req(i, text=None):
    text = text or f"row {i}"
    return Request("chat", {"q": text}, 10, prompt=text)


def runtime(handler, **config):
    return InferenceRuntime(MockProvider(handler), RuntimeConfig(cache_policy="off", **config), model="m")


def test_rows_go_through_a_pool_no_larger_than_the_bound_in_order():
    seen_tasks, in_flight, peak = set(), [0], [0]

    async def answer(r):
        seen_tasks.add(asyncio.current_task())
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        await asyncio.sleep(0)
        in_flight[0] -= 1
        return Outcome(value=r.body["q"].upper())

    async def main():
        rt = runtime(answer, max_concurrency=8)
        out = await asyncio.gather(*(rt.send_many([req(i) for i in range(b, b + 100)], [f"k{i}" for i in range(b, b + 100)])
                                     for b in range(0, 1000, 100)))
        await asyncio.sleep(0)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return out, left

    out, left = asyncio.run(main())
    assert [r.value for batch in out for r in batch] == [f"ROW {i}" for i in range(1000)]
    # 1,000 rows sent by at most 8 tasks (the bound), not one task per row; none is left when no batch waits.
    assert len(seen_tasks) <= 8 and peak[0] == 8
    assert left == []


def test_identical_rows_share_one_request_across_batches_and_each_row_gets_its_answer():
    sent = []

    async def answer(r):
        sent.append(r.body["q"])
        await asyncio.sleep(0)
        return Outcome(value="a:" + r.body["q"])

    async def main():
        rt = runtime(answer)
        a = rt.send_many([req(0, "same"), req(1, "other")], ["kS", "kO"])
        b = rt.send_many([req(2, "same")], ["kS"])
        first, second = await asyncio.gather(a, b)
        one = await rt.run_one(req(3, "same"))  # not in flight any more: sent again
        return rt, first, second, one

    rt, first, second, one = asyncio.run(main())
    assert [r.value for r in first] == ["a:same", "a:other"] and second[0].value == "a:same"
    assert second[0].attempts == 0 and second[0].cost == 0.0  # paid once, by the first row
    assert sorted(sent) == ["other", "same", "same"] and rt.stats.deduped == 1 and one.value == "a:same"


def test_a_run_one_shares_a_row_a_batch_sent():
    release = asyncio.Event

    async def main():
        gate = release()
        sent = []

        async def answer(r):
            sent.append(r.body["q"])
            await gate.wait()
            return Outcome(value="v")

        rt = runtime(answer)
        key = cache_key(rt.identity, "chat", {"q": "x"}, None)  # the key run_one makes
        batch = asyncio.ensure_future(rt.send_many([req(0, "x")], [key]))
        await asyncio.sleep(0.01)
        single = asyncio.ensure_future(rt.run_one(req(1, "x")))
        await asyncio.sleep(0.01)
        gate.set()
        return sent, await batch, await single

    sent, batch, single = asyncio.run(main())
    assert sent == ["x"] and batch[0].value == "v" and single.value == "v" and single.attempts == 0


def test_a_cancelled_batch_sends_none_of_its_waiting_rows_and_leaves_no_task():
    sent = []

    async def answer(r):
        sent.append(r.body["q"])
        await asyncio.sleep(0.05)
        return Outcome(value="v")

    async def main():
        rt = runtime(answer, max_concurrency=2)
        task = asyncio.ensure_future(rt.send_many([req(i) for i in range(50)], [f"k{i}" for i in range(50)]))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.2)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return rt, left

    rt, left = asyncio.run(main())
    assert len(sent) == 2  # the two in flight when it was cancelled; the 48 waiting never went
    assert left == [] and rt._in_flight == {}


def test_a_retry_waits_its_delay_without_holding_a_sender_and_goes_first():
    clock = FakeClock()
    order = []
    tries = {}

    def answer(r):
        q = r.body["q"]
        order.append(q)
        tries[q] = tries.get(q, 0) + 1
        if q == "row 0" and tries[q] == 1:
            return Outcome(error_kind=ErrorKind.SERVER, status=500, message="HTTP 500")
        return Outcome(value="ok")

    async def main():
        rt = InferenceRuntime(MockProvider(answer), RuntimeConfig(cache_policy="off", max_concurrency=1), model="m",
                              clock=clock)
        return rt, await rt.send_many([req(i) for i in range(5)], [f"k{i}" for i in range(5)])

    rt, out = asyncio.run(main())
    assert [r.value for r in out] == ["ok"] * 5 and out[0].attempts == 2
    assert order[0] == "row 0" and order.count("row 0") == 2 and rt.stats.retries == 1 and rt.stats.retrying == 0


def test_on_error_raise_fails_the_batch_and_leaves_no_task():
    async def answer(r):
        await asyncio.sleep(0)
        if r.body["q"] == "row 3":
            return Outcome(error_kind=ErrorKind.REFUSAL, status=200, message="no")
        return Outcome(value="v")

    async def main():
        rt = runtime(answer, on_error="raise", max_concurrency=4)
        with pytest.raises(RowFailed, match="refusal"):
            await rt.send_many([req(i) for i in range(20)], [f"k{i}" for i in range(20)])
        await asyncio.sleep(0.05)
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    assert asyncio.run(main()) == []
