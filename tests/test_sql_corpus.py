"""The SQL corpus (tests/sql_corpus): 40+ queries in the shapes of the vendors' AI SQL docs, each its answer and requests.

One simulator answers them all (tests/sql_corpus/responder.py); the provider and the cache policy are
set as a user sets them (``ifr.set_provider``, ``ifr.set_cache("off")``, so each query's requests are
its own).
"""

from __future__ import annotations

import pytest

import inferframe as ifr
from inferframe.session import reset_provider
from inferframe.simulator import Simulator, SimulatorConfig
from sql_corpus.corpus import NESTED_AND_AGGREGATES, answers, queries, run, shaped, tables
from sql_corpus.responder import respond

QUERIES = queries()


@pytest.fixture(scope="module")
def sim():
    with Simulator(SimulatorConfig(responder=respond)) as s:
        ifr.set_provider("openai", base_url=s.base_url, api_key="sk-corpus")
        ifr.set_cache("off")
        yield s
    reset_provider()
    ifr.set_cache("read_write")


@pytest.fixture(scope="module")
def frames():
    return tables()


def test_the_corpus_has_40_queries_each_with_an_answer_and_a_request_count():
    assert len(QUERIES) >= 40 and len({q.name for q in QUERIES}) == len(QUERIES)
    assert set(answers()) == {q.name for q in QUERIES}
    assert len(shaped(*NESTED_AND_AGGREGATES)) >= 15


@pytest.mark.parametrize("query", QUERIES, ids=[q.name for q in QUERIES])
def test_corpus_query(query, sim, frames):
    out, sent = run(query, sim, frames)
    recorded = answers()[query.name]
    assert out == recorded and list(out) == list(recorded), query.sql
    assert sent == query.requests, f"{query.name} sent {sent} requests, the corpus says {query.requests}"


def test_the_corpus_semantic_join_sends_what_python_sem_join_sends(sim, frames):
    reviews = frames["reviews"].where(ifr.col("id").is_in([4, 7])).select("id", "review")
    before = sim.stats()["total_requests"]
    joined = reviews.sem_join(frames["products"], "{review:left} is about {description:right}", model="gpt-5-mini")
    assert sorted(zip(*joined.select("id", "name").to_pydict().values())) == [(4, "Kettle")]
    python = sim.stats()["total_requests"] - before
    query = next(q for q in QUERIES if q.name == "semantic_join")
    assert python == query.requests
