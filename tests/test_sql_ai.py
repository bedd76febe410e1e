"""AI functions in SQL (ifr.sql / df.sql / inferframe sql): planned as AI columns, sent only for the rows the query needs."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import inferframe as ifr
from inferframe.errors import PlanError, RowFailed
from inferframe.simulator import Simulator, SimulatorConfig


def planted(body):
    """yes for "good", "maybe" (no label) for "broken", no otherwise; a JSON record for extraction; else an echo."""
    text = body["messages"][-1]["content"]
    fmt = json.dumps(body.get("response_format") or {})
    if '"age"' in fmt:
        return "not json" if "broken" in text else json.dumps({"name": text.split()[0], "age": len(text)})
    if '"label"' in fmt:
        if "How well" in text:
            return json.dumps({"label": "5" if "good" in text else "1"})
        return json.dumps({"label": "maybe" if "broken" in text else "yes" if "good" in text else "no"})
    return "echo: " + text


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with Simulator(SimulatorConfig(responder=planted)) as s:
        yield s


def opts(sim):
    return (f"provider => 'openai', base_url => '{sim.base_url}', model => 'gpt-5-mini', "
            "use_chat_completions => true, cache => 'off'")


def reviews(n, bad_every=3):
    return ifr.from_pydict({"id": list(range(n)), "stars": [i % 5 + 1 for i in range(n)],
                            "r": [("bad" if i % bad_every == 0 else "good") + f" film {i}" for i in range(n)]})


def test_a_cheap_where_runs_first_and_only_its_rows_are_sent(sim):
    out = ifr.sql(f"select id, ai_complete('Say: ' || r, {opts(sim)}) as a from t where stars = 5 order by id",
                  t=reviews(20)).to_pydict()
    assert out == {"id": [4, 9, 14, 19], "a": [f"echo: Say: {'bad' if i % 3 == 0 else 'good'} film {i}"
                                                for i in (4, 9, 14, 19)]}
    assert sim.stats()["total_requests"] == 4


def test_an_ai_column_the_query_does_not_read_sends_nothing(sim):
    df = reviews(10)
    q = f"select count(*) as n from (select id, ai_complete(r, {opts(sim)}) as a from t) where id < 3"
    assert ifr.sql(q, t=df).to_pydict() == {"n": [3]}
    assert sim.stats()["total_requests"] == 0
    out = df.sql(f"select id from self where stars > 4 or ai_filter(r, 'is positive', {opts(sim)}) is null")
    assert out.count_rows() == 2
    assert sim.stats()["total_requests"] == 10  # an OR with an AI part: every row asked, DuckDB decides


def test_ai_filter_in_where_with_a_limit_stops_sending_once_enough_rows_pass(sim):
    n = 2000
    df = ifr.from_pydict({"r": [("good" if i % 2 else "bad") + f" film {i}" for i in range(n)],
                          "stars": [i % 4 for i in range(n)]})
    ai = f"ai_filter(r, 'The review is positive.', {opts(sim)})"
    out = df.sql(f"select r from self where {ai} limit 10").to_pydict()
    assert out["r"] == [f"good film {i}" for i in range(1, 20, 2)]
    assert 20 <= sim.stats()["total_requests"] <= 20 + 16  # rows 0..19, and at most sem_filter's window past them
    before = sim.stats()["total_requests"]
    out = df.sql(f"select r from self where stars = 3 and {ai} limit 5 offset 1").to_pydict()
    assert out["r"] == [f"good film {i}" for i in (7, 11, 15, 19, 23)]  # the cheap part first, then the filter
    assert sim.stats()["total_requests"] - before <= 6 + 16
    # ORDER BY a column of the source: DuckDB sorts first, then the filter runs until 2 rows passed.
    before = sim.stats()["total_requests"]
    out = df.sql(f"select r from self where stars = 1 and {ai} order by r desc limit 2").to_pydict()
    assert out["r"] == ["good film 997", "good film 993"] and sim.stats()["total_requests"] - before <= 2 + 16
    # Something else between the WHERE and the LIMIT (DISTINCT): DuckDB applies it, the answers stay right.
    out = df.sql(f"select distinct stars from self where {ai} limit 5").to_pydict()
    assert sorted(out["stars"]) == [1, 3]


def test_a_limit_without_an_ai_filter_sends_only_its_rows(sim):
    df = reviews(500)
    out = df.sql(f"select id, ai_complete(r, {opts(sim)}) as a from self limit 3").to_pydict()
    assert out["id"] == [0, 1, 2] and sim.stats()["total_requests"] == 3
    out = df.sql(f"select id, ai_complete(r, {opts(sim)}) as a from self where stars = 5 limit 2").to_pydict()
    assert out["id"] == [4, 9] and sim.stats()["total_requests"] == 3 + 2
    out = df.sql(f"select id, ai_complete(r, {opts(sim)}) as a from self order by id desc limit 2").to_pydict()
    assert out["id"] == [499, 498] and sim.stats()["total_requests"] == 5 + 2  # DuckDB's top-n first, then the AI
    out = df.sql(f"select id, ai_complete(r, {opts(sim)}) as a from self order by a desc limit 2").to_pydict()
    assert out["a"] == ["echo: good film 98", "echo: good film 97"]  # ordered by the AI column: every row asked
    assert sim.stats()["total_requests"] == 7 + 500


def test_classify_extract_score_are_typed_and_errors_are_data(sim):
    df = ifr.from_pydict({"r": ["good Ada", "bad Bob", "broken Cy"]})
    out = df.sql(f"""select ai_classify(r, ['yes', 'no'], {opts(sim)}) as label,
                            ai_extract(r, 'name, age int', {opts(sim)}) as rec,
                            ai_error(ai_extract(r, 'name, age int', {opts(sim)})).kind as why,
                            ai_score(r, 'Is it fine?', {opts(sim)}) as score
                     from self""")
    schema = out.schema().to_arrow()
    assert schema.field("rec").type == pa.struct([("name", pa.string()), ("age", pa.int64())])
    assert schema.field("score").type == pa.int32()
    got = out.to_pydict()
    assert got["rec"] == [{"name": "good", "age": 8}, {"name": "bad", "age": 7}, None]
    assert got["why"] == [None, None, "schema"]  # the broken row: NULL, its error readable
    assert got["label"] == ["yes", "no", None]
    assert got["score"] == [5, 1, 1]
    with pytest.raises(RowFailed):
        df.sql(f"select ai_extract(r, 'name, age int', on_error => 'raise', {opts(sim)}) from self").to_pydict()


def test_a_self_join_with_an_ai_call_on_one_side(sim):
    df = reviews(6)
    out = df.sql(f"select x.id, y.id as next, ai_complete(x.r, {opts(sim)}) as a from self x join self y "
                 "on y.id = x.id + 1 where x.stars >= 4 order by x.id").to_pydict()
    assert out == {"id": [3, 4], "next": [4, 5], "a": ["echo: bad film 3", "echo: good film 4"]}
    assert sim.stats()["total_requests"] == 2  # rows 3 and 4 pass stars >= 4 on x's side; y reads no AI column


def test_the_model_as_an_argument(sim):
    base = f"provider => 'openai', base_url => '{sim.base_url}', use_chat_completions => true, cache => 'off'"
    out = reviews(2).sql(f"select ai_query('gpt-5-mini', r, {base}) as q, ai_complete(r, 'gpt-5-mini', {base}) as c "
                         "from self").to_pydict()
    assert out == {"q": ["echo: bad film 0", "echo: good film 1"], "c": ["echo: bad film 0", "echo: good film 1"]}
    with pytest.raises(PlanError, match="the model is given twice"):
        reviews(2).sql(f"select ai_complete(r, 'gpt-5-mini', model => 'gpt-5', {base}) from self")


def test_the_same_call_twice_is_computed_once(sim):
    out = reviews(4).sql(f"select ai_complete(r, {opts(sim)}) as a, ai_error(ai_complete(r, {opts(sim)})) as e "
                         "from self").to_pydict()
    assert out["e"] == [None] * 4 and len(out["a"]) == 4
    assert sim.stats()["total_requests"] == 4


def test_sources_files_read_csv_polars_and_arrow(sim, tmp_path):
    table = pa.table({"r": ["good a", "bad b", "good c"], "stars": [5, 1, 4]})
    pq.write_table(table, tmp_path / "reviews.parquet")
    (tmp_path / "reviews.csv").write_text("r,stars\ngood a,5\nbad b,1\ngood c,4\n")
    q = "select r from {src} where stars >= 4 and ai_filter(r, 'positive', " + opts(sim) + ") order by r"
    expected = {"r": ["good a", "good c"]}
    assert ifr.sql(q.format(src=f"'{tmp_path / 'reviews.parquet'}'")).to_pydict() == expected
    assert ifr.sql(q.format(src=f"read_csv('{tmp_path / 'reviews.csv'}') as x")).to_pydict() == expected
    assert ifr.sql(q.format(src="t"), t=table).to_pydict() == expected
    pl = pytest.importorskip("polars")
    assert ifr.sql(q.format(src="t"), t=pl.from_arrow(table)).to_pydict() == expected
    assert sim.stats()["total_requests"] == 8  # 2 rows past stars >= 4, four times


def test_explain_shows_the_calls_and_the_estimate_and_sends_nothing(sim):
    lines = ifr.sql(f"explain select ai_complete(r, {opts(sim)}) from t where stars = 5 limit 3",
                    t=reviews(20)).to_pydict()["explain"]
    text = "\n".join(lines)
    assert "cheap filter run first: eq(col(stars), lit(5))" in text
    assert "prompt[gpt-5-mini]: 3 calls" in text and "LIMIT 3: AI columns for 3 rows at most" in text
    lines = "\n".join(ifr.sql(f"explain select ai_complete(r, {opts(sim)}) from t where stars = 5", t=reviews(20))
                      .to_pydict()["explain"])
    assert "prompt[gpt-5-mini]: 4 calls" in lines
    assert sim.stats()["total_requests"] == 0


def test_mistakes_are_plan_errors_naming_the_fix(sim, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")  # the embedded model is the default: it serves no model named 'nope'
    df = reviews(3)
    with pytest.raises(PlanError, match=r"unknown AI function ai_complet\(\); did you mean ai_complete\(\)\?.*DuckDB"):
        df.sql("select ai_complet(r) from self")
    with pytest.raises(PlanError, match="labels must be a constant"):
        df.sql("select ai_classify(r, r) from self")
    with pytest.raises(PlanError, match=r"must be text \(VARCHAR\), got int64 from 'stars'"):
        df.sql("select ai_complete(stars) from self")
    with pytest.raises(PlanError, match="model 'nope' is not served here"):
        df.sql("select ai_complete(r, model => 'nope') from self")
    with pytest.raises(PlanError, match="temperature=5 is not accepted"):
        df.sql("select ai_complete(r, temperature => 5) from self")
    with pytest.raises(PlanError, match="takes ai_classify\\(text, labels\\)"):
        df.sql("select ai_classify(r) from self")
    with pytest.raises(PlanError, match="DuckDB cannot parse the query"):
        df.sql("select ai_complete(r from self")
    with pytest.raises(PlanError, match="key does not belong in the query"):
        df.sql("select ai_complete(r, api_key => 'sk-secret') from self")
    assert sim.stats()["total_requests"] == 0


def test_cli_runs_a_query_over_a_file_and_explains_it(sim, tmp_path):
    from inferframe.cli.base import app

    pq.write_table(pa.table({"r": ["good a", "bad b"]}), tmp_path / "r.parquet")
    q = f"select r, ai_filter(r, 'positive', {opts(sim)}) as ok from '{tmp_path / 'r.parquet'}' order by r"
    shown = CliRunner().invoke(app, ["sql", "--explain", q])
    assert shown.exit_code == 0, shown.output
    assert "sem_filter" in shown.output and sim.stats()["total_requests"] == 0
    bad = CliRunner().invoke(app, ["sql", f"select ai_complet(r) from '{tmp_path / 'r.parquet'}'"])
    assert bad.exit_code == 2 and "did you mean ai_complete()" in bad.output
    ran = CliRunner().invoke(app, ["sql", q])
    assert ran.exit_code == 0, ran.output
    assert "good a" in ran.output and "true" in ran.output.lower() and sim.stats()["total_requests"] == 2


def test_on_the_embedded_model_and_the_packaged_embedder():
    df = ifr.from_pydict({"t": ["I love this film", "A cat sat on the mat"]})
    out = df.sql("select ai_classify(t, ['positive', 'negative']) as label, "
                 "ai_similarity(t, 'I really like this movie') as sim, len(ai_embed(t)) as dims from self").to_pydict()
    assert set(out["label"]) <= {"positive", "negative"} and None not in out["label"]
    assert out["dims"] == [384, 384] and out["sim"][0] > out["sim"][1]


def judge(body):
    """Pairs: the same sentiment iff both or neither say "good"; groups: the number of texts listed."""
    system, text = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "Decide" in system:
        a, b = text.split(" and ", 1)
        return json.dumps({"label": "yes" if ("good" in a) == ("good" in b.rsplit(" express", 1)[0]) else "no"})
    if "sentiment of the text" in system:
        return json.dumps({"value": "positive" if "good" in text else "negative"})
    if "Texts:" in text:
        listed = text.rsplit("Texts:", 1)[1].split("\nTask:")[0]
        return f"{sum(1 for line in listed.splitlines() if line[:1].isdigit())} texts"
    return planted(body)


def test_group_by_an_ai_column_counts_per_label(sim):
    df = ifr.from_pydict({"r": ["good a", "bad b", "good c", "broken d", "good e"]})
    label = f"ai_classify(r, ['yes', 'no'], {opts(sim)})"
    out = df.sql(f"select {label} as label, count(*) as n, count(ai_error({label})) as failed from self "
                 f"group by {label} order by label nulls last").to_pydict()
    assert out == {"label": ["no", "yes", None], "n": [1, 3, 1], "failed": [0, 0, 1]}
    assert sim.stats()["total_requests"] == 5  # the three mentions are one call per row


def test_a_semantic_join_in_sql_sends_what_sem_join_sends(sim):
    sim.configure(responder=judge)
    a = ifr.from_pydict({"review": [f"{'good' if i % 3 else 'bad'} film {i}" for i in range(5)]})
    b = ifr.from_pydict({"review": [f"{'good' if i % 2 else 'bad'} show {i}" for i in range(4)], "id": list(range(4))})
    python = a.sem_join(b, "{review:left} and {review:right} express the same sentiment", provider="openai",
                        base_url=sim.base_url, model="gpt-5-mini", use_chat_completions=True, cache="off").to_pydict()
    in_python = sim.stats()["total_requests"]
    out = ifr.sql(f"select a.review as l, b.review as r, id from a join b on "
                  f"ai_filter(a.review || ' and ' || b.review || ' express the same sentiment', {opts(sim)}) "
                  "order by l, r", a=a, b=b).to_pydict()
    assert sim.stats()["total_requests"] - in_python == in_python > 0
    assert sorted(zip(python["review"], python["right.review"])) == list(zip(out["l"], out["r"]))
    assert all(("good" in x) == ("good" in y) for x, y in zip(out["l"], out["r"])) and len(out["l"]) == 10


def test_an_ai_aggregate_per_group_with_where_and_order(sim):
    sim.configure(responder=judge)
    df = ifr.from_pydict({"film": ["A", "A", "B", "A", "C"], "stars": [1, 2, 1, 5, 1],
                          "review": ["too long", "too loud", "dull", "great", "slow"]})
    out = df.sql(f"select film, count(*) as n, ai_agg(review, 'Sum up the complaints', {opts(sim)}) as complaints "
                 "from self where stars < 3 group by film order by film desc").to_pydict()
    assert out == {"film": ["C", "B", "A"], "n": [1, 1, 2], "complaints": ["1 texts", "1 texts", "2 texts"]}
    assert sim.stats()["total_requests"] == 3  # one prompt per group: the 5-star row never sent
    total = df.sql(f"select ai_summarize_agg(review, {opts(sim)}) from self").to_pydict()
    # An unnamed item is named as DuckDB names any expression: its SQL as DuckDB prints it (`:=` for `=>`).
    printed = opts(sim).replace("=>", ":=").replace("cache", '"cache"')
    assert total == {f"ai_summarize_agg(review, {printed})": ["5 texts"]}
    lines = "\n".join(df.sql(f"explain select film, ai_agg(review, 'x', {opts(sim)}) from self group by film")
                      .to_pydict()["explain"])
    assert "sem_agg per group" in lines and "SemAgg" in lines


def test_batch_true_sends_the_rows_as_one_batch_api_job(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with Simulator(SimulatorConfig()) as sim:
        df = ifr.from_pydict({"q": [f"row {i}" for i in range(12)], "keep": [i % 2 == 0 for i in range(12)]})
        out = df.sql(f"select ai_complete(q, provider => 'openai', base_url => '{sim.base_url}', model => 'gpt-5-mini', "
                     "batch => true, batch_poll_interval => 0.05) as a from self where keep").to_pydict()
        stats = sim.stats()
    assert out["a"] == [f"sim answer: row {i}" for i in range(0, 12, 2)]
    assert stats["batches_created"] == 1 and stats["batch_requests"] == 6  # the 6 rows the WHERE keeps, one batch
