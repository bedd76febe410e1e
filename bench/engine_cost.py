"""The runtime's own CPU per request: ``InferenceRuntime.send_many`` against a provider that answers at once.

No HTTP, no Arrow, no executor: a ``MockProvider`` answers each request after one pass of the event
loop, so what is timed is the engine's per-row path (prefix scheduler, senders, admission, in-flight
bound, counters, results). Rows go as the prompt operator sends them: batches of 128, 33 at once,
each after ``batch_turn``. Prints CPU us per row (process time), the least and the median of 5 runs.

To compare two versions, run it with ``PYTHONPATH=<checkout>/src`` for each, one after the other.

Usage:
    .venv/bin/python bench/engine_cost.py                 # 20,000 rows a run
    .venv/bin/python bench/engine_cost.py --rows 50000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from inferframe.providers.interface import MockProvider, Outcome, Request, Usage
from inferframe.runtime.config import RuntimeConfig
from inferframe.runtime.engine import InferenceRuntime

BATCH, WINDOW = 128, 33  # the prompt operator's batches, and how many the executor hands the loop at once


async def _answer(request: Request) -> Outcome:
    await asyncio.sleep(0)
    return Outcome(value="ok", usage=Usage(10, 2))


def _request(i: int) -> Request:
    text = f"Row {i:07d}: the parcel arrived on time and the product works well. What is the sentiment?"
    return Request("chat", {"messages": [{"role": "user", "content": text}]}, 30, prompt=text)


async def _job(n: int, concurrency: int) -> None:
    rt = InferenceRuntime(MockProvider(_answer), RuntimeConfig(cache_policy="off", max_concurrency=concurrency),
                          model="m")
    requests = [_request(i) for i in range(n)]
    keys = [f"k{i}" for i in range(n)]
    window = asyncio.Semaphore(WINDOW)

    async def batch(i: int) -> list:
        async with window:
            await rt.batch_turn()
            return await rt.send_many(requests[i:i + BATCH], keys[i:i + BATCH])

    out = await asyncio.gather(*(batch(i) for i in range(0, n, BATCH)))
    assert sum(len(b) for b in out) == n and all(r.value == "ok" for b in out for r in b)
    await rt.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--concurrency", type=int, default=512, help="max_concurrency (the in-flight bound starts at it)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    asyncio.run(_job(2_000, args.concurrency))  # warm-up: imports, first calls
    runs = []
    for _ in range(args.repeat):
        c0 = time.process_time()
        asyncio.run(_job(args.rows, args.concurrency))
        runs.append(1e6 * (time.process_time() - c0) / args.rows)
    print(f"engine_cost: send_many against an instant provider, {args.rows:,} rows, max_concurrency "
          f"{args.concurrency}: CPU us/row least {min(runs):.1f}, median {statistics.median(runs):.1f} "
          f"({', '.join(f'{r:.1f}' for r in runs)})")


if __name__ == "__main__":
    main()
