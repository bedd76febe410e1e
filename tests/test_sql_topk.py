"""``ORDER BY <AI call> LIMIT k`` as a top-k plan (sql.topk): EXPLAIN names it with its calls against scoring every
row, and the run sends what EXPLAIN says; the corpus holds its answers and requests (its ``topk`` queries)."""

from __future__ import annotations

import inferframe as ifr
from sql_corpus.corpus import queries
from sql_corpus.fixtures import frames, sim  # noqa: F401 - pytest fixtures, by name

REPEATED = next(q for q in queries() if q.name == "order_by_score_limit_repeated_texts")


def test_explain_names_the_top_k_plan_and_the_run_sends_its_calls(sim, frames):
    before = sim.stats()["total_requests"]
    text = "\n".join(ifr.sql("EXPLAIN " + REPEATED.sql, **frames).to_pydict()["explain"])
    assert sim.stats()["total_requests"] == before  # EXPLAIN sends nothing
    assert "top-k plan: each distinct input past the cheap filter asked once: 8 calls, not 20" in text, text
    assert "8 calls" in text.split("whole query", 1)[1], text
    ifr.sql(REPEATED.sql, **frames).to_pydict()
    assert sim.stats()["total_requests"] - before == 8 == REPEATED.requests


def test_the_top_k_plan_counts_the_rows_past_the_where_and_keeps_a_null_input_row(sim):
    reviews = ifr.from_pydict({"id": [1, 2, 3, 4], "kind": ["a", "a", "a", "b"],
                               "review": ["I love it", None, "I love it", "awful"]})
    query = ("SELECT id, ai_score(review, 'How satisfied is the buyer?', model => 'gpt-5-mini') AS s FROM reviews "
             "WHERE kind = 'a' ORDER BY s DESC NULLS LAST, id LIMIT 3")
    text = "\n".join(ifr.sql("EXPLAIN " + query, reviews=reviews).to_pydict()["explain"])
    assert "2 calls, not 3" in text, text  # kind = 'a' first: "I love it" and NULL, not "awful"
    before = sim.stats()["total_requests"]
    assert ifr.sql(query, reviews=reviews).to_pydict() == {"id": [1, 3, 2], "s": [5, 5, None]}
    assert sim.stats()["total_requests"] - before == 1  # a NULL input sends nothing, and its row is still there
