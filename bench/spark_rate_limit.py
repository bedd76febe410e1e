"""The Spark runner against seed 003's hand-written pattern 4b, on one per-second-enforced rate limit.

The simulator (its own process) enforces ``--rpm`` requests per minute with a bucket of one second
(``ratelimit_burst_s=1``: how hosted APIs enforce a per-minute limit), answers after a lognormal
latency (median ``--latency-ms``) and sends 429s with Retry-After like OpenAI. One local Spark
(``local[P]``, ``P`` = ``--partitions``: every partition's task runs at once), the same ``--rows``
rows in ``--partitions`` partitions, three ways:

  hand-written  seed 003's pattern 4b as the post writes it: ``mapInPandas``, per partition an
                ``aiohttp`` session and an ``asyncio.Semaphore(--inflight)`` (32), and its pattern 4a's
                backoff loop around each call (6 attempts, ``sleep(min(2 ** i + random(), 60))`` on a
                429, errors as values). Each partition knows nothing of the others.
  spark runner  ``inferframe.spark.with_columns(sdf, label=prompt(col("body"), rpm=RPM, ...))``: one
                budget for every executor, leased from the job's service on the driver.
  column functions  ``sdf.withColumn("label", AF.prompt("body", rpm=RPM, ...))`` (``inferframe.spark.functions``):
                the same budget through the Spark session's one service, as a deterministic scalar Arrow UDF.

Measured: rows/s over the Spark action's wall time (the workers are started and warm before,
by a first small job of each kind), the server's answers per second from its first request to
its last answer as a % of the limit ("vs limit") and of what the server could have answered in
that time ("vs possible": one bucket at once, then the rate), the share of requests answered 429,
and failed rows (no answer: an error value for the hand-written code, a null with an error for
the runner).

Targets: the Spark runner and the column functions each at >= 1.0x the hand-written rows/s, < 2% 429s and 0 failed rows; and it
reaches >= 95% of what is possible (issue 34 items 3 and 9).

Usage:
    .venv/bin/python bench/spark_rate_limit.py                 # about 2 min on 2 CPUs
    .venv/bin/python bench/spark_rate_limit.py --rows 1200 --partitions 8
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from _sim_util import SimSampler, machine_line, table  # noqa: E402

MODEL = "gpt-5-mini"


def texts(n: int, run: str) -> list[str]:
    # Same length for every row, so every request costs the same; the run id keeps caches cold.
    return [f"Row {i:07d} {run}: the parcel arrived on time and works well. Sentiment?" for i in range(n)]


def hand_written(base_url: str, inflight: int, max_tokens: int):
    """Seed 003's pattern 4b (with pattern 4a's backoff loop), as a ``mapInPandas`` function."""

    def classify_partition(batches):
        import asyncio
        import random

        import aiohttp

        async def one(session, sem, prompt):
            """One in-flight HTTP call, gated by a semaphore; 429s retried with backoff, errors as values."""
            async with sem:
                for i in range(6):
                    try:
                        async with session.post(
                                base_url + "/chat/completions",
                                json={"model": MODEL, "messages": [{"role": "user", "content": prompt}],
                                      "max_tokens": max_tokens, "temperature": 0},
                                timeout=aiohttp.ClientTimeout(total=60)) as r:
                            if r.status == 429:
                                await asyncio.sleep(min((2 ** i) + random.random(), 60))
                                continue
                            data = await r.json()
                            return data["choices"][0]["message"]["content"]
                    except Exception as e:
                        return f"__ERROR__:{type(e).__name__}"
                return "__ERROR__:rate_limit_exhausted"

        async def run(prompts):
            sem = asyncio.Semaphore(inflight)
            headers = {"Authorization": "Bearer sk-bench"}
            async with aiohttp.ClientSession(headers=headers) as session:
                return await asyncio.gather(*[one(session, sem, p) for p in prompts])

        loop = asyncio.new_event_loop()
        for batch in batches:
            batch["label"] = loop.run_until_complete(run(batch["body"].tolist()))
            yield batch[["id", "label"]]

    return classify_partition


def run_variant(spark, kind: str, args: argparse.Namespace, rows: int) -> dict:
    import inferframe.spark
    from inferframe import col
    from inferframe.functions import prompt
    from inferframe.simulator import Simulator, SimulatorConfig

    run = uuid.uuid4().hex[:8]
    sdf = spark.createDataFrame(list(enumerate(texts(rows, run))), "id long, body string").repartition(args.partitions)
    sdf = sdf.localCheckpoint(eager=True)  # the rows are in place before the clock starts
    sim = Simulator.spawn(SimulatorConfig(rpm=args.rpm, ratelimit_burst_s=1.0, latency_dist="lognormal",
                                          latency_ms=args.latency_ms, latency_sigma=0.3, seed=1))
    sampler = SimSampler(sim.url, interval=0.1).start()
    try:
        if kind == "hand-written":
            out = sdf.mapInPandas(hand_written(sim.base_url, args.inflight, args.max_tokens),
                                  schema="id long, label string")
        elif kind == "column functions":
            from inferframe.spark import functions as AF

            out = sdf.withColumn("label", AF.prompt(
                "body", provider="openai", base_url=sim.base_url, api_key="sk-bench", model=MODEL,
                use_chat_completions=True, max_tokens=args.max_tokens, rpm=args.rpm)).select("id", "label")
        else:
            out = inferframe.spark.with_columns(sdf, label=prompt(
                col("body"), provider="openai", base_url=sim.base_url, api_key="sk-bench", model=MODEL,
                use_chat_completions=True, max_tokens=args.max_tokens, rpm=args.rpm))
        t0 = time.perf_counter()
        got = out.collect()
        wall = time.perf_counter() - t0
        time.sleep(0.3)  # a last sample after the last answer
        stats = sim.stats()
    finally:
        sampler.stop()
        sim.close()
    if kind == "hand-written":
        failed = sum(1 for r in got if r.label is None or r.label.startswith("__ERROR__"))
    elif kind == "column functions":
        failed = sum(1 for r in got if r.label is None)  # a failed row of an AI column is NULL
    else:
        failed = sum(1 for r in got if r.label is None or r.label_error is not None)
    n200 = stats["by_status"].get("200", 0)
    n429 = stats["by_status"].get("429", 0)
    total = stats["total_requests"]
    busy = [s for s in sampler.samples if s[4] > 0]
    first = busy[0][0] if busy else 0.0
    last = next((s[0] for s in busy if s[2] >= n200), busy[-1][0] if busy else 0.0)
    span = max(1e-6, last - first + 0.1)  # the sampler sees the first request up to one interval late
    rate = args.rpm / 60.0
    return {"kind": kind, "rows": len(got), "wall": wall, "rows_s": len(got) / wall, "span": span,
            "n200": n200, "n429": n429, "total": total, "pct429": 100 * n429 / total if total else 0.0,
            "failed": failed, "vs_limit": n200 / span / rate, "vs_possible": n200 / (rate + rate * span)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rpm", type=int, default=1200)
    ap.add_argument("--latency-ms", type=float, default=100, help="median of the simulator's lognormal latency")
    ap.add_argument("--rows", type=int, default=600, help="rows per run")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--inflight", type=int, default=32, help="the hand-written semaphore, per partition")
    ap.add_argument("--max-tokens", type=int, default=16)
    args = ap.parse_args()
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("INFERFRAME_PROGRESS", "0")
    os.environ.setdefault("INFERFRAME_CACHE", "off")  # every row is a request, in both runs
    import pyspark
    from pyspark.sql import SparkSession

    print(f"spark_rate_limit: {args.rows:,} rows in {args.partitions} partitions on local[{args.partitions}], "
          f"against a simulator enforcing {args.rpm:,} RPM per second (a bucket of 1 s), lognormal latency "
          f"median {args.latency_ms:g} ms; hand-written: {args.inflight} in flight per partition")
    print(f"  {machine_line()}, pyspark {pyspark.__version__}")
    spark = (SparkSession.builder.master(f"local[{args.partitions}]").appName("spark_rate_limit")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .config("spark.python.worker.reuse", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    try:
        for kind in ("hand-written", "spark runner", "column functions"):
            print(f"  warming up {kind} ...", flush=True)
            run_variant(spark, kind, args, 4 * args.partitions)  # workers started, modules imported
            print(f"  running {kind} ...", flush=True)
            results.append(run_variant(spark, kind, args, args.rows))
    finally:
        spark.stop()

    hand = results[0]
    print()
    print("targets: spark runner and column functions >= 1.0x hand-written rows/s, < 2% of requests answered 429, "
          "0 failed rows, >= 95% of what is possible")
    rows = []
    for r in results:
        rows.append([r["kind"], f"{r['rows']:,}", f"{r['failed']:,}", f"{r['total']:,}", f"{r['n429']:,}",
                     f"{r['pct429']:.1f}%", f"{r['wall']:.1f}", f"{r['rows_s']:.2f}", f"{100 * r['vs_limit']:.1f}%",
                     f"{100 * r['vs_possible']:.1f}%"])
    print(table(["", "rows", "failed", "requests", "429s", "429 %", "wall s", "rows/s", "vs limit", "vs possible"],
                rows, "lrrrrrrrrr"))
    print(f"  limit: {args.rpm / 60:.2f} req/s. vs limit: answers per second from the server's first request to its")
    print("  last answer / the limit; vs possible: answers / (one bucket + limit x that time).")
    ok = True
    for ours in results[1:]:
        ratio = ours["rows_s"] / hand["rows_s"]
        print(f"{ours['kind']} / hand-written rows/s: {ratio:.2f}x")
        ok = ok and ratio >= 1.0 and ours["pct429"] < 2 and ours["failed"] == 0 and ours["vs_possible"] >= 0.95
    print("PASS" if ok else "FAIL", "spark_rate_limit")


if __name__ == "__main__":
    main()
