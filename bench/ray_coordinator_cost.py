"""What one rate-limit coordinator actor costs, and how large a cluster it serves at 10,000 requests/s.

``inferframe.runners.ray_limits``: every worker of a Ray job leases its rate budget from one actor,
in chunks of about 100 ms of its part of the rate (at least one request). Measured here, on a local
Ray cluster (num_cpus=2):

  1. leases/s: how many lease calls one coordinator actor answers per second when ``--clients``
     client processes keep ``--concurrency`` calls each in flight, as ``--simulated-workers`` workers
     (each call a real lease: the report applied, the share computed, one request granted). The
     actor's CPU use is shown: on a small machine the clients compete with it for the CPUs.
  2. actor calls per 1,000 requests: ``--workers`` worker processes run acquire/release loops on
     their LeasedLimiter at ``--rate`` requests/s for ``--seconds``; counted at the actor. Also
     actor calls per worker-second (the design: about 1 / 0.1 s = 10 while a chunk is more than one
     request).
  3. admission cost in the actor: microseconds per granted request (the cluster's RateLimiter admits
     every request of a chunk), timed in-process.

From these: the largest cluster one coordinator serves at 10,000 requests/s, where the actor is
busy ``workers x calls per worker-second / leases per second + 10,000 x admission cost`` of its time
(a chunk at 10,000 requests/s is 1,000 / workers requests: more than one up to 1,000 workers).

Target: one coordinator serves at least 64 workers at 10,000 requests/s (PASS/FAIL).

Usage:
    .venv/bin/python bench/ray_coordinator_cost.py          # about 1 min
    .venv/bin/python bench/ray_coordinator_cost.py --rate 4000 --workers 4
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from _util import table  # noqa: E402
from _sim_util import machine_line  # noqa: E402

KEY = "openai:http://127.0.0.1/v1|gpt-5-mini"
TARGET_RATE = 10_000.0
TARGET_WORKERS = 64


class LeaseClient:
    """Calls the coordinator's lease method as fast as it answers, as many simulated workers."""

    def ready(self) -> bool:
        import inferframe.runners.ray_limits  # noqa: F401

        return True

    async def hammer(self, coordinator, config: dict, ids: list[str], concurrency: int, start_at: float,
                     seconds: float) -> int:
        handle = coordinator.handle
        # Every simulated worker has leased once (report only) before the clock starts: the chunk is then
        # what this many workers get (one request at 10,000/s and 1,000 workers).
        for i in range(0, len(ids), 50):
            await asyncio.gather(*[handle.lease.remote(KEY, w, config, 0, {}, 1.0) for w in ids[i:i + 50]])
        await asyncio.sleep(max(0.0, start_at - time.time()))
        end = start_at + seconds
        done = 0

        async def loop(k: int) -> None:
            nonlocal done
            received: dict[str, int] = {}
            i = k
            while time.time() < end:
                worker = ids[i % len(ids)]
                i += concurrency
                report = {"applied": 4, "in_flight": 0, "possible": 0, "received": received.get(worker, 0)}
                reply = await handle.lease.remote(KEY, worker, config, 100, report, 1.0)
                received[worker] = received.get(worker, 0) + reply["granted"]
                done += 1

        await asyncio.gather(*[loop(k) for k in range(concurrency)])
        return done


class LoopWorker:
    """A worker process running acquire/release loops on its leased limiter at its part of the rate."""

    def ready(self) -> bool:
        import inferframe.runners.ray_limits  # noqa: F401

        return True

    async def run(self, coordinator, rpm: float, start_at: float, seconds: float, tasks: int) -> dict:
        from inferframe.runtime.config import RuntimeConfig

        lim = coordinator.limits(KEY, RuntimeConfig(rpm=rpm, max_concurrency=100_000)).limiter
        await asyncio.sleep(max(0.0, start_at - time.time()))
        end = start_at + seconds
        admitted = 0

        async def loop() -> None:
            nonlocal admitted
            while time.time() < end:
                ticket = await lim.acquire(100)
                admitted += 1
                lim.release(100, None, ticket)
                if admitted % 64 == 0:
                    await asyncio.sleep(0)  # the loop is all local work between leases: let the others run

        await asyncio.gather(*[loop() for _ in range(tasks)])
        return {"admitted": admitted, "calls": lim.calls}


def actor_cpu(coordinator):
    import psutil
    import ray

    pid = ray.get(coordinator.handle.__ray_call__.remote(lambda self: os.getpid()))
    return psutil.Process(pid)


def cpu_seconds(proc) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def lease_capacity(args) -> dict:
    import ray

    from inferframe.runners.ray_limits import start_coordinator

    coordinator = start_coordinator()
    try:
        proc = actor_cpu(coordinator)
        cls = ray.remote(num_cpus=0)(LeaseClient)
        clients = [cls.remote() for _ in range(args.clients)]
        ray.get([c.ready.remote() for c in clients])
        # 10,000 requests/s: more than the calls can take one at a time, so no call waits for budget.
        config = {"rpm": 60.0 * TARGET_RATE, "tpm": None, "max_concurrency": 1_000_000}
        ids = [f"w{i:05d}" for i in range(args.simulated_workers)]
        per = [ids[i::args.clients] for i in range(args.clients)]
        start_at = time.time() + 5.0  # after the warm-up leases
        refs = [c.hammer.remote(coordinator, config, per[i], args.concurrency, start_at, args.seconds)
                for i, c in enumerate(clients)]
        time.sleep(max(0.0, start_at - time.time()))
        cpu0 = cpu_seconds(proc)
        calls = sum(ray.get(refs))
        cpu = cpu_seconds(proc) - cpu0
        for c in clients:
            ray.kill(c)
    finally:
        coordinator.close()
    return {"calls": calls, "per_s": calls / args.seconds, "actor_cpu": cpu / args.seconds,
            "us_per_call": 1e6 * cpu / max(1, calls)}


