"""The runtime's own CPU per request: ``InferenceRuntime.send_many`` against a provider that answers at once.

No HTTP, no Arrow, no executor: a ``MockProvider`` answers each request after one pass of the event
loop, so what is timed is the engine's per-row path (prefix scheduler, senders, admission, in-flight
bound, counters, results). Rows go as the prompt operator sends them: batches of 128, 33 at once,
each after ``batch_turn``. Prints CPU us per row (process time), the least and the median of 5 runs.

``--whole``: the whole prompt() path instead (``df.with_column(prompt(...)).to_arrow()``: the executor, the
prompt operator's keys, bodies and result columns, the engine, the provider's body encoding and answer
parsing) with an instant transport: ``OpenAIProvider.send`` encodes the body and parses an answer the
simulator gave once (its body and headers), with no HTTP. What aiohttp costs is what is left out; this is
the part of the client's CPU per row that is inferframe's own (issue 36).

To compare two versions, run it with ``PYTHONPATH=<checkout>/src`` for each, one after the other. CPU time
on a shared 2-CPU machine moves by 20-30% run to run: alternate the versions and compare medians.

Usage:
    .venv/bin/python bench/engine_cost.py                 # 20,000 rows a run
    .venv/bin/python bench/engine_cost.py --rows 50000
    .venv/bin/python bench/engine_cost.py --whole         # the whole prompt() path, instant transport
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import warnings

from inferframe.providers.interface import MockProvider, Outcome, Request, Usage
from inferframe.runtime.config import RuntimeConfig
from inferframe.runtime.engine import InferenceRuntime

BATCH, WINDOW = 128, 33  # the prompt operator's batches, and how many the executor hands the loop at once


async def _answer(request: Request) -> Outcome:
    await asyncio.sleep(0)
    return Outcome(value="ok", usage=Usage(10, 2))


def _request(i: int) -> Request:
    text = _text(i)
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


def _instant_transport() -> str:
    """Make ``OpenAIProvider.send`` answer at once with the simulator's answer to one row; the base URL to use."""
    import aiohttp
    from multidict import CIMultiDict, CIMultiDictProxy

    from inferframe.providers import openai as oa
    from inferframe.providers import openai_format as wire
    from inferframe.simulator import Simulator, SimulatorConfig

    async def one_answer(url: str):
        async with aiohttp.ClientSession() as session:
            body = {"model": "gpt-5-mini", "messages": [{"role": "user", "content": _text(0)}]}
            async with session.post(url + "/chat/completions", json=body, headers={"Authorization": "Bearer sk-b"}) as r:
                return await r.read(), CIMultiDictProxy(CIMultiDict(r.headers))

    proc = Simulator.spawn(SimulatorConfig(latency_ms=0))
    try:
        raw, headers = asyncio.run(one_answer(proc.base_url))
    finally:
        proc.close()

    async def send(self, request):
        oa._dumps(request.body)  # what the real send encodes
        await asyncio.sleep(0)
        return wire.parse_answer(request.endpoint, 200, oa._loads(raw), headers)

    oa.OpenAIProvider.send = send
    return "http://127.0.0.1:9/v1"  # never connected to


def _text(i: int) -> str:
    return f"Row {i:07d}: the parcel arrived on time and the product works well. What is the sentiment?"


def _whole(n: int, concurrency: int, base_url: str) -> None:
    import inferframe as ifr
    from inferframe.functions import prompt

    warnings.simplefilter("ignore", ifr.DriftWarning)  # every run of this pipeline answers alike: drift is expected
    df = ifr.from_pydict({"q": [_text(i) for i in range(n)]})
    df = df.with_column("a", prompt(ifr.col("q"), provider="openai", base_url=base_url, api_key="sk-bench",
                                    model="gpt-5-mini", use_chat_completions=True, max_concurrency=concurrency))
    out = df.to_arrow(progress=False)
    assert out.num_rows == n and out.column("a").null_count == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--concurrency", type=int, default=512, help="max_concurrency (the in-flight bound starts at it)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--whole", action="store_true", help="the whole prompt() path with an instant transport")
    args = ap.parse_args()
    if args.whole:
        os.environ["INFERFRAME_CACHE"] = "off"  # every row goes to the (instant) transport
        url = _instant_transport()
        job = lambda n: _whole(n, args.concurrency, url)  # noqa: E731
        what = "the whole prompt() path (df.with_column(prompt(...)).to_arrow()), instant transport"
    else:
        job = lambda n: asyncio.run(_job(n, args.concurrency))  # noqa: E731
        what = "send_many against an instant provider"
    job(2_000)  # warm-up: imports, first calls
    runs = []
    for _ in range(args.repeat):
        c0 = time.process_time()
        job(args.rows)
        runs.append(1e6 * (time.process_time() - c0) / args.rows)
    print(f"engine_cost: {what}, {args.rows:,} rows, max_concurrency "
          f"{args.concurrency}: CPU us/row least {min(runs):.1f}, median {statistics.median(runs):.1f} "
          f"({', '.join(f'{r:.1f}' for r in runs)})")


if __name__ == "__main__":
    main()
