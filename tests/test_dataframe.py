import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import col, lit


@pytest.fixture
def people():
    return ifr.from_pydict({
        "name": ["ann", "bob", "cy", "dee", "eve"],
        "dept": ["x", "y", "x", None, "y"],
        "age": [30, 25, 41, 35, None],
    })


def test_lazy_and_immutable(people):
    df2 = people.with_column("age2", col("age") * 2)
    assert people.column_names == ["name", "dept", "age"]
    assert df2.column_names == ["name", "dept", "age", "age2"]
    assert df2._result is None  # nothing ran


def test_select_exclude_with_columns(people):
    assert people.select("name", (col("age") + 1).alias("next")).column_names == ["name", "next"]
    assert people.exclude("dept").column_names == ["name", "age"]
    out = people.with_columns({"age": col("age") + 1, "one": lit(1)}).to_pydict()
    assert out["age"] == [31, 26, 42, 36, None]
    assert out["one"] == [1] * 5
    assert people["age"].name() == "age"


def test_where_limit_sort(people):
    assert people.where(col("age") > 29).select("name").to_pydict() == {"name": ["ann", "cy", "dee"]}
    assert people.limit(2).count_rows() == 2
    assert people.sort("age", desc=True).to_pydict()["name"] == ["cy", "dee", "ann", "bob", "eve"]
    assert people.sort(["dept", "name"], desc=[True, False]).to_pydict()["name"] == ["bob", "eve", "ann", "cy", "dee"]
    assert people.sort(col("name").str.length()).to_pydict()["name"][:2] == ["cy", "ann"]


def test_distinct_explode_concat(people):
    assert people.select("dept").distinct().count_rows() == 3
    df = ifr.from_pydict({"k": [1, 2, 3], "v": [["a", "b"], [], None]})
    assert df.explode("v").to_pydict() == {"k": [1, 1, 2, 3], "v": ["a", "b", None, None]}
    both = people.concat(people)
    assert both.count_rows() == 10


def test_groupby_agg(people):
    out = people.groupby("dept").agg(
        col("age").sum().alias("total"), col("age").mean().alias("avg"), col("name").count().alias("n"),
        col("name").agg_list().alias("names"),
    ).to_pydict()
    assert out["dept"] == ["x", "y", None]
    assert out["total"] == [71, 25, 35]
    assert out["avg"] == [35.5, 25.0, 35.0]
    assert out["n"] == [2, 2, 1]
    assert out["names"] == [["ann", "cy"], ["bob", "eve"], ["dee"]]
    whole = people.agg(col("age").max().alias("oldest"), col("age").count())
    assert whole.to_pydict() == {"oldest": [41], "age": [4]}


def test_join(people):
    depts = ifr.from_pydict({"dept": ["x", "y", "z"], "floor": [1, 2, 3]})
    out = people.join(depts, on="dept").sort("name").to_pydict()
    assert out["name"] == ["ann", "bob", "cy", "eve"]
    assert out["floor"] == [1, 2, 1, 2]
    left = people.join(depts, on="dept", how="left").sort("name").to_pydict()
    assert left["floor"] == [1, 2, 1, None, 2]
    clash = people.join(people.select("name", "age"), on="name")
    assert clash.column_names == ["name", "dept", "age", "right.age"]
    anti = people.join(depts.where(col("dept") == "x"), on="dept", how="anti")
    assert sorted(anti.to_pydict()["name"]) == ["bob", "dee", "eve"]
    with pytest.raises(ifr.ExpressionTypeError, match="different types"):
        people.join(ifr.from_pydict({"dept": [1]}), on="dept")


def test_into_batches_and_repartition(people):
    sizes = [b.num_rows for b in ifr.from_pydict({"x": list(range(10))}).into_batches(3).iter_batches()]
    assert sizes == [3, 3, 3, 1]
    parts = [b.num_rows for b in ifr.from_pydict({"x": list(range(10))}).repartition(2).iter_batches()]
    assert parts == [5, 5]
    assert sorted(people.repartition(3, "dept").to_pydict()["name"]) == sorted(people.to_pydict()["name"])


def test_results(people):
    assert people.to_pylist()[0] == {"name": "ann", "dept": "x", "age": 30}
    assert list(people.iter_rows())[1]["name"] == "bob"
    assert people.to_arrow().num_rows == 5
    assert people.to_pandas().shape == (5, 3)
    c = people.collect()
    assert c._result is not None and c.count_rows() == 5 and len(c) == 5
    assert str(people.schema()) == "name: string, dept: string, age: int64"


def test_show_truncates_and_reports(people, capsys):
    long = ifr.from_pydict({"t": ["x" * 200], "n": [1]})
    long.show(max_width=20)
    out = capsys.readouterr().out
    assert "xxxxxxxxxxxxxxxxxxx…" in out and "x" * 21 not in out
    assert "string" in out and "int64" in out
    people.show(2)
    out = capsys.readouterr().out
    assert "ann" in out and "bob" in out and "cy" not in out
    assert "Showing first 2 rows" in out
    html = people.collect()._repr_html_()
    assert "<table" in html and "ann" in html


def test_explain_shows_before_and_after(people, capsys):
    text = people.with_column("a2", col("age") * 2).where(col("age") > 1).limit(3).explain()
    logical, optimized = text.split("== Optimized plan ==")
    assert logical.index("Limit") < logical.index("Filter") < logical.index("Project")
    assert "InMemory" in optimized and "limit" not in logical.lower().split("inmemory")[1]


def test_from_constructors():
    import pandas as pd

    assert ifr.from_pylist([{"a": 1}, {"a": 2}]).to_pydict() == {"a": [1, 2]}
    assert ifr.from_arrow(pa.table({"a": [1]})).to_pydict() == {"a": [1]}
    assert ifr.from_pandas(pd.DataFrame({"a": [1, 2]})).count_rows() == 2
    with pytest.raises(ifr.PlanError, match="different lengths"):
        ifr.from_pydict({"a": [1, 2], "b": [1]})


def test_duplicate_output_name_is_plan_error(people):
    with pytest.raises(ifr.PlanError, match="both named 'age'"):
        people.select("age", (col("age") + 1))


def test_show_prints_vectors_short_with_their_length(capsys):
    import numpy as np

    v = np.linspace(-1, 1, 384, dtype=np.float32)
    df = ifr.from_pydict({"v": [v.tolist()], "short": [[1.5, 2.0]]})
    df.show()
    out = capsys.readouterr().out
    assert "[-1.0000, -0.9948, …] (384)" in out and "[1.5, 2.0]" in out


def test_agg_list_over_the_whole_table_and_over_no_rows():
    df = ifr.from_pydict({"v": [1, 2, 3], "w": [1.0, 2.0, 4.0]})
    assert df.agg(col("v").agg_list(), col("w").sum()).to_pydict() == {"v": [[1, 2, 3]], "w": [7.0]}
    empty = df.where(col("v") > 5).agg(col("v").agg_list(), col("w").sum(), col("v").count().alias("n"))
    assert empty.to_pydict() == {"v": [[]], "w": [None], "n": [0]}


def test_a_right_join_on_differently_named_keys_keeps_the_left_key_name():
    left = ifr.from_pydict({"id": [1, 2, 3], "k": ["a", "b", "c"]})
    right = ifr.from_pydict({"rid": [2, 3, 5], "w": ["x", "y", "z"]})
    out = left.join(right, left_on="id", right_on="rid", how="right").sort("id").to_pydict()
    assert out == {"id": [2, 3, 5], "k": ["b", "c", None], "w": ["x", "y", "z"]}
