"""AI functions as Spark columns (``inferframe.spark.functions``) and in Spark SQL (``inferframe.spark.register``):
Spark's optimizer plans around them, so a filter after the column and a dropped column cost no requests.
Request counts at the project's simulator; the totals of each Spark action in ``ifr.last_run()``."""

import sys
import time
import uuid

import pytest
from pyspark import cloudpickle
from pydantic import BaseModel

import inferframe as ifr
import inferframe.spark
from inferframe.simulator import FailRule, Simulator, SimulatorConfig
from inferframe.session import reset_provider
from inferframe.spark import functions as AF

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Review (below) travels to the Python workers


@pytest.fixture()
def sim():
    with Simulator(SimulatorConfig(fail_rules=(FailRule(match="BROKEN", status=400, message="bad row"),))) as s:
        yield s


def _hosted(sim) -> dict:
    return dict(provider="openai", base_url=sim.base_url, api_key="k-spark-columns", model="gpt-5-mini",
                use_chat_completions=True)


def _reviews(spark, n=200):
    run = uuid.uuid4().hex  # texts no earlier run has cached
    rows = [(i, i % 10, f"review {i} {run}") for i in range(n)]
    return spark.createDataFrame(rows, "id long, stars int, review string").repartition(2)


def test_a_filter_after_an_ai_column_sends_only_the_kept_rows(spark, sim):
    sdf = _reviews(spark)
    labeled = sdf.withColumn("label", AF.classify_text("review", ["positive", "negative"], **_hosted(sim)))
    kept = labeled.where("stars >= 9")  # 20 of 200 rows
    assert sim.stats()["total_requests"] == 0  # a Column: nothing runs before Spark does
    rows = kept.collect()
    assert len(rows) == 20 and {r.label for r in rows} <= {"positive", "negative"}
    assert sim.stats()["total_requests"] == 20
    totals = ifr.last_run()
    assert [t["requests"] for t in totals] == [20] and totals[0]["rows_done"] == 20
    # Once Spark runs no job, the action is a run in the history, as a job of the local runner is.
    for _ in range(40):
        stored = ifr.runs(limit=1).to_pylist()
        if stored and stored[0]["requests"] == 20 and stored[0]["models"] == "gpt-5-mini":
            break
        time.sleep(0.25)
    assert stored[0]["requests"] == 20 and stored[0]["status"] == "ok" and stored[0]["rows"] == 20, stored


def test_a_select_that_drops_the_ai_column_sends_nothing(spark, sim):
    sdf = _reviews(spark, 50)
    labeled = sdf.withColumn("label", AF.prompt("review", **_hosted(sim)))
    assert labeled.select("id", "stars").count() == 50
    assert sim.stats()["total_requests"] == 0
    assert len(labeled.where("id < 5").select("label").collect()) == 5  # count() alone would not need it
    assert sim.stats()["total_requests"] == 5


class Review(BaseModel):
    sentiment: str
    score: int


def test_structured_prompt_embedding_and_predicate_columns_have_spark_types(spark, sim):
    sdf = _reviews(spark, 6)
    out = (sdf.withColumn("r", AF.prompt("review", Review, **_hosted(sim)))
           .withColumn("v", AF.embed_text("review", provider="openai", base_url=sim.base_url, api_key="k-e",
                                          model="text-embedding-3-small"))
           .withColumn("about", AF.sem_predicate("{review} mentions a number", **_hosted(sim))))
    types = dict(out.dtypes)
    assert types["r"] == "struct<sentiment:string,score:bigint>"
    assert types["v"] == "array<float>" and types["about"] == "boolean"
    rows = out.collect()
    assert all(isinstance(r.r.score, int) and isinstance(r.r.sentiment, str) for r in rows)
    assert all(len(r.v) == 1536 for r in rows)


