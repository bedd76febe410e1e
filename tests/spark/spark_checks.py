"""Checks that run on any Spark session: the local ``local[2,4]`` of the test session, and a standalone cluster.

Each takes a SparkSession and asserts; the tests call them on the local session (tests/spark/test_spark_runner.py,
test_spark_limits.py), and a script a user would write calls them on the standalone cluster
(tests/spark/test_spark_cluster.py), in its own driver process.

Example:
    >>> check_shared_limit(spark)   # doctest: +SKIP
"""

from __future__ import annotations

import os
import pathlib
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig


def write_data(root: pathlib.Path) -> str:
    """Two Parquet files under ``root``, one of several row groups, with nulls; the directory."""
    root.mkdir(parents=True)
    n = 3000
    pq.write_table(pa.table({"id": list(range(n)), "g": [i % 7 for i in range(n)],
                             "q": [f"question {i % 400}" if i % 11 else None for i in range(n)]}),
                   root / "a.parquet", row_group_size=500)
    pq.write_table(pa.table({"id": list(range(n, n + 500)), "g": [i % 3 for i in range(500)],
                             "q": [f"question {i}" for i in range(500)]}), root / "b.parquet")
    return str(root)


@ifr.func(return_dtype=ifr.DataType.int64())
def scaled(x):
    return None if x is None else 3 * x + 1


def both(df: ifr.DataFrame, spark) -> tuple[pa.Table, pa.Table]:
    """``df`` run by the local runner, then by the Spark runner on ``spark`` (which stays the runner)."""
    ifr.set_runner_native()
    local = df.to_arrow()
    ifr.set_runner_spark(spark)
    return local, df.to_arrow()


def check_a_plan_matches_local(spark, data: str, out_dir: pathlib.Path) -> None:
    """Read, filter, ``@func``, ``prompt()``, sort, groupby, join and write: the Spark runner's result is the local one."""
    with Simulator(SimulatorConfig()) as sim:
        df = (ifr.read_parquet(data)
              .where(col("id") % 2 == 0)
              .with_column("s", scaled(col("id")))
              .with_column("a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="k",
                                       model="gpt-5-mini", use_chat_completions=True)))
        local, spark_ = both(df.sort("s", desc=True), spark)
        assert spark_.num_rows == local.num_rows == 1750
        assert spark_.equals(local)  # row for row, order included
        run = last_run()[0]  # the Spark run's counters, merged on the driver from every Python worker
        assert run["rows_done"] == 1750 and run["cache_hits"] == 1750 - spark_.column("q").null_count, run
        assert spark_.column("a_error").null_count == spark_.num_rows
        sent = sim.stats()["total_requests"]
        assert sent <= 400 + 250  # distinct questions only: the Spark run found the local run's answers

        grouped = df.groupby("g").agg(col("s").sum().alias("total"), col("a").count().alias("answered"),
                                      col("id").mean().alias("mean_id"))
        local_g, spark_g = both(grouped, spark)
        assert spark_g.equals(local_g)  # groups in key order, as locally

        names = ifr.from_pydict({"g": [0, 1, 2, 9], "name": ["zero", "one", "two", "nine"], "id": [5, 6, 7, 8]})
        # Without a_error: the local runner's join of a struct column of nulls aborts in Acero (reported).
        joined = df.select("id", "g", "q", "s", "a").join(names, on="g", how="inner")
        local_j, spark_j = both(joined, spark)
        keys = [(c, "ascending") for c in local_j.column_names]
        assert spark_j.sort_by(keys).equals(local_j.sort_by(keys))
        assert sim.stats()["total_requests"] == sent  # every answer came from the one cache

        ifr.set_runner_spark(spark)
        out = df.sort("id").write_parquet(str(out_dir / "out"))
        paths = out.to_pydict()["path"]
        assert [pathlib.Path(p).name for p in paths] == [f"part-{i:05d}.parquet" for i in range(len(paths))]
        written = ifr.read_parquet(str(out_dir / "out")).to_arrow()
        ifr.set_runner_native()
        assert written.equals(df.sort("id").to_arrow())
        assert not [p for p in os.listdir(out_dir / "out") if p.startswith(".")]


def inferframe_with_columns(sdf, sim):
    """``sdf`` with an AI column ``a`` over ``body``, asked of the simulator ``sim``."""
    import inferframe.spark

    return inferframe.spark.with_columns(sdf, a=prompt(col("body"), provider="openai", base_url=sim.base_url,
                                                       api_key="k", model="gpt-5-mini", use_chat_completions=True))


def check_shared_limit(spark) -> None:
    """Four partitions on two Python workers at once keep to the server's 1,200 RPM: one budget, not one each."""
    # 1,200 RPM with a one-second bucket, learned from the headers (not told to the client). Unshared budgets
    # each learn 20/s and send twice that. (At 600 RPM the 120 rows took 12 s of waiting, twice per suite run.)
    run = uuid.uuid4().hex
    sdf = spark.createDataFrame([(i, f"q {i} {run}") for i in range(120)], "id long, body string").repartition(4)
    with Simulator.spawn(SimulatorConfig(rpm=1200, ratelimit_burst_s=1.0, latency_ms=50)) as sim:
        out = inferframe_with_columns(sdf, sim)
        rows = out.collect()
        stats = sim.stats()
    assert len(rows) == 120 and all(r.a is not None for r in rows)
    assert stats["by_status"].get("429", 0) <= 3, stats["by_status"]
