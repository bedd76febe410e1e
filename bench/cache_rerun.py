"""Never pay twice, measured: a rerun of a finished job is served from the response cache.

Runs a prompt() job over N rows (default 100,000) against the project's simulator
(its own process, 0 ms latency), then runs the identical job again: the second run
must send zero requests. Also times ResponseCache.put (SQLite WAL, one commit per
answer, as the engine does) and get.

    .venv/bin/python bench/cache_rerun.py [--rows 100000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _util import table  # noqa: E402


def job(n: int, base_url: str, cache_dir: str):
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt

    df = ifr.from_pydict({"q": [f"question number {i}" for i in range(n)]})
    return df.with_column("a", prompt(col("q"), provider="openai", base_url=base_url, api_key="k",
                                      model="gpt-5-mini", use_chat_completions=True, max_concurrency=256,
                                      cache_dir=cache_dir))


def cache_costs(samples: int = 20_000) -> tuple[float, float]:
    from inferframe.runtime.cache import ResponseCache, cache_key

    cache = ResponseCache(tempfile.mkdtemp(prefix="inferframe-bench-cache-"))
    keys = [cache_key("openai:http://x/v1", "chat", {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]})
            for i in range(samples)]
    answer = "sim answer: " + "x" * 120
    t = time.perf_counter()
    for k in keys:
        cache.put(k, answer, 12, 30)
    put_us = (time.perf_counter() - t) / samples * 1e6
    t = time.perf_counter()
    for k in keys:
        cache.get(k)
    get_us = (time.perf_counter() - t) / samples * 1e6
    return put_us, get_us


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    args = p.parse_args()
    from inferframe.observe import last_run
    from inferframe.simulator import Simulator, SimulatorConfig

    print(f"cache_rerun: {args.rows:,} rows, 2 CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    cache_dir = tempfile.mkdtemp(prefix="inferframe-bench-cache-")
    rows = []
    with Simulator.spawn(SimulatorConfig(track_request_hashes=False)) as sim:
        for label in ("first run", "rerun"):
            before = sim.stats()["total_requests"]
            t = time.perf_counter()
            out = job(args.rows, sim.base_url, cache_dir).to_arrow(progress=False)
            dt = time.perf_counter() - t
            sent = sim.stats()["total_requests"] - before
            run = last_run()[0]
            assert out.num_rows == args.rows and out.column("a_error").null_count == args.rows
            rows.append([label, f"{dt:.2f}", f"{args.rows / dt:,.0f}", f"{sent:,}", f"{run['cache_hits']:,}"])
    print(table(["run", "seconds", "rows/s", "requests sent", "cache hits"], rows, "lrrrr"))
    put_us, get_us = cache_costs()
    print(f"\nResponseCache.put: {put_us:.1f} us per answer (committed at once, WAL); get: {get_us:.1f} us")
    print(f"rerun / first run speed: {float(rows[1][2].replace(',', '')) / float(rows[0][2].replace(',', '')):.2f}x")


if __name__ == "__main__":
    main()
