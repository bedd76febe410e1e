"""ifr.sql on the Spark runner, as tests/ray/test_sql_ray.py on Ray: the same corpus queries, answers and requests,
on one Spark session, each query's AI parts run as a Spark job."""

from __future__ import annotations

import inferframe as ifr
from sql_corpus.corpus import on_runner, simulated


def test_corpus_cte_subquery_aggregate_and_topk_queries_on_spark(spark):
    with simulated() as sim:
        wrong = on_runner(ifr.set_runner_spark(spark), sim)
    assert not wrong, "\n".join(wrong)
