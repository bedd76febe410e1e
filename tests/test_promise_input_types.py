"""One rule for input types (issue 41, item 7): text is text, in every AI function and in SQL.

Before, ``prompt(col("stars"))`` on an int column sent "1", "3", "5" as prompts (and the
OpenAI ``embed_text``, ``classify_text``, ``sem_*`` templates did the same), while SQL
``ai_complete(stars)`` and the in-process ``embed_text(col("stars"))`` refused it. Now a column
of numbers, booleans, dates, lists or structs where an AI function reads text is a PlanError when
the expression is built, naming the column, its type and the cast to write, and nothing is sent.
"""

import datetime

import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import DataType, col, lit
from inferframe.errors import PlanError
from inferframe.functions import (
    classify_text, embed_text, format, prompt, sem_agg, sem_dedup, sem_filter, sem_join, sem_predicate, sem_rank,
    sem_topk,
)
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-test-input-types"
PY_CAST = "col('stars').cast(DataType.string())"
SQL_CAST = "CAST(stars AS VARCHAR)"


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(require_api_key=KEY)) as s:
        yield s


def rows():
    return ifr.from_pydict({"id": [1, 2, 3], "stars": [1, 3, 5],
                            "review": ["Broke in a day.", "It is fine.", "Loved it."]})


def kw(sim, model="gpt-5-mini"):
    return dict(provider="openai", base_url=sim.base_url, api_key=KEY, model=model)


# Each case builds one AI function over the int column "stars", as a user writes it.
PYTHON = {
    "prompt": lambda df, s: df.with_column("a", prompt(col("stars"), **kw(s))),
    "prompt_message_list": lambda df, s: df.with_column("a", prompt([lit("Rating: "), col("stars")], **kw(s))),
    "prompt_extract": lambda df, s: df.with_column(
        "a", prompt(col("stars"), {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
                                   "additionalProperties": False}, **kw(s))),
    "classify_text_generate": lambda df, s: df.with_column(
        "a", classify_text(col("stars"), ["good", "bad"], method="generate", **kw(s))),
    "classify_text_embedding": lambda df, s: df.with_column(
        "a", classify_text(col("stars"), ["good", "bad"], method="embedding")),
    "embed_text_openai": lambda df, s: df.with_column(
        "v", embed_text(col("stars"), **kw(s, "text-embedding-3-small"))),
    "embed_text_in_process": lambda df, s: df.with_column("v", embed_text(col("stars"))),
    "sem_predicate": lambda df, s: df.with_column("ok", sem_predicate("{stars} is a high rating", **kw(s))),
    "sem_filter": lambda df, s: sem_filter(df, "{stars} is a high rating", **kw(s)),
    "sem_topk": lambda df, s: sem_topk(df, "the rating {stars} is high", 1, **kw(s)),
    "sem_rank": lambda df, s: sem_rank(df, "the rating {stars} is high", **kw(s)),
    "sem_agg": lambda df, s: sem_agg(df, "Sum up the ratings {stars}", **kw(s)),
    "sem_dedup": lambda df, s: sem_dedup(df, "{stars} are the same rating", **kw(s)),
    "sem_join": lambda df, s: sem_join(df, df, "{stars:left} and {review:right} agree", **kw(s)),
}

SQL = {
    "ai_complete": "select ai_complete(stars, {o}) as a from t",
    "ai_query": "select ai_query('gpt-5-mini', stars, {p}) as a from t",
    "ai_classify": "select ai_classify(stars, ['good', 'bad'], {o}) as a from t",
    "ai_extract": "select ai_extract(stars, 'n int', {o}) as a from t",
    "ai_filter": "select id from t where ai_filter(stars, 'is high', {o})",
    "ai_score": "select ai_score(stars, 'is high', {o}) as a from t",
    "ai_embed": "select ai_embed(stars) as a from t",
    "ai_similarity": "select ai_similarity(stars, review) as a from t",
    "ai_agg": "select id, ai_agg(stars, 'Sum up', {o}) as a from t group by id",
}


def sql_options(sim, model=True):
    return f"provider => 'openai', base_url => '{sim.base_url}'" + (", model => 'gpt-5-mini'" if model else "")


@pytest.mark.parametrize("case", sorted(PYTHON))
def test_promise_one_input_rule_holds_for_every_ai_function(sim, case):
    """An int column where text is read: a PlanError naming the column, its type and the cast; no request."""
    with pytest.raises(PlanError) as e:
        PYTHON[case](rows(), sim).collect()
    message = str(e.value)
    assert "'stars'" in message and "int64" in message and "must be" in message, message
    assert PY_CAST in message, message
    assert "never turned into text silently" in message and "No request was sent" in message
    assert sim.stats()["total_requests"] == 0


