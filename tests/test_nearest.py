"""DataFrame.nearest(): exact top-k against a brute-force pure-Python reference, naming, nulls, laziness."""

import math
import os

import numpy as np
import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import DataType, col
from inferframe.execution import topk


def _vectors(m: np.ndarray, fixed: bool = True, dtype=pa.float32()) -> pa.Array:
    t = pa.list_(dtype, m.shape[1]) if fixed else pa.list_(dtype)
    return pa.array([None if r is None else [float(x) for x in r] for r in m], type=t)


def _score(metric: str, q: list, x: list) -> float:
    dot = sum(a * b for a, b in zip(q, x))
    if metric == "dot":
        return dot
    if metric == "l2":
        return math.sqrt(sum((a - b) ** 2 for a, b in zip(q, x)))
    return dot / (math.sqrt(sum(a * a for a in q)) * math.sqrt(sum(b * b for b in x)))


def _brute_force(queries: list, docs: list, k: int, metric: str) -> list[list[tuple[int, float]]]:
    """For each query, [(doc index, score)] best first, in plain Python."""
    out = []
    for q in queries:
        scored = [(j, _score(metric, q, x)) for j, x in enumerate(docs)]
        scored.sort(key=lambda p: p[1], reverse=(metric != "l2"))
        out.append(scored[:k])
    return out


def _check_against_reference(result: dict, queries: np.ndarray, docs: np.ndarray, k: int, metric: str) -> None:
    ref = _brute_force(queries.astype(np.float64).tolist(), docs.astype(np.float64).tolist(), k, metric)
    expected_rows = sum(len(r) for r in ref)
    assert len(result["qid"]) == expected_rows
    i = 0
    for qid, matches in enumerate(ref):
        for rank, (doc, score) in enumerate(matches, start=1):
            assert result["qid"][i] == qid
            assert result["rank"][i] == rank
            assert result["did"][i] == doc, (qid, rank, result["did"][i], doc)
            assert result["score"][i] == pytest.approx(score, rel=1e-4, abs=1e-4)
            i += 1


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2"])
@pytest.mark.parametrize("k", [1, 4, 70])  # 70 > len(other)
def test_exact_against_brute_force(metric, k):
    rng = np.random.default_rng(10)
    queries = rng.standard_normal((37, 12)).astype(np.float32)
    docs = rng.standard_normal((53, 12)).astype(np.float32)
    left = ifr.from_arrow(pa.table({"qid": list(range(37)), "v": _vectors(queries)})).into_batches(5)
    right = ifr.from_arrow(pa.table({"did": list(range(53)), "w": _vectors(docs)}))
    out = left.nearest(right, on="v", other_on="w", k=k, metric=metric).to_pydict()
    _check_against_reference(out, queries, docs, k, metric)
    if k > 53:
        assert len(out["qid"]) == 37 * 53


def test_exact_when_scores_are_computed_in_chunks(monkeypatch):
    """A small score budget splits every batch into several matrix products: results must not change."""
    monkeypatch.setattr(topk, "_SCORE_BUDGET", 64)
    rng = np.random.default_rng(11)
    queries = rng.standard_normal((40, 6))
    docs = rng.standard_normal((30, 6))
    left = ifr.from_arrow(pa.table({"qid": list(range(40)), "v": _vectors(queries, fixed=False, dtype=pa.float64())}))
    right = ifr.from_arrow(pa.table({"did": list(range(30)), "v": _vectors(docs, fixed=False, dtype=pa.float64())}))
    out = left.nearest(right, on="v", k=3).to_pydict()
    _check_against_reference(out, queries, docs, 3, "cosine")


