"""Write statements in SQL: COPY (SELECT ... ai_*) TO 'file', CREATE [OR REPLACE] TABLE ... AS, DROP TABLE.

Each against the project's simulator, counting the requests it answered. The corpus (tests/sql_corpus)
records a query's answer as the DataFrame ``ifr.sql`` returns; a write's effect is a file or a session
table, so these tests read that effect back themselves, and three corpus queries run through COPY with
the corpus's own answers and request counts.
"""

from __future__ import annotations

import json
import os

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import inferframe as ifr
from inferframe.errors import PlanError, RowFailed
from inferframe.simulator import Simulator, SimulatorConfig
from sql_corpus.corpus import answers, queries, simulated, tables


def labels(body):
    """"negative" for a review that says "broken", "positive" otherwise; "maybe" (no label: the row fails) for "error"."""
    text = body["messages"][-1]["content"]
    return json.dumps({"label": "maybe" if "error" in text else "negative" if "broken" in text else "positive"})


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with Simulator(SimulatorConfig(responder=labels)) as s:
        yield s
    for name in ("labeled", "again"):
        ifr.sql(f"DROP TABLE IF EXISTS {name}")


def opts(sim):
    return (f"provider => 'openai', base_url => '{sim.base_url}', model => 'gpt-5-mini', "
            "use_chat_completions => true, cache => 'off'")


def classify(sim, extra=""):
    return f"ai_classify(review, ['positive', 'negative'], {opts(sim)}{extra})"


REVIEWS = ifr.from_pydict({"id": [1, 2, 3, 4], "review": ["great", "broken lid", "fine", "broken handle"]})


def test_copy_to_parquet_writes_the_ai_column_one_request_per_row(sim, tmp_path):
    path = tmp_path / "labels.parquet"
    out = ifr.sql(f"COPY (SELECT id, {classify(sim)} AS label FROM reviews ORDER BY id) TO '{path}' (FORMAT parquet)",
                  reviews=REVIEWS)
    assert out.to_pydict() == {"Count": [4]}
    assert pq.read_table(path).to_pydict() == {"id": [1, 2, 3, 4],
                                               "label": ["positive", "negative", "positive", "negative"]}
    assert sim.stats()["total_requests"] == 4
    assert sorted(os.listdir(tmp_path)) == ["labels.parquet"]  # one file, no temporary directory left beside it


def test_copy_with_format_csv_and_a_where_sends_only_the_rows_kept(sim, tmp_path):
    path = tmp_path / "out.txt"  # the FORMAT option, not the extension, decides
    ifr.sql(f"COPY (SELECT id, {classify(sim)} AS label FROM reviews WHERE id > 2 ORDER BY id) TO '{path}' "
            "(FORMAT csv, HEADER true)", reviews=REVIEWS)
    assert pacsv.read_csv(path).to_pydict() == {"id": [3, 4], "label": ["positive", "negative"]}
    assert sim.stats()["total_requests"] == 2


def test_copy_of_a_table_by_name_and_json_by_extension(sim, tmp_path):
    path = tmp_path / "reviews.jsonl"
    assert ifr.sql(f"COPY reviews (id) TO '{path}'", reviews=REVIEWS).to_pydict() == {"Count": [4]}
    assert [json.loads(line) for line in path.read_text().splitlines()] == [{"id": i} for i in (1, 2, 3, 4)]


def test_a_failing_run_leaves_no_file_at_the_path_and_an_old_file_as_it_was(sim, tmp_path):
    rows = ifr.from_pydict({"id": [1, 2, 3], "review": ["great", "error here", "fine"]})
    path = tmp_path / "out.parquet"
    call = classify(sim, ", on_error => 'raise'")
    query = f"COPY (SELECT id, {call} AS label FROM r) TO '{path}'"
    with pytest.raises(RowFailed):
        ifr.sql(query, r=rows)
    assert sim.stats()["total_requests"] >= 1 and os.listdir(tmp_path) == []
    path.write_bytes(b"old")
    with pytest.raises(RowFailed):
        ifr.sql(query, r=rows)
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["out.parquet"]


def test_copy_through_a_link_writes_its_file_and_a_device_is_refused(sim, tmp_path):
    (tmp_path / "real.csv").write_text("old")
    (tmp_path / "link.csv").symlink_to(tmp_path / "real.csv")
    ifr.sql(f"COPY reviews (id) TO '{tmp_path}/link.csv'", reviews=REVIEWS)
    assert (tmp_path / "link.csv").is_symlink() and pacsv.read_csv(tmp_path / "real.csv").num_rows == 4
    with pytest.raises(PlanError, match="not a regular file"):
        ifr.sql("COPY reviews TO '/dev/null' (FORMAT csv)", reviews=REVIEWS)
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_an_interrupted_copy_leaves_no_file(tmp_path):
    def interrupted(x):
        raise KeyboardInterrupt  # as Ctrl-C lands while a column is computed

    stop = ifr.func(interrupted, return_dtype=ifr.DataType.int64())
    rows = ifr.from_pydict({"a": [1, 2]}).with_column("b", stop(ifr.col("a")))
    with pytest.raises(KeyboardInterrupt):
        ifr.sql(f"COPY (SELECT a, b FROM t) TO '{tmp_path}/out.parquet'", t=rows)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("option, named", [
    ("(FORMAT xlsx)", "FORMAT xlsx"), ("(DELIMITER ';')", "DELIMITER"), ("(FORMAT parquet, COMPRESSION lzma)", "lzma"),
    ("(FORMAT json, HEADER false)", "HEADER"),
])
def test_a_bad_copy_option_is_a_plan_error_before_any_request(sim, tmp_path, option, named):
    with pytest.raises(PlanError, match=named) as e:
        ifr.sql(f"COPY (SELECT {classify(sim)} AS label FROM reviews) TO '{tmp_path}/x' {option}", reviews=REVIEWS)
    assert "parquet, csv, json" in str(e.value) or "codecs are" in str(e.value) or "HEADER" in str(e.value)
    assert sim.stats()["total_requests"] == 0 and os.listdir(tmp_path) == []


