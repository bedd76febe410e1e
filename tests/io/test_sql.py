"""SQL over DataFrames on DuckDB: results, errors, and AI columns computed only where the query reads them."""

from __future__ import annotations

import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.sql.source import columns_read
from inferframe.errors import ArgumentTypeError, PlanError
from inferframe.functions import prompt
from inferframe.simulator import Simulator, SimulatorConfig

CALLS: list = []


@ifr.func(return_dtype=ifr.DataType.string())
def shout(text: str) -> str:
    CALLS.append(text)
    return None if text is None else text.upper()


@pytest.fixture(autouse=True)
def _calls():
    CALLS.clear()


@pytest.fixture
def reviews():
    return (ifr.from_pydict({"label": ["pos", "neg", "pos", None], "text": ["good", "bad", "fine", None]})
            .with_column("loud", shout(col("text"))))


def test_group_by_reads_no_ai_column(reviews):
    out = reviews.sql("select label, count(*) as n from self group by label order by label nulls last")
    assert out.to_pydict() == {"label": ["neg", "pos", None], "n": [1, 2, 1]}
    assert CALLS == []


def test_counting_rows_computes_no_ai_column(reviews):
    shuffled = reviews.select("loud", "label", "text")  # the AI column first: DuckDB still reads a cheap one
    assert shuffled.sql("select count(*) as n from self").to_pydict() == {"n": [4]}
    assert CALLS == []


def test_an_ai_column_is_computed_only_for_the_rows_the_where_keeps(reviews):
    out = reviews.sql("select loud from self where label = 'pos' order by loud")
    assert out.to_pydict() == {"loud": ["FINE", "GOOD"]}
    assert sorted(c for c in CALLS if c) == ["fine", "good"]  # 'bad' and the null label's row never computed


def test_a_where_that_reads_an_ai_column_is_computed_for_the_rows_its_other_parts_keep(reviews):
    out = reviews.sql("select text from self where label = 'pos' and loud = 'GOOD'")
    assert out.to_pydict() == {"text": ["good"]}
    assert sorted(c for c in CALLS if c) == ["fine", "good"]


def test_an_or_with_an_ai_column_is_left_to_duckdb_and_stays_right(reviews):
    out = reviews.sql("select text from self where label = 'neg' or loud = 'GOOD' order by text")
    assert out.to_pydict() == {"text": ["bad", "good"]}
    assert sorted(c for c in CALLS if c) == ["bad", "fine", "good"]  # not pushable: every row computed


def test_pushed_filters_keep_sqls_null_and_string_semantics():
    df = ifr.from_pydict({"stars": [5, None, 3, 4, 1], "text": ["great buy", "ok", None, "great value", "bad"]})
    df = df.with_column("loud", shout(col("text")))
    out = df.sql("select loud from self where stars >= 4 and contains(text, 'great') and stars is not null "
                 "order by loud")
    assert out.to_pydict() == {"loud": ["GREAT BUY", "GREAT VALUE"]}
    assert sorted(CALLS) == ["great buy", "great value"]
    CALLS.clear()
    out = df.sql("select count(loud) as n from self where not (stars < 4) or stars is null")
    assert out.to_pydict() == {"n": [3]}  # 5, None (its text 'ok'), 4
    assert sorted(CALLS) == ["great buy", "great value", "ok"]


def test_a_prompt_sends_requests_only_for_the_rows_the_query_keeps():
    with Simulator(SimulatorConfig()) as sim:
        df = ifr.from_pydict({"q": [f"q{i}" for i in range(20)], "stars": [i % 5 + 1 for i in range(20)]})
        df = df.with_column("answer", prompt(col("q"), model="gpt-5-mini", provider="openai", base_url=sim.base_url,
                                             api_key="k", cache="off"))
        out = df.sql("select q, answer from self where stars = 5 order by q").to_pydict()
        assert out["answer"] == [f"sim answer: {q}" for q in out["q"]] and len(out["q"]) == 4
        assert sim.stats()["total_requests"] == 4


def test_columns_the_outer_plan_drops_are_not_computed(reviews):
    every = reviews.sql("select * from self")
    assert every.select("label").to_pydict() == {"label": ["pos", "neg", "pos", None]}
    assert CALLS == []
    assert every.to_pydict()["loud"] == ["GOOD", "BAD", "FINE", None]


def test_a_limit_stops_reading_the_stream():
    n = 50_000
    df = ifr.from_pydict({"t": [f"t{i}" for i in range(n)]}).into_batches(500).with_column("loud", shout(col("t")))
    assert ifr.sql("select loud from d limit 3", d=df).count_rows() == 3
    assert 0 < len(CALLS) < n


