"""A budget is a cap: what a 2,000-row prompt() job spends against its ``max_cost`` (issue 41 item 2).

Target: spend / cap <= 1.0 for every cap ($0.001, $0.01, $0.1).

One 2,000-row ``prompt()`` job per cap against the project's OpenAI-compatible simulator (its own
process here, 20 ms latency, so many requests are in flight when the cap is reached), with
prices set (``ifr.set_prices``: $0.25 / $2.00 per million input / output tokens) and
``max_tokens=50``. Each job has a fresh response cache, so every cap starts from nothing.
Printed per cap: the dollars spent (``last_run()``), spend / cap, requests the simulator
answered and rows not run (error kind ``budget``).

    .venv/bin/python bench/budget_cap.py
    .venv/bin/python bench/budget_cap.py --rows 500 --caps 0.001,0.01
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _util import table  # noqa: E402

MODEL = "bench-priced"
PRICE = (0.25, 2.0)  # dollars per million input / output tokens (gpt-5-mini's)
MAX_TOKENS = 50


def one_job(sim, rows: int, cap: float) -> dict:
    """Run one capped job; its spend, requests and rows not run."""
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt
    from inferframe.observe import last_run

    before = sim.stats()["total_requests"]
    df = ifr.from_pydict({"q": [f"question number {i}: what is {i} times {i + 1}?" for i in range(rows)]})
    expr = prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="k", model=MODEL,
                  max_tokens=MAX_TOKENS, max_cost=cap, cache_dir=tempfile.mkdtemp(prefix="budget_cap_"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the end-of-job budget warning: the table says it
        out = df.with_column("a", expr).to_pydict()
    run = last_run()[0]
    not_run = sum(1 for e in out["a_error"] if e and e["kind"] == "budget")
    return {"cap": cap, "spent": run["cost"], "requests": sim.stats()["total_requests"] - before,
            "not_run": not_run}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--caps", default="0.001,0.01,0.1")
    ap.add_argument("--latency-ms", type=float, default=20.0)
    args = ap.parse_args()
    caps = [float(c) for c in args.caps.split(",")]

    import inferframe as ifr
    from inferframe.simulator import Simulator, SimulatorConfig

    ifr.set_prices({MODEL: PRICE})
    results = []
    with Simulator(SimulatorConfig(allow_unknown_models=True, latency_ms=args.latency_ms)) as sim:
        for cap in caps:
            results.append(one_job(sim, args.rows, cap))
    print(f"budget_cap: {args.rows:,} rows per job, price ${PRICE[0]}/${PRICE[1]} per 1M tokens, "
          f"max_tokens={MAX_TOKENS}, simulator latency {args.latency_ms:g} ms")
    print(table(["max_cost", "spent", "spend/cap", "requests", "rows not run"],
                [[f"${r['cap']:g}", f"${r['spent']:.6f}", f"{r['spent'] / r['cap']:.3f}", f"{r['requests']:,}",
                  f"{r['not_run']:,}"] for r in results]))
    ok = all(r["spent"] <= r["cap"] for r in results)
    print(f"target: spend/cap <= 1.0 for every cap -> {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
