"""A budget is a cap on Ray too: workers in their own processes, one job's coordinator, one max_cost (issue 41 item 2).

Each worker actor runs the job's runtime (``InferenceRuntime``) on the limits the coordinator hands
it, as the runner's AI actors do, against the simulator with a price set.
"""

from __future__ import annotations

import asyncio
import sys
import time

import pytest
import ray

from inferframe.runners.ray_limits import start_coordinator
from inferframe.runtime.config import RuntimeConfig

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

KEY = "openai:http://127.0.0.1/v1|budget-model"
PRICE = (0.25, 2.0)


@ray.remote(num_cpus=0)
class Worker:
    async def prompts(self, coordinator, base_url: str, n: int, cap: float, start_at: float) -> dict:
        from inferframe.observe.stats import RunStats
        from inferframe.providers.interface import Request
        from inferframe.providers.openai import OpenAIProvider
        from inferframe.providers.spec import ProviderSpec
        from inferframe.runtime import InferenceRuntime

        config = RuntimeConfig(cache_policy="off", max_cost=cap, price=PRICE)
        stats = RunStats(label="prompt[budget-model]")
        runtime = InferenceRuntime(OpenAIProvider(ProviderSpec("openai"), base_url=base_url, api_key="sk-test"),
                                   config, model="budget-model", stats=stats, limits=coordinator.limits(KEY, config))
        requests = [Request("chat", {"model": "budget-model", "max_tokens": 50,
                                     "messages": [{"role": "user", "content": f"question {i} of this worker"}]},
                            est_tokens=70, max_output_tokens=50) for i in range(n)]
        await asyncio.sleep(max(0.0, start_at - time.time()))
        results = await runtime.run_many(requests)
        await runtime.aclose()
        return {"cost": stats.cost, "answered": sum(r.value is not None for r in results),
                "not_run": sum(r.error is not None and r.error.kind == "budget" for r in results)}


@pytest.fixture
def coordinator(ray_cluster):
    coord = start_coordinator()
    yield coord
    coord.close()


def test_promise_a_budget_is_a_cap_across_ray_workers(ray_cluster, coordinator):
    from inferframe.simulator import Simulator, SimulatorConfig

    cap = 0.002
    workers = [Worker.remote() for _ in range(3)]
    try:
        with Simulator.spawn(SimulatorConfig(allow_unknown_models=True, latency_ms=20)) as sim:
            start_at = time.time() + 1.0
            out = ray.get([w.prompts.remote(coordinator, sim.base_url, 200, cap, start_at) for w in workers])
    finally:
        for w in workers:
            ray.kill(w)
    spent = sum(o["cost"] for o in out)
    assert sum(o["answered"] for o in out) > 0 and sum(o["not_run"] for o in out) > 0
    assert spent <= cap, out  # one cap for the job, not one per worker (before: about 3x the cap)


def test_promise_hitting_the_cap_on_ray_gives_one_budget_exceeded_warning(ray_cluster, tmp_path):
    import warnings

    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt
    from inferframe.observe import last_run
    from inferframe.simulator import Simulator, SimulatorConfig

    cap = 0.001
    ifr.set_prices({"budget-model": PRICE})
    ifr.set_runner_ray()
    try:
        with Simulator(SimulatorConfig(allow_unknown_models=True, latency_ms=20)) as sim:
            df = ifr.from_pydict({"q": [f"question number {i}: what is {i} times {i + 1}?" for i in range(600)]})
            df = df.with_column("a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="k",
                                            model="budget-model", max_tokens=50, max_cost=cap,
                                            cache_dir=str(tmp_path / "cache")))
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                out = df.to_pydict()
    finally:
        ifr.set_runner_native()
    budget = [w for w in seen if w.category is ifr.BudgetExceededWarning]
    not_run = sum(1 for e in out["a_error"] if e and e["kind"] == "budget")
    assert 0 < last_run()[0]["cost"] <= cap and not_run > 0
    assert len(budget) == 1 and f"{not_run:,} of 600 rows were not run" in str(budget[0].message)
