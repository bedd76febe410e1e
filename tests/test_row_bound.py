"""plan.row_bound: the most rows each physical operator can give, from the plan alone (the Ray runner sizes AI stages by it)."""

import pyarrow as pa

import inferframe as ifr
from inferframe import col
from inferframe.plan.physical import plan_physical
from inferframe.plan.row_bound import rows_at_most


def _bound(df) -> int | None:
    return rows_at_most(plan_physical(df._plan))


def test_in_memory_rows_are_kept_by_filters_and_sorts_and_cut_by_a_limit():
    df = ifr.from_pydict({"a": [3, 1, 2, None], "b": ["x", "y", "x", "z"]})
    assert _bound(df) == 4
    assert _bound(df.where(col("a") > 1).sort("a")) == 4
    assert _bound(df.limit(2)) == 2 and _bound(df.limit(9)) == 4
    assert _bound(df.distinct("b")) == 4


def test_a_whole_table_aggregate_of_no_rows_is_one_row():
    empty = ifr.from_arrow(pa.table({"a": pa.array([], pa.int64())}))
    assert _bound(empty) == 0
    agg = empty.agg(ifr.col("a").count().alias("n"))
    assert _bound(agg) == 1 and agg.to_pydict() == {"n": [0]}


def test_joins_bound_by_both_sides_and_semi_by_the_left():
    left = ifr.from_pydict({"k": [1, 1, 2]})
    right = ifr.from_pydict({"k": [1, 1], "v": [10, 20]})
    inner = left.join(right, on="k")
    assert _bound(inner) == 6 and len(inner.to_pydict()["k"]) <= 6
    assert _bound(left.join(right, on="k", how="semi")) == 3
    assert _bound(left.join(right, on="k", how="left")) == 6


def test_explode_and_file_sources_are_unknown(tmp_path):
    import pyarrow.parquet as pq

    assert _bound(ifr.from_pydict({"a": [[1, 2, 3]]}).explode("a")) is None
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "t.parquet")
    assert _bound(ifr.read_parquet(str(tmp_path / "t.parquet"))) is None
    assert _bound(ifr.read_parquet(str(tmp_path / "t.parquet")).limit(1)) == 1
