"""sem_filter: F1, model calls, tokens and wall time of each plan against the naive plan (one call per row), in one run.

Data: examples/data/classify/imdb_heldout.csv (UCI "Sentiment Labelled Sentences", IMDB part, CC BY
4.0; see its README): film-review sentences with gold sentiment. The filter keeps
"{text} is a positive review of the film"; F1 is against the gold "positive" label.

Plans, on the same rows, response cache off:
  simulator  naive     sem_filter on the OpenAI simulator, whose planted answers are the gold labels
                       (constrained generation, one request per row)
  simulator  cascade   target_recall=0.9, delta=0.1, oracle_budget=--budget: MiniLM similarity first,
                       the simulator only on rows between the thresholds (the budget's rows included)
  simulator  limit 10  .limit(10) after the filter: requests until 10 rows pass
  embedded   naive     sem_filter offline on the embedded Gemma 3 270M (label scoring), --local-rows rows

Then the statistical guarantee, end to end: the cascade (target_recall=0.9, delta=0.1) run
--guarantee-runs times on the simulator, each with another seed of its oracle sample; the issue's
target is recall >= 0.9 (against the planted answers) in at least 90 of 100 runs.

Ratios are against the naive plan of the same backend, measured in this run.

Usage:
    .venv/bin/python bench/sem_filter.py [--rows 400] [--budget 100] [--local-rows 40] [--guarantee-runs 100]
"""

from __future__ import annotations

import argparse
import csv
import json
import pathlib
import time

import inferframe as ifr
from inferframe.observe.progress import last_run
from inferframe.simulator import Simulator, SimulatorConfig

DATA = pathlib.Path(__file__).resolve().parent.parent / "examples/data/classify/imdb_heldout.csv"
TEMPLATE = "{text} is a positive review of the film"


def f1(kept: set, gold: dict) -> float:
    tp = sum(1 for t in kept if gold[t])
    pos = sum(gold.values())
    return 0.0 if not tp else 2 * tp / (len(kept) + pos)


def run(df, **kw):
    t = time.perf_counter()
    out = df.sem_filter(TEMPLATE, **kw).to_pydict()["text"]
    wall = time.perf_counter() - t
    runs = last_run()
    requests = sum(r["requests"] for r in runs)
    tokens = sum(r["input_tokens"] + r["output_tokens"] for r in runs)
    return set(out), requests, tokens, wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400)
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--local-rows", type=int, default=40)
    ap.add_argument("--guarantee-runs", type=int, default=100, help="seeded cascade runs (0: none)")
    ap.add_argument("--guarantee-rows", type=int, default=200, help="rows of each seeded run (the first of --rows)")
    a = ap.parse_args()
    with DATA.open() as f:
        rows = [(r["text"], r["label"] == "positive") for r in csv.DictReader(f)]
    rows = list(dict(rows).items())[: a.rows]  # distinct texts
    gold = dict(rows)

    def planted(body):
        text = body["messages"][-1]["content"].split("Statement: ", 1)[1].rsplit(" is a positive review", 1)[0]
        return json.dumps({"label": "yes" if gold.get(text) else "no"})

    table = []
    df = ifr.from_pydict({"text": [t for t, _ in rows]})
    with Simulator(SimulatorConfig(responder=planted)) as sim:
        kw = dict(provider="openai", base_url=sim.base_url, api_key="sk-b", model="gpt-5-mini",
                  use_chat_completions=True, cache="off")
        base = run(df, **kw)
        table.append(("simulator", "naive", base, base))
        table.append(("simulator", f"cascade r>=0.9 budget {a.budget}",
                      run(df, target_recall=0.9, delta=0.1, oracle_budget=a.budget, **kw), base))
        t = time.perf_counter()
        out = df.sem_filter(TEMPLATE, **kw).limit(10).to_pydict()["text"]
        lim = (set(out), sum(r["requests"] for r in last_run()),
               sum(r["input_tokens"] + r["output_tokens"] for r in last_run()), time.perf_counter() - t)
        table.append(("simulator", "limit 10", lim, base))
        recalls, oracle = [], []
        part = dict(rows[: a.guarantee_rows])
        sub = ifr.from_pydict({"text": list(part)})
        for seed in range(a.guarantee_runs):
            kept, req, _, _ = run(sub, target_recall=0.9, delta=0.1, oracle_budget=a.budget, seed=seed, **kw)
            recalls.append(sum(1 for t in kept if part[t]) / sum(part.values()))
            oracle.append(req)
    local = ifr.from_pydict({"text": [t for t, _ in rows[: a.local_rows]]})
    local_gold = dict(rows[: a.local_rows])
    base_local = run(local, model="gemma-3-270m", cache="off")
    table.append(("embedded", "naive (label scoring)", base_local, base_local))

    print(f"{'backend':<10} {'plan':<28} {'rows':>5} {'F1':>5} {'calls':>6} {'x naive':>8} {'tokens':>7} "
          f"{'x naive':>8} {'wall s':>7} {'x naive':>8}")
    for backend, plan, (kept, req, tok, wall), (_, breq, btok, bwall) in table:
        g = local_gold if backend == "embedded" else gold
        n = len(g)
        score = "n/a" if plan.startswith("limit") else f"{f1(kept, g):.3f}"
        print(f"{backend:<10} {plan:<28} {n:>5} {score:>5} {req:>6} {req / breq:>8.3f} {tok:>7} "
              f"{tok / btok if btok else 0:>8.3f} {wall:>7.2f} {wall / bwall:>8.3f}")
    if recalls:
        met = sum(r >= 0.9 for r in recalls)
        target = 0.9 * len(recalls)
        print(f"\ncascade target_recall=0.9, delta=0.1, {len(recalls)} seeded runs on the simulator ({len(part)} rows, "
              f"oracle budget {a.budget}): "
              f"recall >= 0.9 in {met} of {len(recalls)} (target >= {target:g}) -> {'PASS' if met >= target else 'FAIL'}; "
              f"recall min {min(recalls):.3f}, mean {sum(recalls) / len(recalls):.3f}; "
              f"model requests per run mean {sum(oracle) / len(oracle):.1f} (naive: one per row)")


if __name__ == "__main__":
    main()
