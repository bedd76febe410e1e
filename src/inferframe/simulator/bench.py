"""Quick load test of the simulator: aiohttp client, fixed concurrency, reports req/s.

Usage::

    python -m inferframe.simulator.bench [--requests 20000] [--concurrency 256]
        [--endpoint chat|responses|embeddings] [--url BASE_URL] [--latency-ms 0]

Without ``--url`` it spawns a simulator subprocess (``Simulator.spawn``), so
client and server each get their own interpreter.  Returns a dict from
:func:`run_bench` (requests, seconds, rps, statuses).

Example:
    >>> with Simulator(SimulatorConfig()) as sim:
    ...     result = asyncio.run(run_bench(sim.base_url, requests=50, concurrency=8))
    >>> result["requests"], result["statuses"]
    (50, {200: 50})
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from types import MappingProxyType
from typing import Optional

import aiohttp

from .config import SimulatorConfig
from .server import Simulator

__all__ = ["run_bench", "main"]

_BODIES = MappingProxyType({
    "chat": ("/chat/completions", lambda i: {"model": "gpt-4o-mini", "messages": [
        {"role": "system", "content": "Classify the sentiment."},
        {"role": "user", "content": f"Row {i}: the product arrived on time and works well."}]}),
    "responses": ("/responses", lambda i: {"model": "gpt-4o-mini", "input": f"Row {i}: summarise this."}),
    "embeddings": ("/embeddings", lambda i: {"model": "text-embedding-3-small", "input": f"row {i} some text",
                                             "encoding_format": "base64"}),
})


async def run_bench(base_url: str, requests: int = 20000, concurrency: int = 256, endpoint: str = "chat") -> dict:
    """Send ``requests`` POSTs with ``concurrency`` workers; return counts and req/s."""
    path, make = _BODIES[endpoint]
    url = base_url.rstrip("/") + path
    bodies = [json.dumps(make(i)).encode() for i in range(requests)]
    statuses: dict[int, int] = {}
    next_i = 0
    conn = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer x"}
    async with aiohttp.ClientSession(connector=conn) as session:
        async def worker() -> None:
            nonlocal next_i
            while next_i < requests:
                i = next_i
                next_i += 1
                async with session.post(url, data=bodies[i], headers=headers) as resp:
                    await resp.read()
                    statuses[resp.status] = statuses.get(resp.status, 0) + 1

        # warm-up so connection setup is not measured
        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - t
    return {"requests": requests, "concurrency": concurrency, "endpoint": endpoint,
            "seconds": round(elapsed, 3), "rps": round(requests / elapsed, 1), "statuses": statuses}


def main(argv: Optional[list] = None) -> None:
    """CLI entry point (see module docstring)."""
    p = argparse.ArgumentParser(prog="python -m inferframe.simulator.bench")
    p.add_argument("--requests", type=int, default=20000)
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--endpoint", choices=sorted(_BODIES), default="chat")
    p.add_argument("--url", default=None)
    p.add_argument("--latency-ms", type=float, default=0.0)
    ns = p.parse_args(argv)
    if ns.url:
        print(asyncio.run(run_bench(ns.url, ns.requests, ns.concurrency, ns.endpoint)))
        return
    with Simulator.spawn(SimulatorConfig(latency_ms=ns.latency_ms)) as proc:
        print(asyncio.run(run_bench(proc.base_url, ns.requests, ns.concurrency, ns.endpoint)))
        print({k: v for k, v in proc.stats().items() if k in ("total_requests", "by_status", "max_in_flight")})


if __name__ == "__main__":
    main()
