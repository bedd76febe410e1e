"""ifr.sql on the Ray runner: the corpus's CTE, subquery, AI-aggregate and top-k queries, on one cluster
(``sql_corpus.corpus.on_runner``: the local runner's answers and requests, and a Ray job for each)."""

from __future__ import annotations

import inferframe as ifr
from sql_corpus.corpus import on_runner, simulated


def test_corpus_cte_subquery_aggregate_and_topk_queries_on_ray(ray_cluster):
    with simulated() as sim:
        wrong = on_runner(ifr.set_runner_ray(), sim)
    assert not wrong, "\n".join(wrong)
