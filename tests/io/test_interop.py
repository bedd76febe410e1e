"""polars, DuckDB, Hugging Face datasets and LanceDB, both ways: nulls, structs from structured outputs, embeddings
(fixed-size lists) and the ``_error`` column of rows whose AI call failed all survive.

The AI columns come from the project's OpenAI-compatible simulator: a fail rule makes the row holding "BAD"
fail (HTTP 400), so its value is null and its ``<name>_error`` holds why.
"""

from __future__ import annotations

import sys

import datasets
import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.errors import ArgumentTypeError, PlanError
from inferframe.functions import embed_text, prompt
from inferframe.simulator import Simulator, SimulatorConfig

RECORD = {"type": "object", "properties": {"n": {"type": "integer"}, "tag": {"type": "string"}},
          "required": ["n", "tag"], "additionalProperties": False}
TEXTS = ["row 0 about cats", "row 1 BAD", None, "row 3 about rain"]
CALLS: list = []


@ifr.func(return_dtype=ifr.DataType.string())
def shout(text: str) -> str:
    CALLS.append(text)
    return None if text is None else text.upper()


@pytest.fixture(scope="module")
def sim():
    with Simulator(SimulatorConfig()) as s:
        s.configure(fail_rules=[{"match": "BAD", "status": 400, "message": "BAD row refused"}])
        yield s


@pytest.fixture
def ai(sim):
    """A lazy frame with a structured output, an embedding and a row that fails both."""
    api = {"provider": "openai", "base_url": sim.base_url, "api_key": "k", "cache": "off", "max_retries": 0}
    return (ifr.from_pydict({"id": [0, 1, 2, 3], "t": TEXTS})
            .with_column("rec", prompt(col("t"), model="gpt-5-mini", return_format=RECORD, **api))
            .with_column("v", embed_text(col("t"), dimensions=4, **api)))


@pytest.fixture
def expected(ai):
    return ai.to_pylist()


@pytest.fixture(autouse=True)
def _calls():
    CALLS.clear()


def check_rows(rows: list[dict], expected: list[dict]) -> None:
    assert rows == expected
    bad = rows[1]
    assert bad["rec"] is None and bad["v"] is None
    assert bad["rec_error"]["kind"] == "bad_request" and "BAD row refused" in bad["rec_error"]["message"]
    assert bad["v_error"]["kind"] == "bad_request"
    assert rows[2]["t"] is None and rows[2]["rec_error"] is None
    assert set(rows[0]["rec"]) == {"n", "tag"} and len(rows[0]["v"]) == 4


def check_types(schema: pa.Schema) -> None:
    assert pa.types.is_struct(schema.field("rec").type) and schema.field("rec").type.names == ["n", "tag"]
    assert schema.field("v").type == pa.list_(pa.float32(), 4)
    assert pa.types.is_struct(schema.field("rec_error").type) and "kind" in schema.field("rec_error").type.names


def test_the_ai_frame_holds_what_the_tests_check(expected):
    check_rows(expected, expected)


# --- polars ----------------------------------------------------------------------------------------


def test_polars_both_ways(ai, expected):
    frame = pl.DataFrame(ai)  # through __arrow_c_stream__
    assert isinstance(frame.schema["rec"], pl.Struct) and frame.schema["v"] == pl.Array(pl.Float32, 4)
    assert frame["rec_error"].struct.field("kind").to_list() == [None, "bad_request", None, None]
    back = ifr.from_polars(frame)
    check_types(back.schema().to_arrow())
    check_rows(back.to_pylist(), expected)
    check_rows(ifr.from_polars(ai.to_polars()).to_pylist(), expected)  # a LazyFrame of a LazyFrame
    check_rows(ai.to_polars(lazy=False).to_dicts(), expected)


def test_to_polars_pushes_columns_and_limits_into_the_plan():
    n = 5000
    df = ifr.from_pydict({"id": list(range(n)), "t": [f"t{i}" for i in range(n)]}).with_column("up", shout(col("t")))
    lf = df.to_polars()
    assert lf.select(pl.col("id").sum()).collect().item() == sum(range(n))
    assert CALLS == []  # the AI column was not read, so never computed
    assert lf.head(3).collect()["up"].to_list() == ["T0", "T1", "T2"]
    assert len(CALLS) < n
    CALLS.clear()
    out = lf.filter(pl.col("id") >= n - 2).select("up").collect()
    assert out["up"].to_list() == [f"T{n - 2}", f"T{n - 1}"]
    assert lf.collect().height == n


def test_from_polars_lazyframe_is_read_each_run_with_the_plans_columns():
    lazy = pl.LazyFrame({"a": [1, None, 3], "b": ["x", "y", None], "^odd$": [1, 2, 3]})
    df = ifr.from_polars(lazy)
    assert "ArrowStream polars.LazyFrame" in df.explain()
    assert df.select("b").to_pydict() == df.select("b").to_pydict() == {"b": ["x", "y", None]}
    assert df.select("^odd$").to_pydict() == {"^odd$": [1, 2, 3]}  # a name polars would read as a pattern
    assert ifr.from_polars(pl.Series("s", [1, 2])).to_pydict() == {"s": [1, 2]}
    with pytest.raises(ArgumentTypeError, match="polars DataFrame, LazyFrame or Series"):
        ifr.from_polars({"a": [1]})


