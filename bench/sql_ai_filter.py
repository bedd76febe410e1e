"""SQL ai_filter + LIMIT 10 over 10,000 rows on the simulator: the calls sent beside the naive plan's, in one run.

The query:

    SELECT id, review FROM reviews WHERE stars >= 2 AND ai_filter(review, 'The review is positive.', ...) LIMIT 10

over --rows rows (default 10,000; one review in --every (default 5) is positive, stars 1 to 5). Plans,
on the same rows and simulator, response cache off:

  inferframe        ifr.sql as shipped: the cheap part (stars >= 2) first, then the ai_filter as the
                    sem_filter plan that stops sending once 10 rows passed (the LIMIT pushed into it)
  duckdb limit      the same query with the LIMIT left to DuckDB alone (sql.planner.plan(push=False)): the AI
                    column is computed batch by batch ahead of DuckDB, which stops reading at 10 rows
  naive             ai_filter on every row (what a row-by-row UDF does before the LIMIT can apply):
                    SELECT ..., ai_filter(...) AS ok FROM reviews, every row asked

Each line prints the calls the simulator answered, the rows returned and the wall time; ratios are
against the naive plan, measured in this run.

Then two queries of the shapes analysts write (issue 45), each against scoring every row once:

  cte               WITH labeled AS (SELECT id, stars, ai_classify(review, ['yes', 'no']) AS label FROM reviews)
                    SELECT label, count(*) FROM labeled WHERE stars >= 4 GROUP BY label: the outer WHERE
                    reaches the CTE's source, so only the 4- and 5-star rows are asked
  order by score    SELECT id FROM reviews ORDER BY ai_score(review, ...) DESC, id LIMIT 10: the top-k plan
                    (sql.topk), each distinct review asked once; every review here differs, so every row
  order by score,   the same over ``summary``, a short text that repeats (100 distinct of the rows, as stock
  repeated texts    replies do): the top-k plan asks each distinct text once

Each shape's line also prints the calls EXPLAIN says the plan sends (nothing sent) beside the calls it sent.

Usage:
    .venv/bin/python bench/sql_ai_filter.py [--rows 10000] [--every 5] [--latency-ms 20]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import inferframe as ifr
from inferframe.dataframe.interop import source_frame
from inferframe.sql.source import _source
from inferframe.sql.planner import plan
from inferframe.simulator import Simulator, SimulatorConfig


def planted(body):
    text = body["messages"][-1]["content"]
    if "How well" in text:  # ai_score: 5 for a positive review, 1 otherwise
        return json.dumps({"label": "5" if "loved" in text else "1"})
    return json.dumps({"label": "yes" if "loved" in text else "no"})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--latency-ms", type=float, default=20)
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    os.environ.setdefault("INFERFRAME_PROGRESS", "0")
    n = args.rows
    reviews = ifr.from_pydict({
        "id": list(range(n)),
        "stars": [i % 5 + 1 for i in range(n)],
        "review": [("I loved it" if i % args.every == 3 else "I did not like it") + f", film {i}" for i in range(n)],
        "summary": [("I loved it" if i % args.every == 3 else "I did not like it") + f", batch {i % 100}"
                    for i in range(n)],
    })
    with Simulator(SimulatorConfig(responder=planted, latency_ms=args.latency_ms)) as sim:
        opts = (f"provider => 'openai', base_url => '{sim.base_url}', model => 'gpt-5-mini', "
                "use_chat_completions => true, cache => 'off'")
        ai = f"ai_filter(review, 'The review is positive.', {opts})"
        query = f"SELECT id, review FROM reviews WHERE stars >= 2 AND {ai} LIMIT 10"

        def frame_of(text, frames):
            return ifr.sql(text, **frames)

        def duckdb_limit():
            planned = plan(query, {"reviews": reviews}, frame_of, push=False)
            return source_frame(_source(planned.query, planned.frames)).to_pydict()

        runs = [
            ("inferframe", lambda: ifr.sql(query, reviews=reviews).to_pydict()),
            ("duckdb limit", duckdb_limit),
            ("naive", lambda: ifr.sql(f"SELECT id, review, {ai} AS ok FROM reviews", reviews=reviews).to_pydict()),
        ]
        results = []
        for name, fn in runs:
            before = sim.stats()["total_requests"]
            t = time.perf_counter()
            out = fn()
            wall = time.perf_counter() - t
            calls = sim.stats()["total_requests"] - before
            rows = len(out["id"]) if name != "naive" else sum(1 for ok in out["ok"] if ok)
            results.append((name, calls, rows, wall))
        shapes = _shapes(sim, opts, reviews)
    naive = results[-1][1]
    print(f"SQL ai_filter + LIMIT 10 over {n:,} rows (1 in {args.every} positive), simulator, cache off")
    print(f"{'plan':<14}{'calls sent':>12}{'rows':>8}{'wall s':>9}{'calls vs naive':>17}")
    for name, calls, rows, wall in results:
        print(f"{name:<14}{calls:>12,}{rows:>8,}{wall:>9.2f}{calls / naive:>16.4f}x")
    print(f"naive / inferframe: {naive / max(results[0][1], 1):.1f}x fewer calls")
    print()
    print(f"Analysts' shapes over the same {n:,} rows, against scoring every row once ({n:,} calls)")
    print(f"{'query':<32}{'EXPLAIN says':>13}{'calls sent':>12}{'rows':>8}{'wall s':>9}{'calls vs every row':>21}")
    for name, said, calls, rows, wall in shapes:
        print(f"{name:<32}{said:>13,}{calls:>12,}{rows:>8,}{wall:>9.2f}{calls / n:>20.4f}x")


def _shapes(sim, opts, reviews):
    """The CTE query and the two ORDER BY ai_score LIMIT 10 queries: (name, calls EXPLAIN says, calls, rows, wall s)."""
    cte = (f"WITH labeled AS (SELECT id, stars, ai_classify(review, ['yes', 'no'], {opts}) AS label FROM reviews) "
           "SELECT label, count(*) AS n FROM labeled WHERE stars >= 4 GROUP BY label")
    topk = "SELECT id FROM reviews ORDER BY ai_score({col}, 'The review is positive.', {opts}) DESC, id LIMIT 10"
    out = []
    for name, query in (("cte", cte), ("order by score", topk.format(col="review", opts=opts)),
                        ("order by score, repeated texts", topk.format(col="summary", opts=opts))):
        explained = ifr.sql("EXPLAIN " + query, reviews=reviews).to_pydict()["explain"]
        said = int(explained[explained.index(next(line for line in explained if "whole query" in line)) + 1]
                   .split()[0].replace(",", ""))  # "  4,000 calls, ... input tokens": the whole query's estimate
        before = sim.stats()["total_requests"]
        t = time.perf_counter()
        rows = ifr.sql(query, reviews=reviews).to_pydict()
        out.append((name, said, sim.stats()["total_requests"] - before, len(next(iter(rows.values()))),
                    time.perf_counter() - t))
    return out


if __name__ == "__main__":
    main()
