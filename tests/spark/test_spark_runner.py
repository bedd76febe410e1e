"""The same plan on the Spark runner and on the local runner: equal results, one cache, atomic writes.

One local Spark (``local[2]``) per session (tests/spark/conftest.py); the OpenAI-compatible simulator
stands in for the paid API.
"""

import os
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig


@pytest.fixture
def on_spark(spark):
    """Run the test's DataFrames on Spark; back to the local runner afterwards."""
    ifr.set_runner_spark(spark)
    yield spark
    ifr.set_runner_native()


def both(df: ifr.DataFrame, spark) -> tuple[pa.Table, pa.Table]:
    ifr.set_runner_native()
    local = df.to_arrow()
    ifr.set_runner_spark(spark)
    return local, df.to_arrow()


@pytest.fixture
def data(tmp_path) -> str:
    """Two Parquet files, one of several row groups, with nulls."""
    root = tmp_path / "in"
    root.mkdir()
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


def test_a_plan_with_read_filter_func_prompt_sort_groupby_join_and_write_gives_the_local_result(on_spark, data, tmp_path):
    spark = on_spark
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
        assert run["rows_done"] == 1750 and run["cache_hits"] == 1750 - spark_.column("q").null_count
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
        out = df.sort("id").write_parquet(str(tmp_path / "out"))
        paths = out.to_pydict()["path"]
        assert [pathlib.Path(p).name for p in paths] == [f"part-{i:05d}.parquet" for i in range(len(paths))]
        written = ifr.read_parquet(str(tmp_path / "out")).to_arrow()
        ifr.set_runner_native()
        assert written.equals(df.sort("id").to_arrow())
        assert not [p for p in os.listdir(tmp_path / "out") if p.startswith(".")]


def test_relational_operators_match_the_local_runner(on_spark, data):
    spark = on_spark
    df = ifr.read_parquet(data)
    for ordered in (df.sort(["g", "q"], desc=[False, True]), df.limit(37),
                    df.into_batches(1000).with_column("s", scaled(col("id"))), df.repartition(3),
                    df.agg(col("id").sum().alias("t"), col("q").count().alias("n"), col("id").mean().alias("m")),
                    df.select("g", "q").distinct()):
        local, spark_ = both(ordered, spark)
        assert spark_.equals(local), (local.slice(0, 5), spark_.slice(0, 5))
    names = ifr.from_pydict({"g": [0, 1, 2, 9], "name": ["zero", "one", "two", "nine"], "id": [5, 6, 7, 8]})
    for unordered in [df.join(names, on="g", how=how) for how in ("left", "semi", "anti", "outer")]:
        local, spark_ = both(unordered, spark)
        keys = [(c, "ascending") for c in local.column_names]
        assert spark_.sort_by(keys).equals(local.sort_by(keys))


def test_a_failed_job_leaves_no_partial_output(on_spark, data, tmp_path):
    @ifr.func(return_dtype=ifr.DataType.int64())
    def breaks_late(x):
        if x == 3400:
            raise ValueError("row 3400 is bad")
        return x

    root = tmp_path / "out"
    root.mkdir()
    (root / "keep.txt").write_text("not ours")  # a directory with data: added to, never replaced
    with pytest.raises(ifr.UDFError, match="row 3400 is bad"):
        ifr.read_parquet(data).with_column("b", breaks_late(col("id"))).write_parquet(str(root), mode="append")
    assert sorted(os.listdir(root)) == ["keep.txt"]  # no part file, no temporary directory


def test_a_key_given_to_prompt_reaches_the_workers_but_not_the_plan_or_the_conf(on_spark):
    import pickle

    key = "sk-spark-test-7f3a9c"
    with Simulator(SimulatorConfig(require_api_key=key)) as sim:
        df = ifr.from_pydict({"q": ["a", "b", "c"]}).with_column(
            "a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=key, model="gpt-5-mini"))
        assert key.encode() not in pickle.dumps(df._optimized())
        out = df.to_arrow()
    assert out.column("a_error").null_count == 3 and out.column("a").null_count == 0
    assert key not in repr(on_spark.sparkContext.getConf().getAll())


def test_the_runner_is_chosen_by_environment():
    import subprocess
    import sys

    script = ("import inferframe as ifr\n"
              "from inferframe.runners import get_runner\n"
              "print(get_runner().name)\n")
    out = subprocess.run([sys.executable, "-c", script], env={**os.environ, "INFERFRAME_RUNNER": "spark"},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["spark"]