def test_a_failed_row_is_null_and_ai_error_says_why(spark, sim):
    sdf = spark.createDataFrame([(1, "fine text"), (2, "BROKEN text"), (3, "more text")], "id long, review string")
    ask = AF.prompt("review", **_hosted(sim), max_retries=0)
    # Sorted here: Spark's ORDER BY samples its input by running the plan once more, which asks again for the
    # failed row (failures are not cached) and can trip the same-error stop of the endpoint's breaker.
    rows = sorted(sdf.select("id", ask.alias("a"), AF.ai_error(ask).alias("e")).collect(), key=lambda r: r.id)
    assert rows[1].a is None and "bad row" in rows[1].e
    assert rows[0].a and rows[0].e is None and rows[2].e is None
    assert sum(t["errors"] for t in ifr.last_run()) >= 1


def test_ai_error_of_an_expression_over_an_ai_column_is_an_error(spark, sim):
    from pyspark.sql import functions as F

    sdf = _reviews(spark, 3)
    with pytest.raises(Exception, match="ai_error\\(\\) takes an AI function call itself"):
        sdf.select(AF.ai_error(F.upper(AF.prompt("review", **_hosted(sim))))).collect()


def test_bad_options_fail_when_the_column_is_made(spark, sim):
    with pytest.raises(ifr.PlanError):
        AF.classify_text("review", ["only-one"], **_hosted(sim))
    with pytest.raises(ifr.ArgumentTypeError, match="names no column"):
        AF.sem_predicate("is positive", **_hosted(sim))
    assert sim.stats()["total_requests"] == 0


def test_spark_sql_ai_classify_runs_after_the_where_and_counts_in_last_run(spark, sim):
    _reviews(spark).createOrReplaceTempView("reviews")
    ifr.set_provider("openai", base_url=sim.base_url, api_key="k-spark-sql")
    try:
        inferframe.spark.register(spark)
        rows = spark.sql("SELECT id, ai_classify(review, array('positive', 'negative'), model => 'gpt-5-mini', "
                         "use_chat_completions => true) AS label FROM reviews WHERE stars >= 9").collect()
    finally:
        reset_provider()
    assert len(rows) == 20 and {r.label for r in rows} <= {"positive", "negative"}
    assert sim.stats()["total_requests"] == 20
    assert sum(t["requests"] for t in ifr.last_run()) == 20


def test_spark_sql_functions_give_typed_values_and_errors(spark, sim):
    spark.createDataFrame([(1, "fine text"), (2, "BROKEN text")], "id long, review string") \
        .createOrReplaceTempView("notes")
    ifr.set_provider("openai", base_url=sim.base_url, api_key="k-spark-sql")
    try:
        inferframe.spark.register(spark, model="gpt-5-mini", max_retries=0)
        failed = sorted(spark.sql("SELECT id, ai_complete(review) AS a, ai_error(ai_complete(review)) AS e "
                                  "FROM notes").collect(), key=lambda r: r.id)  # not ORDER BY: see above
        typed = spark.sql(
            "SELECT ai_score(review, 'is it fine') AS s, ai_filter(review) AS f, "
            "from_json(ai_extract(review, 'name, age int'), 'name STRING, age INT') AS x, "
            "ai_similarity(review, 'fine words', model => 'text-embedding-3-small') AS sim "
            "FROM notes WHERE id = 1").first()
    finally:
        reset_provider()
    assert failed[0].a and failed[0].e is None
    assert failed[1].a is None and "bad row" in failed[1].e
    assert typed.s in range(1, 6) and isinstance(typed.f, bool) and isinstance(typed.x.age, int)
    assert -1.0 <= typed.sim <= 1.0


def test_spark_sql_stops_before_any_request_on_bad_arguments(spark, sim):
    _reviews(spark, 20).createOrReplaceTempView("few")
    inferframe.spark.register(spark)
    kw = f"model => 'gpt-5-mini', provider => 'openai', base_url => '{sim.base_url}'"
    with pytest.raises(Exception, match="labels must be a list of two or more"):
        spark.sql(f"SELECT ai_classify(review, array('positive'), {kw}) FROM few").collect()
    with pytest.raises(Exception, match="is not available in Spark SQL"):
        spark.sql("SELECT stars, ai_agg(review, 'sum it up') FROM few GROUP BY stars").collect()
    with pytest.raises(ifr.PlanError, match="register\\(\\)"):
        inferframe.spark.register(spark, temperature_typo=1)
    assert sim.stats()["total_requests"] == 0
