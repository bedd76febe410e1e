import datetime

import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import DataType, col, lit
from inferframe.functions import format, unnest


@pytest.fixture
def df():
    return ifr.from_pydict({
        "a": [1, 2, 3, None],
        "b": [1.5, 2.5, None, 4.0],
        "s": ["Hello", "world", None, "foo bar"],
        "tags": [["x", "y"], [], None, ["z"]],
        "st": [{"k": 1, "v": "one"}, {"k": 2, "v": "two"}, None, {"k": 4, "v": "four"}],
    })


def test_arithmetic_and_comparison(df):
    out = df.select(
        (col("a") + 1).alias("p"), (col("a") * col("b")).alias("m"), (col("a") / 2).alias("d"),
        (col("a") // 2).alias("f"), (col("a") % 2).alias("r"), (col("a") > 1).alias("gt"), (-col("a")).alias("n"),
    ).to_pydict()
    assert out["p"] == [2, 3, 4, None]
    assert out["m"] == [1.5, 5.0, None, None]
    assert out["d"] == [0.5, 1.0, 1.5, None]
    assert out["f"] == [0.0, 1.0, 1.0, None]
    assert out["r"] == [1, 0, 1, None]
    assert out["gt"] == [False, True, True, None]
    assert out["n"] == [-1, -2, -3, None]


def test_boolean_null_and_if_else(df):
    out = df.select(
        ((col("a") > 1) & (col("b") < 3)).alias("and_"),
        ((col("a") > 2) | col("a").is_null()).alias("or_"),
        (~(col("a") > 1)).alias("not_"),
        col("a").fill_null(0).alias("filled"),
        (col("a") > 1).if_else(lit("big"), lit("small")).alias("size"),
        col("a").is_in([1, 3]).alias("isin"),
        col("b").not_null().alias("nn"),
    ).to_pydict()
    assert out["and_"] == [False, True, None, False]  # Kleene: null & false is false
    assert out["or_"] == [False, False, True, True]
    assert out["not_"] == [True, False, False, None]
    assert out["filled"] == [1, 2, 3, 0]
    assert out["size"] == ["small", "big", "big", None]
    assert out["isin"] == [True, False, True, False]
    assert out["nn"] == [True, True, False, True]


def test_string_namespace(df):
    out = df.select(
        col("s").str.lower().alias("lower"), col("s").str.upper().alias("upper"),
        col("s").str.length().alias("len"), col("s").str.contains("o").alias("has_o"),
        col("s").str.startswith("Hel").alias("sw"), col("s").str.split(" ").alias("split"),
        col("s").str.replace("o", "0").alias("rep"), col("s").str.concat("!", col("a")).alias("cat"),
    ).to_pydict()
    assert out["lower"] == ["hello", "world", None, "foo bar"]
    assert out["upper"][0] == "HELLO"
    assert out["len"] == [5, 5, None, 7]
    assert out["has_o"] == [True, True, None, True]
    assert out["sw"] == [True, False, None, False]
    assert out["split"] == [["Hello"], ["world"], None, ["foo", "bar"]]
    assert out["rep"] == ["Hell0", "w0rld", None, "f00 bar"]
    assert out["cat"] == ["Hello!1", "world!2", None, None]


def test_format(df):
    out = df.select(format("Answer in {}: {}", lit("French"), col("s")).alias("p")).to_pydict()
    assert out["p"] == ["Answer in French: Hello", "Answer in French: world", None, "Answer in French: foo bar"]
    with pytest.raises(ValueError, match="2 '\\{\\}' placeholders but got 1"):
        format("{} {}", col("s"))


def test_list_and_struct(df):
    out = df.select(
        col("tags").list.get(0).alias("first"), col("tags").list.get(-1).alias("last"),
        col("tags").list.length().alias("n"), col("st").struct.get("v"), col("st")["k"],
    ).to_pydict()
    assert out["first"] == ["x", None, None, "z"]
    assert out["last"] == ["y", None, None, "z"]
    assert out["n"] == [2, 0, None, 1]
    assert out["v"] == ["one", "two", None, "four"]
    assert out["k"] == [1, 2, None, 4]


def test_unnest(df):
    out = df.select("a", unnest(col("st")))
    assert out.column_names == ["a", "k", "v"]
    assert out.to_pydict()["v"] == ["one", "two", None, "four"]


def test_cast_and_types(df):
    out = df.select(col("a").cast(DataType.string()), col("b").cast(DataType.int64()).alias("bi"))
    assert out.schema()["a"] == DataType.string()
    assert out.to_pydict()["a"] == ["1", "2", "3", None]


def test_type_mismatch_raises_at_plan_time(df):
    with pytest.raises(ifr.ExpressionTypeError, match=r"Cannot apply '\+' to \(string, int64\)"):
        df.select(col("s") + 1)
    with pytest.raises(ifr.ExpressionTypeError, match="boolean predicate"):
        df.where(col("a") + 1)
    with pytest.raises(ifr.ExpressionTypeError, match="struct"):
        df.select(col("a").struct.get("x"))


def test_unknown_column_suggests_close_matches(df):
    with pytest.raises(ifr.ColumnNotFoundError) as e:
        df.select(col("tagz"))
    assert "Did you mean 'tags'" in str(e.value)
    assert "Available columns: a, b, s, tags, st" in str(e.value)
    with pytest.raises(ifr.ColumnNotFoundError):
        df["nope"]


def test_datatype_inference():
    from typing import Optional, TypedDict

    class Rec(TypedDict):
        x: int
        y: list[str]

    assert DataType.infer_from_type(str).to_arrow() == pa.string()
    assert DataType.infer_from_type(Optional[float]).to_arrow() == pa.float64()
    assert DataType.infer_from_type(list[int]).to_arrow() == pa.list_(pa.int64())
    assert DataType.infer_from_type(Rec).to_arrow() == pa.struct([("x", pa.int64()), ("y", pa.list_(pa.string()))])
    assert DataType.infer_from_type(datetime.date).to_arrow() == pa.date32()
    assert DataType.embedding(DataType.float32(), 384).to_arrow() == pa.list_(pa.float32(), 384)
    assert DataType.image().is_image() and DataType.file().is_file()
    with pytest.raises(TypeError, match="return_dtype"):
        DataType.infer_from_type(object)
    with pytest.raises(TypeError, match="union"):
        DataType.infer_from_type(int | str)


def test_struct_get_on_a_slice_keeps_the_slice_and_the_parent_nulls():
    import pyarrow as pa

    from inferframe.expressions.evaluate import evaluate

    st = pa.StructArray.from_arrays([pa.array([1, 2, 3, 4]), pa.array(["a", "b", "c", "d"])], names=["k", "v"])
    for arr, want in ((st.slice(1, 2), ["b", "c"]),
                      (pa.StructArray.from_arrays(st.flatten(), names=["k", "v"], mask=pa.array([False, True, False, False])).slice(1, 3),
                       [None, "c", "d"])):
        batch = pa.RecordBatch.from_arrays([arr], names=["st"])
        assert evaluate(col("st").struct.get("v")._node, batch).to_pylist() == want