def test_top_k_core_matches_full_sort():
    rng = np.random.default_rng(12)
    q = rng.standard_normal((9, 4))
    x = rng.standard_normal((25, 4))
    pos, score = topk.top_k(q, x, 5, "dot")
    full = q @ x.T
    assert pos.tolist() == np.argsort(-full, axis=1)[:, :5].tolist()
    np.testing.assert_allclose(score, -np.sort(-full, axis=1)[:, :5])
    pos, score = topk.top_k(q, x, 100, "l2")
    dist = np.sqrt(((q[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    assert pos.tolist() == np.argsort(dist, axis=1).tolist()
    np.testing.assert_allclose(score, np.sort(dist, axis=1), atol=1e-6)


def test_columns_clashes_and_types():
    t = pa.list_(pa.float32(), 2)
    left = ifr.from_arrow(pa.table({"id": [1], "text": ["q"], "v": pa.array([[1, 0]], type=t)}))
    right = ifr.from_arrow(pa.table({"id": [7, 8], "title": ["a", "b"], "v": pa.array([[0, 1], [1, 0]], type=t)}))
    out = left.nearest(right, on="v", k=2)
    schema = out._plan.schema
    assert schema.names == ["id", "text", "v", "right.id", "title", "right.v", "score", "rank"]
    assert schema.field("score").type == pa.float32() and schema.field("rank").type == pa.int64()
    assert schema.field("right.v").type == t
    got = out.to_pydict()
    assert got["right.id"] == [8, 7] and got["title"] == ["b", "a"] and got["rank"] == [1, 2]
    assert got["score"] == pytest.approx([1.0, 0.0], abs=1e-6)
    renamed = left.nearest(right, on="v", k=1, column="sim", prefix="doc_")
    assert renamed.column_names == ["id", "text", "v", "doc_id", "title", "doc_v", "sim", "sim_rank"]


def test_name_clash_with_score_column_is_a_plan_error():
    left = ifr.from_pydict({"score": [1.0], "v": [[1.0, 0.0]]})
    with pytest.raises(ifr.PlanError, match=r"duplicate column names \['score'\].*column="):
        left.nearest(ifr.from_pydict({"w": [[1.0, 0.0]]}), on="v", other_on="w")


def test_null_and_zero_vectors_give_no_matches():
    left = ifr.from_pydict({"qid": [0, 1, 2, 3], "v": [[1.0, 0.0], None, [0.0, 0.0], [0.0, 1.0]]})
    right = ifr.from_pydict({"did": [0, 1, 2, 3], "v": [None, [0.0, 0.0], [1.0, 0.1], [0.1, 1.0]]})
    out = left.nearest(right, on="v", k=5).to_pydict()
    # Queries 1 (null) and 2 (zero) have no rows; docs 0 (null) and 1 (zero) are never matches for cosine.
    assert out["qid"] == [0, 0, 3, 3]
    assert out["did"] == [2, 3, 3, 2]
    dot = left.nearest(right, on="v", k=5, metric="dot").to_pydict()
    # For "dot" a zero vector is an ordinary vector (score 0; ties go by other's row order); nulls still never match.
    assert dot["qid"] == [0, 0, 0, 2, 2, 2, 3, 3, 3]
    assert dot["did"] == [2, 3, 1, 1, 2, 3, 3, 2, 1]


def test_empty_other_gives_no_rows_but_keeps_the_schema():
    left = ifr.from_pydict({"v": [[1.0, 0.0]]})
    right = ifr.from_pydict({"v": [[1.0, 0.0]], "x": [1]}).where(col("x") > 5)
    out = left.nearest(right, on="v").to_arrow()
    assert out.num_rows == 0 and out.schema.names == ["v", "right.v", "x", "score", "rank"]


def test_plan_time_errors():
    left = ifr.from_arrow(pa.table({"text": ["a"], "v": pa.array([[1, 0, 0]], type=pa.list_(pa.float32(), 3))}))
    right = ifr.from_arrow(pa.table({"v": pa.array([[1, 0]], type=pa.list_(pa.float32(), 2))}))
    with pytest.raises(ifr.ExpressionTypeError, match=r"'v' holds vectors of 3 values but other's 'v' holds 2"):
        left.nearest(right, on="v")
    with pytest.raises(ifr.ExpressionTypeError, match=r"column 'text' is string, not a vector"):
        left.nearest(right, on="text", other_on="v")
    with pytest.raises(ifr.ColumnNotFoundError, match="Did you mean 'v'"):
        left.nearest(right, on="vv")
    with pytest.raises(ifr.PlanError, match="unknown metric 'euclid'"):
        left.nearest(left, on="v", metric="euclid")
    with pytest.raises(ifr.PlanError, match="k must be a positive integer"):
        left.nearest(left, on="v", k=0)


def test_other_runs_lazily_and_once_per_run(tmp_path):
    log = str(tmp_path / "calls.log")

    @ifr.func.batch(return_dtype=DataType.embedding(DataType.float32(), 2))
    def embed(xs):
        with open(log, "a") as f:
            f.write(f"{len(xs)}\n")
        return [[float(x), 1.0] for x in xs.to_pylist()]

    docs = ifr.from_pydict({"x": list(range(10))}).with_column("v", embed(col("x")))
    queries = ifr.from_arrow(pa.table({"q": list(range(30)), "v": _vectors(np.tile([[1.0, 1.0]], (30, 1)))})).into_batches(4)
    out = queries.nearest(docs, on="v", k=2)
    assert not os.path.exists(log)  # building the plan ran nothing
    got = out.to_pydict()
    assert got["q"] == [q for q in range(30) for _ in range(2)]
    assert got["x"] == [1, 2] * 30  # [1, 1] points exactly at x=1, then x=2
    with open(log) as f:
        assert sum(int(n) for n in f.read().split()) == 10  # the index side ran once for 8 query batches
    out.to_pydict()
    with open(log) as f:
        assert sum(int(n) for n in f.read().split()) == 20  # and once more for a second run


def test_works_downstream_of_filters_and_limits():
    rng = np.random.default_rng(13)
    docs = rng.standard_normal((20, 4)).astype(np.float32)
    left = ifr.from_arrow(pa.table({"qid": list(range(20)), "v": _vectors(docs)}))
    right = ifr.from_arrow(pa.table({"did": list(range(20)), "v": _vectors(docs)}))
    # Each vector's own row is its best cosine match.
    out = left.nearest(right, on="v", k=3).where(col("rank") == 1).select("qid", "did", "score").to_pydict()
    assert out["qid"] == out["did"] == list(range(20))
    assert out["score"] == pytest.approx([1.0] * 20, abs=1e-5)
    assert left.nearest(right, on="v", k=3).limit(4).count_rows() == 4
