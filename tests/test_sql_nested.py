"""SQL with AI calls below the top query (CTEs, subqueries, UNION ALL), several AI aggregates, and their EXPLAIN.

The request counts of each shape are in the corpus (tests/sql_corpus); these tests check what the
corpus cannot: the tree the planner writes, EXPLAIN's figures against the requests a run sends, the
engine's errors as NULL inside a CTE, and the errors that name what is not planned.
"""

from __future__ import annotations

import pytest

import inferframe as ifr
from inferframe.errors import PlanError
from sql_corpus.corpus import queries
from sql_corpus.fixtures import frames, sim  # noqa: F401 - pytest fixtures, by name

M = "model => 'gpt-5-mini'"


def sent(sim, run):
    before = sim.stats()["total_requests"]
    out = run()
    return out, sim.stats()["total_requests"] - before


def test_explain_of_a_cte_query_shows_each_cte_and_the_whole_estimate_then_the_run_sends_it(sim, frames):
    query = (f"WITH audio AS (SELECT * FROM reviews WHERE category = 'audio'), labeled AS (SELECT id, "
             f"ai_classify(review, ['positive', 'negative'], {M}) AS label FROM audio) "
             "SELECT label, count(*) AS n FROM labeled WHERE id < 13 GROUP BY label ORDER BY label")
    text, nothing = sent(sim, lambda: "\n".join(ifr.sql("EXPLAIN " + query, **frames).to_pydict()["explain"]))
    assert nothing == 0
    assert "== the CTE labeled: planned as a query of its own" in text and "ai_classify(...) on audio" in text, text
    whole = text.split("every CTE and subquery included: estimate (nothing sent) ==", 1)[1]
    out, requests = sent(sim, lambda: ifr.sql(query, **frames).to_pydict())
    assert out == {"label": ["negative", "positive"], "n": [1, 3]}
    # The audio rows with id < 13 (3, 6, 9, 12): the outer WHERE on an input column reached the CTE's source.
    assert requests == 4 and f"{requests} calls" in whole, text


def test_explain_of_a_subquery_shows_the_where_and_limit_pushed_into_it(sim, frames):
    query = f"SELECT * FROM (SELECT id, ai_complete('Reply to: ' || review, {M}) AS s FROM reviews) WHERE id < 100 LIMIT 5"
    text = "\n".join(ifr.sql("EXPLAIN " + query, **frames).to_pydict()["explain"])
    assert "WHERE (id < 100) LIMIT 5" in text, text  # the subquery as planned: the outer WHERE and LIMIT in it
    assert "LIMIT 5: AI columns for 5 rows at most" in text, text
    assert "5 calls" in text.split("whole query", 1)[1], text


def test_an_ai_call_in_a_cte_keeps_its_errors_as_data(sim, frames):
    query = (f"WITH labeled AS (SELECT id, ai_classify(review, ['positive', 'negative'], {M}) AS label, "
             f"ai_error(ai_classify(review, ['positive', 'negative'], {M})).kind AS why FROM reviews WHERE product = 'p4') "
             "SELECT * FROM labeled ORDER BY id")
    out, requests = sent(sim, lambda: ifr.sql(query, **frames).to_pydict())
    assert out == {"id": [1, 7, 13, 19], "label": ["positive", "positive", None, "positive"],
                   "why": [None, None, "schema", None]}
    assert requests == 4  # the call and its error are one column: each row asked once


def test_an_outer_where_on_an_ai_column_is_not_pushed_into_the_cte(sim, frames):
    query = (f"WITH labeled AS (SELECT id, stars, ai_classify(review, ['positive', 'negative'], {M}) AS label "
             "FROM reviews) SELECT id FROM labeled WHERE label = 'negative' AND stars = 1 ORDER BY id")
    out, requests = sent(sim, lambda: ifr.sql(query, **frames).to_pydict())
    assert out == {"id": [5, 10, 15, 20]} and requests == 4  # stars = 1 reached the CTE's source; label did not


def test_a_correlated_subquery_with_ai_names_the_construct_and_the_rewrite(sim, frames):
    query = (f"SELECT p.name FROM products p WHERE EXISTS (SELECT 1 FROM reviews r WHERE r.product = p.product "
             f"AND ai_filter(r.review, 'The buyer is happy.', {M}))")
    with pytest.raises(PlanError, match="correlated subquery.*write it as a JOIN"):
        ifr.sql(query, **frames)


@pytest.mark.parametrize("wrap", ["WITH x AS ({q}) SELECT * FROM x", "SELECT * FROM ({q})"], ids=["cte", "subquery"])
def test_a_misspelt_column_inside_a_cte_gets_the_top_level_did_you_mean(wrap, sim, frames):
    inner = f"SELECT id, ai_classify(reviw, ['positive', 'negative'], {M}) AS label FROM reviews"
    with pytest.raises(PlanError) as top:
        ifr.sql(inner, **frames)
    with pytest.raises(PlanError) as nested:
        ifr.sql(wrap.format(q=inner), **frames)
    assert 'Candidate bindings: "review"' in str(top.value)  # DuckDB's did-you-mean, at top level
    assert str(nested.value).startswith(str(top.value)), nested.value  # the same words, then where it is
    assert "correlated" not in str(nested.value)  # not the advice for a subquery reading the outer query


def test_a_semantic_join_beside_a_scalar_ai_call_explains_both_and_asks_only_the_joined_rows(sim, frames):
    query = next(q for q in queries() if q.name == "semantic_join_then_classify").sql
    text, nothing = sent(sim, lambda: "\n".join(ifr.sql("EXPLAIN " + query, **frames).to_pydict()["explain"]))
    assert nothing == 0
    assert "== sem_join '{review:left} is about {description:right}' ==" in text, text
    assert "== __ifr_join: AI calls ==" in text and "ai_classify(...) on __ifr_join" in text, text
    out, requests = sent(sim, lambda: ifr.sql(query, **frames).to_pydict())
    assert out == {"id": [4], "name": ["Kettle"], "label": ["positive"]}
    assert requests == 3 + 1  # the join's batched pairs (as test_sql_corpus checks), then the one pair it kept


def test_a_left_semantic_join_over_an_ai_cte_names_the_rewrite_before_any_request(sim, frames):
    before = sim.stats()["total_requests"]
    query = (f"WITH l AS (SELECT id, review, ai_classify(review, ['positive', 'negative'], {M}) AS label FROM reviews) "
             f"SELECT l.id, p.name FROM l LEFT JOIN products p ON ai_filter(l.review || ' fits ' || p.name, {M})")
    with pytest.raises(PlanError, match="reads its left side twice.*compute them first"):
        ifr.sql(query, **frames)
    assert sim.stats()["total_requests"] == before


@pytest.mark.parametrize("statement", [  # COPY and CREATE TABLE ... AS are planned: tests/test_sql_writes.py
    "INSERT INTO labeled SELECT id, ai_classify(review, ['positive', 'negative'], {m}) AS label FROM reviews",
    "UPDATE reviews SET review = ai_complete(review, {m})",
])
def test_insert_and_update_name_the_rewrite_before_any_request(statement, sim, frames):
    before = sim.stats()["total_requests"]
    with pytest.raises(PlanError, match=r"not planned yet .*write_parquet\('out/'\)"):
        ifr.sql(statement.format(m=M), **frames)
    assert sim.stats()["total_requests"] == before