def calls_per_requests(args) -> dict:
    import ray

    from inferframe.runners.ray_limits import start_coordinator

    coordinator = start_coordinator()
    try:
        cls = ray.remote(num_cpus=0)(LoopWorker)
        workers = [cls.remote() for _ in range(args.workers)]
        ray.get([w.ready.remote() for w in workers])
        start_at = time.time() + 1.0
        out = ray.get([w.run.remote(coordinator, args.rate * 60.0, start_at, args.seconds, 4) for w in workers])
        state = coordinator.describe(KEY)
        for w in workers:
            ray.kill(w)
    finally:
        coordinator.close()
    admitted = sum(o["admitted"] for o in out)
    calls = state["calls"]
    return {"admitted": admitted, "achieved": admitted / args.seconds, "calls": calls,
            "per_1000": 1000 * calls / max(1, admitted), "per_worker_s": calls / (args.workers * args.seconds)}


def admission_cost() -> float:
    """Microseconds of the actor's time per granted request, timed in-process on the actor's own code."""
    from inferframe.runners.ray_limits import LimitsActor

    actor = LimitsActor()
    config = {"rpm": 60.0 * 100_000, "tpm": None, "max_concurrency": 1_000_000}

    async def run() -> float:
        received = 0
        await actor.lease(KEY, "w", config, 100)
        t0 = time.perf_counter()
        for _ in range(40):
            reply = await actor.lease(KEY, "w", config, 100, {"received": received, "possible": 0})
            received += reply["granted"]
        return 1e6 * (time.perf_counter() - t0) / received

    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=2, help="client processes calling lease (part 1)")
    ap.add_argument("--concurrency", type=int, default=32, help="calls each client keeps in flight (part 1)")
    ap.add_argument("--simulated-workers", type=int, default=1000, help="worker ids the clients lease as (part 1)")
    ap.add_argument("--workers", type=int, default=4, help="worker processes (part 2)")
    ap.add_argument("--rate", type=float, default=2000.0, help="requests/s the limit allows (part 2)")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from inferframe.runners.ray_limits import CHUNK_SECONDS

    print(f"ray_coordinator_cost: one coordinator actor (inferframe.runners.ray_limits), chunks of "
          f"{CHUNK_SECONDS * 1000:g} ms of a worker's part of the rate")
    print(f"  {machine_line()}, ray {ray.__version__}")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"INFERFRAME_PROGRESS": "0"}})
    try:
        print(f"  1. lease calls: {args.clients} clients x {args.concurrency} in flight, as "
              f"{args.simulated_workers:,} workers, {args.seconds:g} s ...", flush=True)
        cap = lease_capacity(args)
        print(f"  2. {args.workers} workers at {args.rate:,.0f} requests/s, {args.seconds:g} s ...", flush=True)
        use = calls_per_requests(args)
    finally:
        ray.shutdown()
    print("  3. admission cost in the actor (in-process) ...", flush=True)
    admit_us = admission_cost()

    print()
    print(table(["measure", "value"], [
        ["lease calls answered / s (one actor)", f"{cap['per_s']:,.0f}"],
        ["actor CPU while answering", f"{100 * cap['actor_cpu']:.0f}% of a core"],
        ["actor CPU per lease call", f"{cap['us_per_call']:,.0f} us"],
        [f"requests admitted / s ({args.workers} workers, limit {args.rate:,.0f}/s)", f"{use['achieved']:,.0f}"],
        ["actor calls per 1,000 requests", f"{use['per_1000']:,.1f}"],
        ["actor calls per worker-second", f"{use['per_worker_s']:,.1f}"],
        ["actor time per granted request", f"{admit_us:.1f} us"],
    ], "lr"))

    # The actor's time per second at 10,000 requests/s and W workers (chunks above one request up to
    # TARGET_RATE x CHUNK_SECONDS workers): W x calls per worker-second calls, each 1/leases-per-s of its
    # time (the measured rate, with the clients on the same CPUs: pessimistic), plus the admissions.
    per_worker = use["per_worker_s"]
    admit_share = TARGET_RATE * admit_us / 1e6
    largest = max(0, int((1.0 - admit_share) * cap["per_s"] / per_worker))
    largest = min(largest, int(TARGET_RATE * CHUNK_SECONDS))  # past this a chunk is one request: a call each
    print()
    print(f"at {TARGET_RATE:,.0f} requests/s: admissions take {100 * admit_share:.0f}% of the actor's time; each "
          f"worker calls about {per_worker:.1f} times a second; {cap['per_s']:,.0f} calls/s answered")
    print(f"largest cluster one coordinator serves at {TARGET_RATE:,.0f} requests/s: {largest:,} workers "
          f"({largest * per_worker:,.0f} actor calls/s)")
    ok = largest >= TARGET_WORKERS
    print(f"{'PASS' if ok else 'FAIL'} ray_coordinator_cost: >= {TARGET_WORKERS} workers at {TARGET_RATE:,.0f} requests/s")


if __name__ == "__main__":
    main()
