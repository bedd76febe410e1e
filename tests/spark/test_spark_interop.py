"""Staying in Spark: from_spark/to_spark through Arrow, and inferframe.spark.with_columns adding AI columns
to a Spark DataFrame that stays a lazy Spark DataFrame."""

import uuid

import pytest

import inferframe as ifr
import inferframe.spark
from inferframe import col
from inferframe.functions import prompt
from inferframe.simulator import Simulator, SimulatorConfig


def test_from_spark_and_to_spark_round_trip_through_arrow(spark):
    sdf = spark.createDataFrame([(1, "a", 0.5), (2, None, None), (3, "c", 2.0)], "id long, s string, x double")
    df = ifr.from_spark(sdf).with_column("twice", col("id") * 2)
    assert df.to_pydict() == {"id": [1, 2, 3], "s": ["a", None, "c"], "x": [0.5, None, 2.0], "twice": [2, 4, 6]}
    back = df.where(col("id") > 1).to_spark(spark)
    assert [tuple(r) for r in back.orderBy("id").collect()] == [(2, None, None, 4), (3, "c", 2.0, 6)]
    with pytest.raises(ifr.ArgumentTypeError, match="pyspark.sql.DataFrame"):
        ifr.from_spark({"id": [1]})


def test_to_spark_on_the_spark_runner_is_the_plan_itself_run_lazily(spark, tmp_path):
    calls = tmp_path / "calls"
    calls.mkdir()

    @ifr.func(return_dtype=ifr.DataType.int64())
    def logged(x):
        (calls / f"{x}").write_text("")
        return x + 100

    ifr.set_runner_spark(spark)
    try:
        sdf = ifr.from_pydict({"x": [1, 2, 3]}).with_column("y", logged(col("x"))).to_spark()
        assert list(calls.iterdir()) == []  # nothing ran yet
        assert [r.y for r in sdf.collect()] == [101, 102, 103]
        assert sorted(p.name for p in calls.iterdir()) == ["1", "2", "3"]
    finally:
        ifr.set_runner_native()


def test_with_columns_adds_ai_columns_to_a_spark_dataframe_lazily(spark):
    run = uuid.uuid4().hex  # bodies no earlier run has cached
    bodies = [f"review {i} {run}" for i in range(40)]
    sdf = spark.createDataFrame([(i, b) for i, b in enumerate(bodies)], "id long, body string").repartition(2)
    with Simulator(SimulatorConfig()) as sim:
        out = inferframe.spark.with_columns(
            sdf, label=prompt(col("body"), provider="openai", base_url=sim.base_url, api_key="k-with-columns",
                              model="gpt-5-mini", use_chat_completions=True),
            n=col("body").str.length())
        from pyspark.sql import DataFrame as SparkFrame

        assert isinstance(out, SparkFrame)
        assert out.columns == ["id", "body", "label", "label_error", "n"]
        assert sim.stats()["total_requests"] == 0  # lazy: nothing sent before Spark runs it
        rows = sorted(out.collect(), key=lambda r: r.id)
        assert sim.stats()["total_requests"] == 40
    assert [r.body for r in rows] == bodies
    assert all(r.label and r.label_error is None for r in rows)
    assert [r.n for r in rows] == [len(b) for b in bodies]
    assert "k-with-columns" not in repr(spark.sparkContext.getConf().getAll())


def test_with_columns_refuses_what_is_not_an_expression(spark):
    with pytest.raises(ifr.ArgumentTypeError, match="not an inferframe expression"):
        inferframe.spark.with_columns(spark.range(2), label="positive")
