"""A prompt() pipeline on the Ray runner against the local runner, at 200 ms latency.

The same plan (read from memory, a filter, ``prompt()`` through the project's OpenAI-compatible
simulator with constant 200 ms latency and no rate limit, a projection) runs once on the local
runner and once on the Ray runner (a local Ray cluster, ``--cpus`` CPUs), each with its own empty
response cache and distinct row texts, so every row is one paid request. Printed: rows, seconds,
rows/s, requests the server saw, the server's peak of requests in flight, and Ray / local.

Default settings (``max_concurrency`` 1,024, shared by every worker through the coordinator). On
one machine Ray cannot beat the local runner's single event loop on an I/O-bound job; the figure
says what the cluster machinery costs (start-up, actors, object store), which a job pays once.

Usage:
    .venv/bin/python bench/ray_prompt_throughput.py                  # 4,000 rows, about 1 min
    .venv/bin/python bench/ray_prompt_throughput.py --rows 20000 --cpus 2
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def run(runner: str, rows: int, base_url: str, cpus: int) -> dict:
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt
    from inferframe.observe import last_run

    if runner == "ray":
        ifr.set_runner_ray(num_cpus=cpus)
        ifr.from_pydict({"a": [1]}).to_arrow()  # start the cluster before the clock starts
    else:
        ifr.set_runner_native()
    df = (ifr.from_pydict({"id": list(range(rows)), "q": [f"{runner} question {i}" for i in range(rows)]})
          .where(col("id") >= 0)
          .with_column("a", prompt(col("q"), provider="openai", base_url=base_url, api_key="k", model="gpt-5-mini",
                                   use_chat_completions=True, cache_dir=tempfile.mkdtemp(prefix="bench-ray-")))
          .select("id", "a", "a_error"))
    t = time.perf_counter()
    out = df.to_arrow(progress=False)
    dt = time.perf_counter() - t
    assert out.num_rows == rows and out.column("a_error").null_count == rows, "rows failed"
    assert out.column("id").to_pylist() == list(range(rows)), "order"
    return {"seconds": dt, "rows_s": rows / dt, "requests": last_run()[0]["requests"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4000)
    p.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    p.add_argument("--latency-ms", type=float, default=200.0)
    args = p.parse_args()

    from inferframe.simulator import Simulator, SimulatorConfig

    print(f"ray_prompt_throughput: {args.rows:,} rows, {args.latency_ms:.0f} ms latency, {os.cpu_count()} CPUs, "
          f"Ray with num_cpus={args.cpus}, load average {os.getloadavg()[0]:.2f}", flush=True)
    results = {}
    with Simulator.spawn(SimulatorConfig(latency_ms=args.latency_ms, track_request_hashes=False)) as sim:
        for runner in ("local", "ray"):
            sim.reset()
            r = run(runner, args.rows, sim.base_url, args.cpus)
            after = sim.stats()
            r["server_requests"] = after["total_requests"]
            r["peak_in_flight"] = after["max_in_flight"]
            results[runner] = r
    print(f"{'runner':6s}  {'rows':>6s}  {'seconds':>7s}  {'rows/s':>8s}  {'requests':>8s}  {'peak in flight':>14s}")
    for runner, r in results.items():
        print(f"{runner:6s}  {args.rows:6,d}  {r['seconds']:7.2f}  {r['rows_s']:8,.1f}  {r['server_requests']:8,d}  "
              f"{r['peak_in_flight']:14,d}")
    print(f"ray / local rows/s: {results['ray']['rows_s'] / results['local']['rows_s']:.2f}x")


if __name__ == "__main__":
    main()
