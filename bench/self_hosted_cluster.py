"""Four Ray workers against one self-hosted server: do they find its capacity together, without queueing it?

The simulator (its own process) serves ``--capacity`` requests at once (FIFO beyond, no limit headers,
a constant ``--latency-ms``). Four Ray worker actors on a local cluster each run an InferenceRuntime
with default settings over their quarter of ``--rows``, with the job's limits shared through one
coordinator actor (``runners.ray_limits``), whose one capacity finder bounds them together
(``ray_limits.cluster_capacity``).

Figures: rows/s against the best possible (capacity / latency; target >= 90%), the server's mean
queueing delay per request against the latency (target <= 0.5x), the server's peak in flight, and how
the coordinator's bound moved (seconds from its first lease: bound/why).

Usage:
    .venv/bin/python bench/self_hosted_cluster.py                       # 256 at 1 s, 5,120 rows: about 30 s
    .venv/bin/python bench/self_hosted_cluster.py --rows 2560
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

os.environ["INFERFRAME_CACHE"] = "off"  # measure the server's capacity, not the response cache
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import ray  # noqa: E402

from _sim_util import machine_line  # noqa: E402

KEY = "openai:bench|gpt-5-mini"


@ray.remote(num_cpus=0)
class Worker:
    """One worker process: an InferenceRuntime whose limits are the job's shared ones."""

    async def run(self, coordinator, base_url: str, first: int, n: int, start_at: float) -> dict:
        from inferframe.providers.interface import Request
        from inferframe.providers.openai import OpenAIProvider
        from inferframe.providers.spec import ProviderSpec
        from inferframe.runtime import InferenceRuntime, RuntimeConfig

        config = RuntimeConfig(cache_policy="off")  # default settings: no max_concurrency
        runtime = InferenceRuntime(OpenAIProvider(ProviderSpec("openai"), base_url=base_url, api_key="sk-bench"),
                                   config, model="gpt-5-mini", limits=coordinator.limits(KEY, config))
        body = {"model": "gpt-5-mini", "max_tokens": 16}
        requests = [Request("chat", {**body, "messages": [{"role": "user", "content": f"Row {i}: sentiment?"}]},
                            est_tokens=20) for i in range(first, first + n)]
        await asyncio.sleep(max(0.0, start_at - time.time()))
        t0 = time.time()
        results = await runtime.run_many(requests)
        t1 = time.time()
        await runtime.aclose()
        return {"ok": sum(r.value is not None for r in results), "t0": t0, "t1": t1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--capacity", type=int, default=256)
    ap.add_argument("--latency-ms", type=float, default=1000.0)
    ap.add_argument("--rows", type=int, default=5120)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    from inferframe.runners.ray_limits import start_coordinator
    from inferframe.simulator import Simulator, SimulatorConfig

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"INFERFRAME_PROGRESS": "0", "INFERFRAME_CACHE": "off"}})
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    latency = args.latency_ms / 1000.0
    print(f"self_hosted_cluster: {args.workers} Ray workers, default settings, one server of capacity "
          f"{args.capacity:,} at {args.latency_ms:g} ms (FIFO beyond, no limit headers), {args.rows:,} rows")
    print(f"  {machine_line()}")
    workers = [Worker.remote() for _ in range(args.workers)]
    coordinator = start_coordinator()
    share = args.rows // args.workers
    with Simulator.spawn(SimulatorConfig(capacity=args.capacity, latency_ms=args.latency_ms, seed=1)) as sim:
        start_at = time.time() + 2.0
        out = ray.get([w.run.remote(coordinator, sim.base_url, i * share, share, start_at)
                       for i, w in enumerate(workers)])
        stats = sim.stats()
    state = coordinator.describe(KEY)["keys"][KEY]
    coordinator.close()
    rows = sum(o["ok"] for o in out)
    took = max(o["t1"] for o in out) - min(o["t0"] for o in out)
    best = args.capacity / latency
    rate, queue = rows / took, stats.get("mean_queue_wait_s", 0.0)
    ok = rate >= 0.9 * best and queue <= 0.5 * latency and rows == share * args.workers
    print(f"  rows: {rows:,} of {share * args.workers:,} in {took:.1f} s: {rate:,.0f} rows/s, best {best:,.0f} "
          f"({100 * rate / best:.1f}%)")
    print(f"  server: mean queued {queue * 1000:.1f} ms ({queue / latency:.2f}x the latency), peak in flight "
          f"{stats.get('max_in_flight')}, 429s {stats['by_status'].get('429', 0)}")
    moves = ", ".join(f"{t:.1f}s:{b}/{why}" for t, b, why in state["capacity"][:16])
    floor = state["floor"]
    print(f"  coordinator's bound: [{moves}] now {state['bound']} (found: {state['found']}, latency floor "
          f"{'none' if floor is None else f'{floor:.3f} s'}), "
          f"shares {sorted(state['shares'].values())}")
    print("PASS" if ok else "FAIL", "self_hosted_cluster (targets: >= 90% of best, mean queued <= 0.5x latency)")
    ray.shutdown()


if __name__ == "__main__":
    main()
