"""The same plan on the Spark runner and on the local runner: equal results, one cache, atomic writes.

One local Spark (``local[2,4]``) per session (tests/spark/conftest.py); the OpenAI-compatible simulator
stands in for the paid API. The first check (tests/spark/spark_checks.py) runs on a standalone cluster too.
"""

import os

import pytest
from spark_checks import both, check_a_plan_matches_local, scaled, write_data

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.simulator import Simulator, SimulatorConfig


@pytest.fixture
def on_spark(spark):
    """Run the test's DataFrames on Spark; back to the local runner afterwards."""
    ifr.set_runner_spark(spark)
    yield spark
    ifr.set_runner_native()


@pytest.fixture
def data(tmp_path) -> str:
    """Two Parquet files, one of several row groups, with nulls."""
    return write_data(tmp_path / "in")


def test_a_plan_with_read_filter_func_prompt_sort_groupby_join_and_write_gives_the_local_result(on_spark, data, tmp_path):
    # The same check runs on a standalone cluster too (tests/spark/test_spark_cluster.py).
    check_a_plan_matches_local(on_spark, data, tmp_path)


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


def answer_and_spark_jobs(spark, df, group: str) -> tuple[dict, int]:
    """``df``'s answer on the Spark runner, and the Spark jobs it ran (counted in a job group of its own)."""
    spark.sparkContext.setJobGroup(group, group)
    try:
        out = df.to_pydict()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return out, len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def test_a_plan_with_no_user_code_over_rows_on_the_driver_runs_no_spark_job(on_spark, data):
    # A SQL subquery over an in-memory table, a projection of gathered rows: a Spark job would only ship them there
    # and back (0.15-0.3 s a job). A UDF or AI call, or files the executors read, still make Spark jobs.
    names = ifr.from_pydict({"g": [0, 1, 2, 9, None], "name": ["zero", "one", "two", "nine", "none"]})
    same = ifr.func(lambda g: g, return_dtype=ifr.DataType.int64())
    plans = {"driver": names.where(col("g") > 0).sort("g", desc=True).join(names, on="g").select("name"),
             "udf": names.with_column("g", same(col("g"))).where(col("g") > 0),
             "files": ifr.read_parquet(data).where(col("g") > 0).select("g")}
    jobs = {}
    for name, df in plans.items():
        out, jobs[name] = answer_and_spark_jobs(on_spark, df, f"ifr-driver-side-{name}")
        ifr.set_runner_native()
        assert out == df.to_pydict(), name
        ifr.set_runner_spark(on_spark)
    assert jobs["driver"] == 0 and jobs["udf"] >= 1 and jobs["files"] >= 1, jobs


def test_a_sort_and_a_distinct_of_few_known_rows_run_without_spark_s_sampling_job(on_spark, spark, monkeypatch):
    from inferframe.runners import spark_runner

    rows = {"k": [3, None, 1, 3, 2, 1, None], "v": list(range(7))}
    same = ifr.func(lambda v: v, return_dtype=ifr.DataType.int64())  # work for Spark: without it the driver runs the plan
    source = lambda: ifr.from_pydict(rows).with_column("v", same(col("v")))  # noqa: E731
    plans = {"sort": lambda: source().sort("k", desc=True), "distinct": lambda: source().distinct("k")}

    ifr.set_runner_native()
    local = {name: plan().to_pydict() for name, plan in plans.items()}
    ifr.set_runner_spark(spark)
    for name in plans:
        small, small_jobs = answer_and_spark_jobs(spark, plans[name](), f"ifr-small-{name}")
        monkeypatch.setattr(spark_runner, "SMALL_SORT_ROWS", 0)  # as for an input of unknown or many rows
        global_, global_jobs = answer_and_spark_jobs(spark, plans[name](), f"ifr-global-{name}")
        monkeypatch.undo()
        assert small == global_ == local[name]  # nulls placed and ties in input order, as locally
        assert small_jobs < global_jobs, name  # no range-bounds sampling job


def test_a_file_read_and_the_per_row_steps_after_it_are_one_pass_to_python(on_spark, data, capsys):
    # Each mapInArrow is a pass of every partition's rows to a Python worker and back: the read, the filter, the
    # @func and the projection were four; the rows and their answers are those of the local runner.
    df = ifr.read_parquet(data).where(col("id") % 2 == 0).with_column("s", scaled(col("id"))).select("id", "s")
    df.to_spark(on_spark).explain()
    plan = capsys.readouterr().out
    assert plan.count("MapInArrow") == 1, plan
    local, spark_ = both(df, on_spark)
    assert spark_.equals(local)