def test_polars_strings_and_images_cross_as_types_each_side_knows():
    df = ifr.from_polars(pl.DataFrame({"s": ["ab", None]}))
    assert df.schema().to_arrow().field("s").type == pa.string()
    assert df.with_column("n", col("s").str.length()).to_pydict()["n"] == [2, None]
    image = ifr.DataType.image().to_arrow()
    images = ifr.from_arrow(pa.table({"img": pa.ExtensionArray.from_storage(image, pa.array([b"\x89PNG", None]))}))
    assert images.to_polars().collect()["img"].to_list() == [b"\x89PNG", None]


# --- DuckDB ----------------------------------------------------------------------------------------


def test_duckdb_both_ways(ai, expected):
    out = duckdb.sql("select * from ai order by id").fetchall()  # DuckDB finds the DataFrame by its name
    assert [row[0] for row in out] == [0, 1, 2, 3]
    counts = duckdb.sql("select rec_error.kind as kind, count(*) as n from ai group by all order by all").fetchall()
    assert counts == [("bad_request", 1), (None, 3)]
    rows = pa.table(ai)
    relation = duckdb.sql("select * from rows order by id")
    check_types(pa.table(relation).schema)
    back = ifr.from_duckdb(relation)
    check_rows(back.to_pylist(), expected)


def test_from_duckdb_queries_again_each_run():
    con = duckdb.connect()
    con.execute("create table t as select 1 as a, 'x' as b")
    df = ifr.from_duckdb(con.table("t"))
    assert df.to_pydict() == {"a": [1], "b": ["x"]}
    con.execute("insert into t values (2, null)")
    assert df.select("b").to_pydict() == {"b": ["x", None]}
    with pytest.raises(ArgumentTypeError, match="DuckDB relation"):
        ifr.from_duckdb("select 1")


# --- Hugging Face datasets -------------------------------------------------------------------------


def test_huggingface_both_ways(ai, expected):
    ds = ai.to_huggingface()
    assert isinstance(ds, datasets.Dataset) and ds.num_rows == 4
    assert ds.features["v"].length == 4
    assert ds[1]["rec_error"]["kind"] == "bad_request"
    back = ifr.from_huggingface(ds)
    check_types(back.schema().to_arrow())
    check_rows(back.to_pylist(), expected)


def test_huggingface_iterable_both_ways(ai, expected):
    stream = ai.to_huggingface(streaming=True)
    assert isinstance(stream, datasets.IterableDataset)
    assert [row["id"] for row in stream] == [0, 1, 2, 3]
    back = ifr.from_huggingface(stream)
    check_rows(back.to_pylist(), expected)
    assert back.select("t").to_pydict() == {"t": TEXTS}


def test_huggingface_by_name_from_local_files(tmp_path):
    path = tmp_path / "part.parquet"
    pq.write_table(pa.table({"text": ["a", None, "c"], "label": [0, 1, None]}), path)
    df = ifr.from_huggingface("parquet", split="train", data_files=str(path))
    assert df.to_pydict() == {"text": ["a", None, "c"], "label": [0, 1, None]}
    streamed = ifr.from_huggingface("parquet", split="train", data_files=str(path), streaming=True)
    assert "datasets.IterableDataset" in streamed.explain()
    assert streamed.select("label").to_pydict() == {"label": [0, 1, None]}
    splits = datasets.load_dataset("parquet", data_files={"train": str(path), "test": str(path)})
    with pytest.raises(PlanError, match=r"needs split=.*'test', 'train'"):
        ifr.from_huggingface(splits)
    assert ifr.from_huggingface(splits, split="test").count_rows() == 3
    with pytest.raises(PlanError, match="one split already"):
        ifr.from_huggingface(splits["test"], split="test")


def test_a_huggingface_dataset_keeps_its_row_selection():
    ds = datasets.Dataset.from_dict({"a": [0, 1, 2, 3]}).select([3, 1])
    assert ifr.from_huggingface(ds).to_pydict() == {"a": [3, 1]}


# --- LanceDB --------------------------------------------------------------------------------------


def test_lance_both_ways(ai, expected, tmp_path):
    ai.write_lance(str(tmp_path), table="items")
    back = ifr.read_lance(str(tmp_path), "items")
    check_types(back.schema().to_arrow())
    check_rows(back.sort("id").to_pylist(), expected)
    assert back.count_rows() == 4
    with pytest.raises(PlanError, match="no table 'nope'"):
        ifr.read_lance(str(tmp_path), "nope")


# --- optional packages ----------------------------------------------------------------------------


@pytest.mark.parametrize("module, extra, call", [
    ("polars", "polars", lambda: ifr.from_pydict({"a": [1]}).to_polars()),
    ("polars", "polars", lambda: ifr.from_polars(None)),
    ("duckdb", "duckdb", lambda: ifr.from_duckdb(None)),
    ("duckdb", "sql", lambda: ifr.from_pydict({"a": [1]}).sql("select a from self")),
    ("datasets", "hf", lambda: ifr.from_huggingface("parquet")),
    ("datasets", "hf", lambda: ifr.from_pydict({"a": [1]}).to_huggingface()),
])
def test_a_missing_optional_package_names_its_extra(monkeypatch, module, extra, call):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(ImportError, match=rf'pip install "inferframe\[{extra}\]"'):
        call()


def test_from_arrow_takes_each_librarys_objects_through_their_own_path():
    lazy = pl.LazyFrame({"a": [1, None]})
    assert ifr.from_arrow(lazy).to_pydict() == {"a": [1, None]}
    assert "polars.LazyFrame" in ifr.from_arrow(lazy).explain()
    assert ifr.from_arrow(duckdb.sql("select 1 as a, 'x' as b")).select("b").to_pydict() == {"b": ["x"]}
    assert ifr.from_arrow(datasets.Dataset.from_dict({"a": [1, None]})).to_pydict() == {"a": [1, None]}

