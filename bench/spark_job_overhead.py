"""The fixed cost of a small job on the Spark runner: what a SQL query's few-row steps pay, several times a query.

Two figures, from one run on local Spark:

* **The job service's first call.** Each Python worker reaches the driver's job service once per job
  (``runners.spark_service``: a TCP connection, a two-way HMAC handshake, the call). Timed for fresh links
  the way inferframe connects (``TCP_NODELAY``) and the way ``multiprocessing.connection.Client`` does
  (Nagle's algorithm on: the handshake's back-to-back small messages wait for the peer's delayed ACK).
* **A job's wall time** for 8 in-memory rows: a projection alone (no user code: run on the driver, no Spark
  job), the same with an identity ``@func`` (a Spark job), and with a ``prompt()`` column against the
  simulator (no latency). Medians of ``--jobs`` jobs each, after one warm-up job of each kind.

Usage:
    .venv/bin/python bench/spark_job_overhead.py            # about 30 s on 2 CPUs
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import time
from multiprocessing.connection import Client
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from _sim_util import machine_line, table  # noqa: E402


def first_calls(n: int) -> tuple[float, float]:
    """Median ms of a fresh link's first call: inferframe's link, then multiprocessing's Client on the same service."""
    from inferframe.runners.spark_service import JobService

    service = JobService(lambda: {"KEY": "handle"})
    link = service.link()
    ours, plain = [], []
    try:
        for _ in range(n):
            fresh = pickle.loads(pickle.dumps(link))
            started = time.perf_counter()
            fresh.call("env")
            ours.append(time.perf_counter() - started)
            started = time.perf_counter()
            with Client(link.address, authkey=link.token) as conn:
                conn.send(("env", ()))
                conn.recv()
            plain.append(time.perf_counter() - started)
    finally:
        service.close()
    return statistics.median(ours) * 1e3, statistics.median(plain) * 1e3


def job_seconds(jobs: int) -> dict[str, float]:
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt
    from inferframe.simulator import Simulator, SimulatorConfig
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    ifr.set_runner_spark(spark)
    same = ifr.func(lambda q: q, return_dtype=ifr.DataType.string())
    out: dict[str, list[float]] = {"projection (driver)": [], "@func": [], "prompt()": []}
    with Simulator(SimulatorConfig()) as sim:
        ifr.set_provider("openai", base_url=sim.base_url, api_key="k")
        for i in range(jobs + 1):
            for kind in out:
                df = ifr.from_pydict({"q": [f"job {i} row {j}" for j in range(8)]})
                column = {"projection (driver)": col("q").str.length(), "@func": same(col("q")),
                          "prompt()": prompt(col("q"), model="gpt-5-mini")}[kind]
                started = time.perf_counter()
                assert len(df.with_column("a", column).to_pydict()["a"]) == 8
                if i:  # the first round warms the session and its Python workers
                    out[kind].append(time.perf_counter() - started)
    spark.stop()
    return {kind: statistics.median(seconds) for kind, seconds in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--links", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("INFERFRAME_PROGRESS", "0")
    print(machine_line())
    ours, plain = first_calls(args.links)
    print(table(["job service, a fresh link's first call", "median ms"],
                [["inferframe (TCP_NODELAY)", f"{ours:.2f}"], ["multiprocessing Client (Nagle)", f"{plain:.2f}"]], "lr"))
    print(f"  Nagle's wait / ours: {plain / ours:.1f}x")
    print()
    seconds = job_seconds(args.jobs)
    print(table(["8 rows on local[2]", "median s a job"], [[k, f"{v:.3f}"] for k, v in seconds.items()], "lr"))


if __name__ == "__main__":
    main()
