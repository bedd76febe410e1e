"""Property tests: filter, sort, join and groupby agree with pandas on random tables."""

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

import inferframe as ifr
from inferframe import col

ints = st.one_of(st.none(), st.integers(-5, 5))
rows = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), ints, st.floats(-1e6, 1e6, allow_nan=False)), max_size=60)
SETTINGS = settings(max_examples=60, deadline=None)


def frame(data):
    return {"k": [r[0] for r in data], "i": [r[1] for r in data], "f": [r[2] for r in data]}


def pdframe(data):
    return pd.DataFrame(frame(data)).astype({"i": "Int64"})


@SETTINGS
@given(rows, st.integers(-5, 5), st.integers(1, 9))
def test_filter_matches_pandas(data, threshold, batch):
    got = ifr.from_pydict(frame(data)).into_batches(batch).where((col("i") > threshold) & (col("k") != "c")).to_pydict()
    p = pdframe(data)
    want = p[(p["i"] > threshold).fillna(False) & (p["k"] != "c")]
    assert got["k"] == list(want["k"])
    assert got["i"] == [int(v) for v in want["i"]]


@SETTINGS
@given(rows, st.booleans())
def test_sort_matches_pandas(data, desc):
    got = ifr.from_pydict(frame(data)).sort(["k", "f"], desc=desc).to_pydict()
    want = pdframe(data).sort_values(["k", "f"], ascending=not desc, kind="stable")
    assert got["k"] == list(want["k"])
    assert got["f"] == list(want["f"])


@SETTINGS
@given(rows, rows, st.sampled_from(["inner", "left", "outer"]))
def test_join_matches_pandas(left, right, how):
    l_df = ifr.from_pydict(frame(left)).select("k", "f")
    r_df = ifr.from_pydict(frame(right)).select("k", col("i").alias("ri"))
    got = l_df.join(r_df, on="k", how=how).to_pandas()
    want = pd.merge(pdframe(left)[["k", "f"]], pdframe(right)[["k", "i"]].rename(columns={"i": "ri"}), on="k", how=how)

    def norm(df):
        return sorted((repr(r.k), repr(None if pd.isna(r.f) else float(r.f)), repr(None if pd.isna(r.ri) else int(r.ri))) for r in df.itertuples())

    assert norm(got) == norm(want)


@SETTINGS
@given(rows)
def test_groupby_matches_pandas(data):
    got = ifr.from_pydict(frame(data)).groupby("k").agg(
        col("f").sum().alias("s"), col("i").count().alias("n"), col("f").max().alias("mx"), col("i").mean().alias("m"),
    ).to_pandas().set_index("k")
    p = pdframe(data)
    want = p.groupby("k").agg(s=("f", "sum"), n=("i", "count"), mx=("f", "max"), m=("i", "mean"))
    assert sorted(got.index) == sorted(want.index)
    for k in want.index:
        assert abs(got.loc[k, "s"] - want.loc[k, "s"]) <= 1e-6 * max(1, abs(want.loc[k, "s"]))
        assert got.loc[k, "n"] == want.loc[k, "n"]
        assert got.loc[k, "mx"] == want.loc[k, "mx"]
        if pd.isna(want.loc[k, "m"]):
            assert pd.isna(got.loc[k, "m"])
        else:
            assert abs(got.loc[k, "m"] - want.loc[k, "m"]) < 1e-9


@SETTINGS
@given(rows)
def test_distinct_matches_pandas(data):
    got = ifr.from_pydict(frame(data)).select("k", "i").distinct().to_pandas()
    want = pdframe(data)[["k", "i"]].drop_duplicates()
    assert len(got) == len(want)
    assert list(got["k"]) == list(want["k"])  # first-seen order kept
