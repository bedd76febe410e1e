"""cosine_similarity(): values against numpy, nulls and zero vectors, plan-time type errors."""

import pickle

import numpy as np
import pyarrow as pa
import pytest

import inferframe as ifr
from inferframe import DataType, col
from inferframe.functions import cosine_similarity


def _frame(a: np.ndarray, b: np.ndarray, dtype=pa.float32(), fixed=True) -> ifr.DataFrame:
    def column(m):
        t = pa.list_(dtype, m.shape[1]) if fixed else pa.list_(dtype)
        return pa.array([None if r is None else list(r) for r in m], type=t)

    return ifr.from_arrow(pa.table({"id": list(range(len(a))), "a": column(a), "b": column(b)}))


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64 * b64).sum(1) / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))


@pytest.mark.parametrize("dtype, fixed", [(pa.float32(), True), (pa.float64(), True), (pa.float32(), False), (pa.float64(), False)])
def test_matches_numpy_on_random_vectors(dtype, fixed):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((50, 16)), rng.standard_normal((50, 16))
    df = _frame(a, b, dtype, fixed)
    out = df.select(cosine_similarity(col("a"), col("b")).alias("s"))
    assert out.schema()["s"] == DataType.float32()
    got = np.array(out.to_pydict()["s"])
    np.testing.assert_allclose(got, _reference(a, b), atol=1e-5)


def test_constant_vector_list_and_numpy_array():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((20, 8)).astype(np.float32)
    q = rng.standard_normal(8)
    df = _frame(a, a)
    expected = _reference(a, np.broadcast_to(q, a.shape))
    for const in (q.tolist(), q, q.astype(np.float32)):
        got = df.select(cosine_similarity(col("a"), const).alias("s")).to_pydict()["s"]
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_nulls_and_zero_vectors_give_null():
    t = pa.list_(pa.float32(), 2)
    df = ifr.from_arrow(pa.table({
        "a": pa.array([[1, 0], None, [0, 0], [3, 4], [1, 1]], type=t),
        "b": pa.array([[0, 1], [1, 0], [1, 0], None, [-2, -2]], type=t),
    }))
    assert df.select(cosine_similarity(col("a"), col("b")).alias("s")).to_pydict()["s"] == [0.0, None, None, None, -1.0]


def test_batches_with_nulls_and_offsets():
    """Batches are slices of one buffer: each must read its own rows, not the buffer's start."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((23, 5)).astype(np.float32)
    b = rng.standard_normal((23, 5)).astype(np.float32)
    rows_a = [None if i % 4 == 0 else list(map(float, r)) for i, r in enumerate(a)]
    for fixed in (True, False):
        t = pa.list_(pa.float32(), 5) if fixed else pa.list_(pa.float32())
        df = ifr.from_arrow(pa.table({"a": pa.array(rows_a, type=t), "b": pa.array(b.tolist(), type=t)})).into_batches(3)
        got = df.select(cosine_similarity(col("a"), col("b")).alias("s")).to_pydict()["s"]
        ref = _reference(a, b)
        for i, g in enumerate(got):
            if i % 4 == 0:
                assert g is None
            else:
                assert g == pytest.approx(ref[i], abs=1e-5)


def test_size_mismatch_is_a_plan_time_error_naming_both_columns():
    df = ifr.from_arrow(pa.table({
        "a": pa.array([[1.0, 2.0, 3.0]], type=pa.list_(pa.float32(), 3)),
        "b": pa.array([[1.0, 2.0, 3.0, 4.0]], type=pa.list_(pa.float32(), 4)),
    }))
    with pytest.raises(ifr.ExpressionTypeError) as e:
        df.select(cosine_similarity(col("a"), col("b")))  # building the plan is enough
    msg = str(e.value)
    assert "col(a)" in msg and "col(b)" in msg and "3" in msg and "4" in msg and "same model" in msg
    with pytest.raises(ifr.ExpressionTypeError, match="constant vector has 2"):
        df.select(cosine_similarity(col("a"), [1.0, 2.0]))


def test_not_a_vector_is_a_plan_time_error():
    df = ifr.from_pydict({"text": ["x"], "v": [[1.0, 2.0]]})
    with pytest.raises(ifr.ExpressionTypeError, match=r"col\(text\).*string is not a vector.*embedding"):
        df.select(cosine_similarity(col("text"), col("v")))
    with pytest.raises(TypeError, match="constant vector"):
        cosine_similarity(col("v"), "hello")
    with pytest.raises(TypeError, match="1-D"):
        cosine_similarity(col("v"), [[1.0], [2.0]])


def test_variable_lists_of_different_sizes_fail_when_run():
    df = ifr.from_pydict({"a": [[1.0, 2.0]], "b": [[1.0, 2.0, 3.0]]})
    q = df.select(cosine_similarity(col("a"), col("b")).alias("s"))  # sizes unknown at plan time
    with pytest.raises(ifr.ExecutionError, match="differ in size"):
        q.to_pydict()
    ragged = ifr.from_pydict({"a": [[1.0, 2.0], [1.0]]})
    with pytest.raises(ifr.ExecutionError, match="different lengths"):
        ragged.select(cosine_similarity(col("a"), [1.0, 0.0]).alias("s")).to_pydict()


def test_plan_with_constant_vector_pickles_and_shows_short():
    df = ifr.from_pydict({"a": [[1.0, 0.0], [0.0, 1.0]]})
    q = df.select(cosine_similarity(col("a"), np.arange(2.0) + 1).alias("s"))
    assert "vector[2]" in str(q._plan.exprs[0])
    again = pickle.loads(pickle.dumps(q._plan))
    assert ifr.DataFrame(again).to_pydict()["s"] == pytest.approx([1 / np.sqrt(5), 2 / np.sqrt(5)])


def test_exported():
    assert "cosine_similarity" in ifr.functions.__all__