@pytest.mark.parametrize("case", sorted(SQL))
def test_promise_the_sql_functions_keep_the_same_rule(sim, monkeypatch, case):
    """SQL's ai_* functions: the same rule, with SQL's cast (CAST(stars AS VARCHAR)) in the message."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    query = SQL[case].format(o=sql_options(sim), p=sql_options(sim, model=False))
    with pytest.raises(PlanError) as e:
        ifr.sql(query, t=rows()).collect()
    message = str(e.value)
    assert message.startswith("sql(): ") and "must be text (VARCHAR), got int64 from 'stars'" in message, message
    assert SQL_CAST in message and "never turned into text silently" in message, message
    assert sim.stats()["total_requests"] == 0


@pytest.mark.parametrize("dtype, value", [
    (DataType.float64(), 4.5), (DataType.bool(), True), (DataType.date(), datetime.date(2024, 5, 1)),
])
def test_promise_numbers_booleans_and_dates_are_never_turned_into_text_silently(sim, dtype, value):
    df = ifr.from_pydict({"x": [value]}).with_column("x", col("x").cast(dtype))
    with pytest.raises(PlanError, match=r"input 'x' must be text, got .*col\('x'\)\.cast\(DataType\.string\(\)\)"):
        df.with_column("a", prompt(col("x"), **kw(sim)))
    assert sim.stats()["total_requests"] == 0


def test_promise_a_list_column_is_refused_with_a_fix_that_works(sim):
    """A list has no cast to text in Arrow: the message says to write it out, not to cast."""
    df = ifr.from_pydict({"tags": [["a", "b"]]})
    with pytest.raises(PlanError, match=r"input 'tags' must be text, got list<item: string>.*Turn it into text") as e:
        df.with_column("a", prompt(col("tags"), **kw(sim)))
    assert "cast(DataType.string())" not in str(e.value)


def test_promise_the_cast_the_error_names_runs(sim):
    """The fixes the error gives are what a user then writes: the cast, or format() into a sentence."""
    df = rows()
    cast = df.with_column("a", prompt(col("stars").cast(DataType.string()), **kw(sim))).to_pydict()
    assert cast["a"] == ["sim answer: 1", "sim answer: 3", "sim answer: 5"]
    sentence = df.with_column("a", prompt(format("Rated {} stars", col("stars")), **kw(sim))).to_pydict()
    assert sentence["a"] == [f"sim answer: Rated {n} stars" for n in (1, 3, 5)]
    assert sim.stats()["total_requests"] == 6
    templated = df.with_column("stars", col("stars").cast(DataType.string()))
    sem_filter(templated, "{stars} is a high rating", **kw(sim)).collect()  # the template's cast, before it
    assert sim.stats()["total_requests"] >= 6 + 3  # every row asked (and the calibration's statements)


def test_promise_in_sql_cast_stars_as_varchar_runs(sim, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    out = ifr.sql(f"select id, ai_complete(CAST(stars AS VARCHAR), {sql_options(sim)}) as a, "
                  f"ai_complete('Rated ' || stars, {sql_options(sim)}) as b from t order by id", t=rows()).to_pydict()
    assert out["a"] == ["sim answer: 1", "sim answer: 3", "sim answer: 5"]
    assert out["b"] == [f"sim answer: Rated {n}" for n in (1, 3, 5)]


def test_promise_text_of_every_width_and_an_all_null_column_are_text(sim):
    """Dictionary-encoded and large strings are text; an all-null column gives nulls and sends nothing."""
    df = ifr.from_pydict({"q": ["hi"]})
    assert "a" in df.with_column("a", prompt(col("q").cast(pa.large_string()), **kw(sim))).column_names
    labels = df.with_column("l", classify_text(col("q"), ["x", "y"], method="generate", **kw(sim)))
    again = labels.with_column("a", prompt(col("l"), **kw(sim)))  # a classify column is dictionary-encoded text
    assert "a" in again.column_names
    nulls = ifr.from_pydict({"q": [None, None]}).with_column("a", prompt(col("q"), **kw(sim))).to_pydict()
    assert nulls["a"] == [None, None] and nulls["a_error"] == [None, None]
    assert sim.stats()["total_requests"] == 0


def test_promise_in_sql_text_built_with_pipes_is_text_in_a_join_too(sim, monkeypatch):
    """``a.x || ' has ' || b.m`` is SQL's own conversion to text: the join reads "3", the query gets 3 back."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    a = ifr.from_pydict({"x": ["good", "bad"], "n": [1, 2]})
    b = ifr.from_pydict({"y": ["fine", "poor"], "m": [3, 4]})
    out = ifr.sql(f"select * from a join b on ai_filter(a.x || ' has ' || b.m, {sql_options(sim)}) order by n, m",
                  a=a, b=b)
    assert out.schema()["m"] == DataType.int64()
    rows_out = out.to_pydict()
    assert set(rows_out) == {"x", "n", "y", "m"} and all(isinstance(m, int) for m in rows_out["m"])
    assert sim.stats()["total_requests"] > 0


@pytest.mark.parametrize("command", ["prompt", "embed"])
def test_promise_the_command_line_keeps_the_same_rule_with_its_own_fix(sim, tmp_path, command):
    """``--column stars`` on a number column is refused before any request, with a fix the command line can
    write (before: the Python cast ``col('stars').cast(...)``, which no shell user can type)."""
    from typer.testing import CliRunner

    from inferframe import cli

    data = tmp_path / "r.csv"
    data.write_text("stars,review\n5,Great\n1,Broke\n")
    args = [command, str(data), "--column", "stars", "--provider", "openai", "--model", "gpt-5-mini",
            "--base-url", sim.base_url]
    if command == "embed":
        args[args.index("gpt-5-mini")] = "text-embedding-3-small"
        args += ["--out", str(tmp_path / "out")]
    result = CliRunner().invoke(cli.app, args, env={"OPENAI_API_KEY": "sk-test"})
    assert result.exit_code == 2, result.output
    assert "--column 'stars' holds" in result.output and "not text" in result.output
    assert ("--template '{stars}'" if command == "prompt" else "CAST(stars AS VARCHAR)") in result.output
    assert ".cast(DataType" not in result.output
    assert sim.stats()["total_requests"] == 0
