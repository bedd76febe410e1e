"""ifr.sql on the Spark runner: a CTE, a subquery and an AI-aggregate query of the corpus give the local runner's answers
and requests (tests/sql_corpus/answers.json, which test_sql_corpus checks on the local runner), their AI parts run
as Spark jobs through the shared limits and cache."""

from __future__ import annotations

import pytest

import inferframe as ifr
from inferframe.session import reset_provider
from inferframe.simulator import Simulator, SimulatorConfig
from sql_corpus.corpus import ON_CLUSTERS, answers, run, shaped, tables
from sql_corpus.responder import respond

NESTED = shaped(*ON_CLUSTERS)


@pytest.fixture(scope="module")
def on_spark(spark):
    """The simulator, the corpus's tables, and the Spark runner with a count of the jobs it ran."""
    jobs = []
    with Simulator(SimulatorConfig(responder=respond)) as sim:
        ifr.set_provider("openai", base_url=sim.base_url, api_key="sk-corpus")
        ifr.set_cache("off")
        runner = ifr.set_runner_spark(spark)
        execute = runner.execute
        runner.execute = lambda *a, **kw: (jobs.append(1), execute(*a, **kw))[1]
        try:
            yield sim, tables(), jobs
        finally:
            ifr.set_runner_native()
            reset_provider()
            ifr.set_cache("read_write")


@pytest.mark.parametrize("query", NESTED, ids=[q.name for q in NESTED])
def test_corpus_nested_and_aggregate_queries_on_spark(query, on_spark):
    sim, frames, jobs = on_spark
    before = len(jobs)
    out, sent = run(query, sim, frames)
    assert out == answers()[query.name], query.sql
    assert sent == query.requests
    assert len(jobs) > before  # its AI parts ran on the cluster
