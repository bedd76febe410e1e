"""How many rows one stream releases at once: a bounded burst when groups must stay in order, all when none share a prefix."""

import asyncio

from inferframe.runtime.scheduler import AHEAD, PrefixScheduler


async def _released_in_one_pass(texts: list[str]) -> int:
    sched = PrefixScheduler(lanes=1)
    turns = [asyncio.ensure_future(sched.turn(t)) for t in texts]
    for _ in range(3):  # the rows arrive, then the scheduler's pump runs
        await asyncio.sleep(0)
    released = sched.released
    for t in turns:
        t.cancel()
    await asyncio.gather(*turns, return_exceptions=True)
    return released


def test_rows_that_share_no_prefix_are_all_released_at_once():
    texts = [f"{i:05d} " + "unrelated question " * 5 for i in range(600)]
    assert asyncio.run(_released_in_one_pass(texts)) == 600


def test_grouped_rows_are_released_a_burst_at_a_time():
    docs = ["document %d: " % d + "x" * 100 for d in range(6)]
    texts = [docs[i % 6] + f"question {i}" for i in range(600)]
    assert asyncio.run(_released_in_one_pass(texts)) == AHEAD


def test_rows_sharing_a_long_prefix_below_a_short_one_keep_the_bound():
    # The top-level groups share 3 characters; inside each, rows share a 100-character document.
    texts = [f"{i % 3:03d} " + ("doc %d " % (i % 3)) * 20 + f"question {i}" for i in range(600)]
    assert asyncio.run(_released_in_one_pass(texts)) == AHEAD