def test_sql_over_several_frames_runs_again_each_time():
    a = ifr.from_pydict({"id": [1, 2, 3], "x": ["p", "q", None]})
    b = ifr.from_pydict({"id": [2, 3], "y": [[1.0, 2.0], None]})
    joined = ifr.sql("select a.id, x, y from a join b using (id) order by a.id", a=a, b=b)
    expected = {"id": [2, 3], "x": ["q", None], "y": [[1.0, 2.0], None]}
    assert joined.to_pydict() == joined.to_pydict() == expected


def test_nested_values_and_the_error_column_pass_through_sql():
    errors = pa.array([None, {"kind": "bad_request", "message": "no"}], pa.struct([("kind", pa.string()), ("message", pa.string())]))
    df = ifr.from_arrow(pa.table({"rec": pa.array([{"n": 1}, None]), "v": pa.array([[0.5, 1.0], None], pa.list_(pa.float32(), 2)),
                                  "rec_error": errors}))
    out = df.sql("select rec, v, rec_error, rec_error.kind as kind from self")
    assert out.schema().to_arrow().field("v").type == pa.list_(pa.float32(), 2)
    assert out.to_pydict() == {"rec": [{"n": 1}, None], "v": [[0.5, 1.0], None],
                               "rec_error": [None, {"kind": "bad_request", "message": "no"}], "kind": [None, "bad_request"]}


def test_a_prompt_the_query_does_not_select_sends_no_request():
    with Simulator(SimulatorConfig()) as sim:
        df = ifr.from_pydict({"q": ["a", "b", "c"], "group": [1, 1, 2]})
        df = df.with_column("answer", prompt(col("q"), model="gpt-5-mini", provider="openai", base_url=sim.base_url,
                                             api_key="k", cache="off"))
        assert df.sql("select \"group\", count(*) as n from self group by 1 order by 1").to_pydict() == {"group": [1, 2], "n": [2, 1]}
        assert sim.stats()["total_requests"] == 0
        answers = df.sql("select answer from self").to_pydict()["answer"]
        assert answers == ["sim answer: a", "sim answer: b", "sim answer: c"]
        assert sim.stats()["total_requests"] == 3


def test_columns_read_follows_duckdbs_plan():
    s = pa.schema([("a", pa.int64()), ("b", pa.string()), ("s", pa.struct([("x", pa.int64())])), ("s.y", pa.int64())])
    both = {"t": s, "u": pa.schema([("a", pa.int64()), ("z", pa.string())])}
    cheap = {"t": ["a"], "u": ["a"]}
    assert columns_read("select s.x, \"s.y\" from t", {"t": s}, cheap) == {"t": ["s", "s.y"]}
    assert columns_read("select b from t where a > 1", {"t": s}, cheap) == {"t": ["a", "b"]}
    assert columns_read("select * from t", {"t": s}, cheap) == {"t": ["a", "b", "s", "s.y"]}
    assert columns_read("select t.b, u.z from t join u using (a)", both, cheap) == {"t": ["a", "b"], "u": ["a", "z"]}
    assert columns_read("select x.b, y.a from t x join t y on x.a = y.a + 1", {"t": s}, cheap) == {"t": ["a", "b"]}


def test_mistakes_are_plan_errors_before_anything_runs(reviews):
    with pytest.raises(PlanError, match="DuckDB cannot check the query"):
        reviews.sql("selec label from self")
    with pytest.raises(PlanError, match="nope"):
        reviews.sql("select * from nope")
    with pytest.raises(ArgumentTypeError, match="must be an inferframe DataFrame, or a Polars or Arrow object"):
        ifr.sql("select * from t", t=[1, 2])  # Arrow and Polars objects are read (issue 35); a list is not
    with pytest.raises(ArgumentTypeError, match="non-empty string"):
        ifr.sql(None, t=reviews)
    with pytest.raises(PlanError, match="at least one DataFrame"):
        ifr.sql("select 1")
    assert CALLS == []


def test_a_name_the_query_repeats_is_made_unique(reviews):
    twice = reviews.sql("select label, label from self order by 1 nulls last")
    assert twice.column_names == ["label", "label_1"]
    assert twice.select("label_1").to_pydict() == {"label_1": ["neg", "pos", "pos", None]}
    assert twice.to_pydict()["label"] == ["neg", "pos", "pos", None]
    assert CALLS == []


def test_a_frame_read_twice_is_computed_once(reviews):
    pairs = reviews.sql("select x.loud, y.label from self x join self y on x.label = y.label "
                        "where x.text < y.text order by 1")
    assert pairs.to_pydict() == {"loud": ["FINE"], "label": ["pos"]}
    assert sorted(c for c in CALLS if c) == ["bad", "fine", "good"]


def test_an_error_of_the_plan_is_raised_as_itself():
    @ifr.func(return_dtype=ifr.DataType.int64())
    def broken(x: int) -> int:
        raise RuntimeError("no luck")

    df = ifr.from_pydict({"a": [1, 2]}).with_column("b", broken(col("a")))
    with pytest.raises(ifr.UDFError, match="no luck"):
        df.sql("select sum(b) from self").to_pydict()