def test_create_table_then_select_from_it_sends_no_further_requests(sim):
    made = ifr.sql(f"CREATE TABLE labeled AS SELECT id, {classify(sim)} AS label FROM reviews", reviews=REVIEWS)
    assert made.to_pydict() == {"Count": [4]} and sim.stats()["total_requests"] == 4
    out = ifr.sql("SELECT label, count(*) AS n FROM labeled GROUP BY label ORDER BY label").to_pydict()
    assert out == {"label": ["negative", "positive"], "n": [2, 2]}
    again = ifr.sql("SELECT l.id FROM labeled l JOIN r USING (id) WHERE label = 'negative' ORDER BY id", r=REVIEWS)
    assert again.to_pydict() == {"id": [2, 4]}
    assert sim.stats()["total_requests"] == 4  # read twice, computed once


def test_create_table_of_an_existing_name_errors_and_or_replace_replaces(sim):
    ifr.sql(f"CREATE TABLE labeled AS SELECT id, {classify(sim)} AS label FROM reviews WHERE id = 1", reviews=REVIEWS)
    with pytest.raises(PlanError, match="already exists.*CREATE OR REPLACE"):
        ifr.sql(f"CREATE TABLE labeled AS SELECT id, {classify(sim)} AS label FROM reviews", reviews=REVIEWS)
    assert sim.stats()["total_requests"] == 1  # refused before its query ran
    assert ifr.sql("CREATE TABLE IF NOT EXISTS labeled AS SELECT 1 AS id").to_pydict() == {"Count": [0]}
    ifr.sql(f"CREATE OR REPLACE TABLE labeled AS SELECT id, {classify(sim)} AS label FROM reviews WHERE id < 3",
            reviews=REVIEWS)
    assert ifr.sql("SELECT id, label FROM labeled ORDER BY id").to_pydict() == {"id": [1, 2],
                                                                                "label": ["positive", "negative"]}
    with pytest.raises(PlanError, match="DataFrame given"):
        ifr.sql("CREATE TABLE reviews AS SELECT 1 AS id", reviews=REVIEWS)


def test_copy_of_a_session_table_and_drop(sim, tmp_path):
    ifr.sql(f"CREATE TABLE again AS SELECT id, {classify(sim)} AS label FROM reviews", reviews=REVIEWS)
    ifr.sql(f"COPY again TO '{tmp_path}/again.csv'")
    assert pacsv.read_csv(tmp_path / "again.csv").num_rows == 4 and sim.stats()["total_requests"] == 4
    ifr.sql("DROP TABLE again")
    with pytest.raises(PlanError, match="again"):
        ifr.sql("SELECT * FROM again")


def test_explain_of_a_copy_explains_its_select_and_sends_nothing(sim, tmp_path):
    lines = ifr.sql(f"EXPLAIN COPY (SELECT {classify(sim)} AS label FROM reviews) TO '{tmp_path}/x.parquet'",
                    reviews=REVIEWS).to_pydict()["explain"]
    assert any("ai_classify" in line or "classify" in line for line in lines)
    assert sim.stats()["total_requests"] == 0 and os.listdir(tmp_path) == []


def test_the_cli_runs_a_copy(sim, tmp_path):
    from inferframe.cli.base import app

    data = tmp_path / "reviews.csv"
    data.write_text("id,review\n1,great\n2,broken lid\n")
    out = tmp_path / "labels.parquet"
    result = CliRunner().invoke(app, ["sql", f"COPY (SELECT id, {classify(sim)} AS label FROM '{data}' ORDER BY id) "
                                             f"TO '{out}' (FORMAT parquet)"])
    assert result.exit_code == 0, result.output
    assert pq.read_table(out).to_pydict() == {"id": [1, 2], "label": ["positive", "negative"]}
    assert sim.stats()["total_requests"] == 2
    refused = CliRunner().invoke(app, ["sql", f"COPY (SELECT {classify(sim)} FROM '{data}') TO '{tmp_path}/b.csv'",
                                       "--out", str(tmp_path / "dir")])
    assert refused.exit_code != 0 and "--out" in refused.output
    assert sim.stats()["total_requests"] == 2 and sorted(os.listdir(tmp_path)) == ["labels.parquet", "reviews.csv"]


@pytest.fixture(scope="module")
def corpus_sim():
    with simulated() as s:
        yield s


@pytest.mark.parametrize("name", ["cte_classify_count", "subquery_where_limit_pushed", "two_ai_aggregates"])
def test_a_corpus_query_through_copy_writes_its_answer_with_its_requests(corpus_sim, tmp_path, name):
    query = next(q for q in queries() if q.name == name)
    before = corpus_sim.stats()["total_requests"]
    ifr.sql(f"COPY ({query.sql}) TO '{tmp_path}/out.parquet'", **tables())
    assert pq.read_table(tmp_path / "out.parquet").to_pydict() == answers()[name]
    assert corpus_sim.stats()["total_requests"] - before == query.requests
