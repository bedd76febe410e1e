import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.plan import logical as lp
from inferframe.plan.optimizer import optimize


@pytest.fixture
def parquet_dir(tmp_path):
    n = 10_000
    table = pa.table({"id": list(range(n)), "grp": [i % 7 for i in range(n)], "text": [f"row {i}" for i in range(n)]})
    pq.write_table(table, tmp_path / "data.parquet", row_group_size=1000)
    return str(tmp_path / "data.parquet")


def _source(plan):
    while not isinstance(plan, lp.Source):
        plan = plan.children()[0]
    return plan


def test_projection_and_filter_pushdown_into_parquet(parquet_dir):
    df = ifr.read_parquet(parquet_dir).where(col("id") < 1500).select("text")
    src = _source(optimize(df._plan))
    assert src.columns == ("text",)  # the filter column is read by the scan filter, not projected
    assert src.filter is not None
    assert df.count_rows() == 1500
    assert df.to_pydict()["text"][:2] == ["row 0", "row 1"]


def test_limit_pushdown_reaches_scan_and_skips_udf_work(parquet_dir):
    calls = []

    @ifr.func
    def tag(s: str) -> str:
        calls.append(s)
        return s + "!"

    df = ifr.read_parquet(parquet_dir).with_column("t", tag(col("text"))).limit(5)
    src = _source(optimize(df._plan))
    assert src.limit == 5
    assert df.to_pydict()["t"] == [f"row {i}!" for i in range(5)]
    assert len(calls) == 5


def test_filter_moves_below_udf_projection():
    calls = []

    @ifr.func
    def tag(x: int) -> int:
        calls.append(x)
        return x

    df = ifr.from_pydict({"x": list(range(100))}).with_column("y", tag(col("x"))).where(col("x") < 10)
    plan = optimize(df._plan)
    assert isinstance(plan, lp.Project) and isinstance(plan.input, lp.Filter)
    assert df.to_pydict()["y"] == list(range(10))
    assert len(calls) == 10


def test_adjacent_projections_fuse():
    df = ifr.from_pydict({"a": [1, 2]}).with_column("b", col("a") + 1).with_column("c", col("b") * 2).select("c")
    plan = optimize(df._plan)
    assert isinstance(plan, lp.Project) and isinstance(plan.input, lp.Source)
    assert df.to_pydict() == {"c": [4, 6]}


def test_udf_used_twice_is_not_duplicated_by_fusion():
    calls = []

    @ifr.func
    def tag(x: int) -> int:
        calls.append(x)
        return x

    df = ifr.from_pydict({"x": [1, 2, 3]}).with_column("y", tag(col("x"))).select((col("y") + col("y")).alias("z"))
    assert df.to_pydict() == {"z": [2, 4, 6]}
    assert len(calls) == 3


def test_unused_udf_column_is_pruned():
    calls = []

    @ifr.func
    def tag(x: int) -> int:
        calls.append(x)
        return x

    df = ifr.from_pydict({"x": [1, 2, 3]}).with_column("y", tag(col("x"))).select("x")
    assert df.to_pydict() == {"x": [1, 2, 3]}
    assert calls == []


def test_explain_reports_pushdowns(parquet_dir, capsys):
    text = ifr.read_parquet(parquet_dir).where(col("grp") == 3).select("id").limit(4).explain()
    optimized = text.split("== Optimized plan ==")[1]
    assert "filter=eq(col(grp), lit(3))" in optimized and "limit=4" in optimized
    assert "columns=[id]" in optimized


@pytest.mark.parametrize("how", ["inner", "left", "right", "outer", "semi", "anti"])
def test_filters_move_below_a_join_only_where_the_result_stays_the_same(how):
    import random

    import inferframe as ifr
    from inferframe import col

    rng = random.Random(7)
    left = ifr.from_pydict({"k": [rng.randint(0, 5) for _ in range(40)], "a": [rng.randint(0, 9) for _ in range(40)]})
    right = ifr.from_pydict({"k": [rng.randint(0, 7) for _ in range(30)], "a": [rng.randint(0, 9) for _ in range(30)],
                             "z": [rng.randint(0, 9) for _ in range(30)]})
    calls = []

    @ifr.func(return_dtype=ifr.DataType.bool())
    def odd(x):
        calls.append(x)
        return x is not None and x % 2 == 1

    joined = left.join(right, on="k", how=how)
    whole = joined.to_pylist()
    if how in ("semi", "anti"):
        q = joined.where((col("a") > 2) & odd(col("a")))
        want = [r for r in whole if r["a"] is not None and r["a"] > 2 and r["a"] % 2 == 1]
    else:
        q = joined.where((col("a") > 2) & odd(col("a")) & (col("z") < 6) & (col("right.a") != col("a")))
        want = [r for r in whole if None not in (r["a"], r["z"], r["right.a"]) and r["a"] > 2 and r["a"] % 2 == 1
                and r["z"] < 6 and r["right.a"] != r["a"]]
    key = lambda r: tuple((k, -1 if v is None else v) for k, v in sorted(r.items()))
    calls.clear()
    assert sorted(q.to_pylist(), key=key) == sorted(want, key=key)
    if how in ("inner", "left", "semi", "anti"):  # the UDF ran below the join, once per left row with a > 2
        assert len(calls) == sum(1 for a in left.to_pydict()["a"] if a > 2)
