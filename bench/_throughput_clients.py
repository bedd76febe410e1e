"""The child side of ``bench/prompt_throughput.py``: one client sending the benchmark's rows, in a process of its own.

``child_main`` runs one client (bare aiohttp, the openai SDK, inferframe, Daft) against the simulator's
URL, after a warm-up, and prints one result line (``_sim_util.emit_result``) with its rows, seconds,
CPU and garbage-collector time. The parent, ``prompt_throughput.py``, starts the children and prints
the tables and ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from _sim_util import child_cpu_seconds, emit_result, sim_admin

MODEL = "gpt-5-mini"
API_KEY = "sk-bench"
WARMUP_ROWS = 64


def texts(n: int, offset: int = 0) -> list[str]:
    return [f"Row {i:07d}: the parcel arrived on time and the product works well. What is the sentiment?"
            for i in range(offset, offset + n)]


async def _aiohttp_run(base_url: str, rows: list[str], conc: int) -> list:
    import aiohttp
    import orjson

    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
    sem = asyncio.Semaphore(conc)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), headers=headers) as session:
        async def one(text: str):
            async with sem:
                body = orjson.dumps({"model": MODEL, "messages": [{"role": "user", "content": text}]})
                async with session.post(url, data=body) as resp:
                    data = orjson.loads(await resp.read())
                    if resp.status != 200:
                        return None
                    return data["choices"][0]["message"]["content"]

        return await asyncio.gather(*(one(t) for t in rows))


async def _openai_run(base_url: str, rows: list[str], conc: int) -> list:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key=API_KEY)
    sem = asyncio.Semaphore(conc)

    async def one(text: str):
        async with sem:
            try:
                r = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": text}])
            except openai.OpenAIError:
                return None
            return r.choices[0].message.content

    try:
        return await asyncio.gather(*(one(t) for t in rows))
    finally:
        await client.close()


def _inferframe_run(base_url: str, rows: list[str], conc: int) -> tuple[list, dict]:
    import inferframe as ifr
    from inferframe.functions import prompt
    from inferframe.observe import last_run

    df = ifr.from_pydict({"q": rows})
    df = df.with_column("a", prompt(ifr.col("q"), provider="openai", base_url=base_url, api_key=API_KEY, model=MODEL,
                                    use_chat_completions=True, max_concurrency=conc))
    out = df.to_arrow(progress=False)
    report = last_run()
    return out.column("a").to_pylist(), (report[0] if report else {})


def _daft_run(base_url: str, rows: list[str], conc: int, batch: int) -> list:
    import daft
    from daft.ai.openai.provider import OpenAIProvider
    from daft.functions import prompt

    provider = OpenAIProvider(base_url=base_url, api_key=API_KEY)
    k = max(1, conc // batch - 1)
    df = daft.from_pydict({"q": rows}).into_batches(batch)
    df = df.with_column("a", prompt(daft.col("q"), provider=provider, model=MODEL, use_chat_completions=True,
                                    concurrency=k, on_error="log"))
    return df.to_arrow().column("a").to_pylist()


def child_main(args: argparse.Namespace) -> None:
    base_url = args.url
    if args.child == "inferframe-aiohttp":
        os.environ["INFERFRAME_HTTP"] = "aiohttp"  # read when the job's provider connects
    root = base_url[: -len("/v1")]

    def run(rows: list[str]):
        extra: dict = {}
        if args.child == "aiohttp":
            vals = asyncio.run(_aiohttp_run(base_url, rows, args.concurrency))
        elif args.child == "aiohttp-gc":
            from inferframe.execution.gc_scope import job_gc

            with job_gc():  # the collector setting inferframe's jobs run with
                vals = asyncio.run(_aiohttp_run(base_url, rows, args.concurrency))
        elif args.child == "openai-sdk":
            vals = asyncio.run(_openai_run(base_url, rows, args.concurrency))
        elif args.child in ("inferframe", "inferframe-aiohttp"):
            vals, extra = _inferframe_run(base_url, rows, args.concurrency)
        elif args.child == "daft":
            vals = _daft_run(base_url, rows, args.concurrency, args.daft_batch)
        else:
            raise SystemExit(f"unknown client {args.child}")
        return vals, extra

    if args.child == "daft":
        # A second prompt() query in one Daft 0.7.26 process hangs after its last answer (seen here), so
        # Daft's warm-up is a plain query: it still loads the engine and starts its runtime.
        import daft

        daft.from_pydict({"x": list(range(WARMUP_ROWS))}).into_batches(16).with_column("y", daft.col("x") + 1).to_arrow()
    else:
        run(texts(WARMUP_ROWS, offset=9_000_000))  # untimed
    sim_admin(root, "POST", "/_sim/reset", {})
    rows = texts(args.rows)
    spy = None
    if args.pyspy_out:  # profile the timed part only: attach py-spy to this process after the warm-up
        spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(os.getpid()),
                                "--nonblocking", "--gil", "--rate", "250", "--format", "raw", "-o", args.pyspy_out],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
    import gc

    collected = {"seconds": 0.0, "runs": 0}
    began = [0.0]

    def gc_timer(phase: str, info: dict) -> None:  # the collector's share of the client's CPU
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            collected["seconds"] += time.perf_counter() - began[0]
            collected["runs"] += 1

    gc.callbacks.append(gc_timer)
    cpu0 = child_cpu_seconds()
    t0 = time.perf_counter()
    vals, extra = run(rows)
    seconds = time.perf_counter() - t0
    cpu = child_cpu_seconds() - cpu0
    gc.callbacks.remove(gc_timer)
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
    ok = sum(1 for v in vals if v is not None)
    # Daft may reorder rows; check the answers echo the rows' own ids as a multiset.
    want = collections.Counter(t[:11] for t in rows)
    got = collections.Counter(v.removeprefix("sim answer: ")[:11] for v in vals if v is not None)
    emit_result({"seconds": seconds, "rows": len(vals), "ok": ok, "failed": len(vals) - ok,
                 "answers_match": got == want, "cpu_s": cpu, "gc_s": collected["seconds"],
                 "gc_runs": collected["runs"], "report": extra})
