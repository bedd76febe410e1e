"""Requests sent for an AI column followed by a filter that keeps 10% of the rows, three ways, on local Spark.

``--rows`` rows (10,000) in 4 partitions, one simulator (its own process, no latency), the same
``withColumn(<AI column>).where("bucket = 0")`` where ``bucket = id % 10``:

  AF.prompt        ``sdf.withColumn("a", AF.prompt("body", ...)).where(...)``: a scalar Arrow UDF, which
                   Spark's optimizer moves the filter below (inferframe.spark.functions);
  with_columns     ``inferframe.spark.with_columns(sdf, a=prompt(col("body"), ...)).where(...)``: a
                   ``mapInArrow`` stage, opaque to the optimizer;
  naive            what a plan that asks before it filters sends: every row.

Printed: the requests each sent (the simulator's count), the rows kept, and the requests as a share of
the naive count. Target: AF.prompt sends only the kept rows' requests (10%).

Usage:
    .venv/bin/python bench/spark_pushdown.py              # about a minute on 2 CPUs
    .venv/bin/python bench/spark_pushdown.py --rows 2000
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from _sim_util import machine_line, table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()
    os.environ.setdefault("INFERFRAME_PROGRESS", "0")

    from pyspark.sql import SparkSession

    import inferframe.spark
    from inferframe import col
    from inferframe.functions import prompt
    from inferframe.simulator import Simulator, SimulatorConfig
    from inferframe.spark import functions as AF

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    sim = Simulator.spawn(SimulatorConfig())
    options = dict(provider="openai", base_url=sim.base_url, api_key="sk-bench", model="gpt-5-mini",
                   use_chat_completions=True, max_tokens=8)
    results = []
    try:
        for kind in ("AF.prompt", "with_columns"):
            run = uuid.uuid4().hex[:8]  # cold cache for each way
            sdf = spark.createDataFrame([(i, i % 10, f"row {i} {run}: how was it?") for i in range(args.rows)],
                                        "id long, bucket int, body string").repartition(4)
            before = sim.stats()["total_requests"]
            if kind == "AF.prompt":
                out = sdf.withColumn("a", AF.prompt("body", **options))
            else:
                out = inferframe.spark.with_columns(sdf, a=prompt(col("body"), **options))
            kept = len(out.where("bucket = 0").select("id", "a").collect())
            results.append((kind, sim.stats()["total_requests"] - before, kept))
    finally:
        sim.close()
        spark.stop()
    naive = args.rows
    rows = [[kind, f"{sent:,}", f"{kept:,}", f"{sent / naive:.1%}"] for kind, sent, kept in results]
    rows.append(["naive", f"{naive:,}", f"{results[0][2]:,}", "100.0%"])
    print(machine_line())
    print(f"{args.rows:,} rows, a filter keeping 10% after the AI column")
    print(table(["way", "requests", "rows kept", "vs naive"], rows))


if __name__ == "__main__":
    main()
