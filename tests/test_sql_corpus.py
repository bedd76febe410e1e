"""The SQL corpus (tests/sql_corpus): 40+ queries in the shapes of the vendors' AI SQL docs, each its answer and requests.

One simulator answers them all (tests/sql_corpus/responder.py); the provider and the cache policy are
set as a user sets them (``ifr.set_provider``, ``ifr.set_cache("off")``, so each query's requests are
its own).
"""

from __future__ import annotations

import pytest

import inferframe as ifr
from sql_corpus.corpus import ON_CLUSTERS, answers, queries, run, tagged
from sql_corpus.fixtures import frames, sim  # noqa: F401 - pytest fixtures, by name

QUERIES = queries()


def test_the_corpus_has_40_queries_each_with_an_answer_and_a_request_count():
    assert len(QUERIES) >= 40 and len({q.name for q in QUERIES}) == len(QUERIES)
    assert set(answers()) == {q.name for q in QUERIES}
    assert all(set(q.tags) <= set(ON_CLUSTERS) for q in QUERIES)  # a misspelt tag would drop a query from the clusters
    assert {tag: len(tagged(tag)) >= 3 for tag in ON_CLUSTERS} == dict.fromkeys(ON_CLUSTERS, True)


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
