"""Vector similarity: ``cosine_similarity`` per row, and the top-k search behind ``DataFrame.nearest``.

Both work on embedding columns (``fixed_size_list<float>`` such as ``DataType.embedding(...)``, or
``list<float>``) with numpy over Arrow's flat values buffer: no Python code runs per row.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.functions import cosine_similarity
    >>> df = ifr.from_pydict({"v": [[1.0, 0.0], [1.0, 1.0]]})
    >>> [round(x, 3) for x in df.select(cosine_similarity(ifr.col("v"), [1.0, 0.0]).alias("s")).to_pydict()["s"]]
    [1.0, 0.707]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from inferframe.errors import ExecutionError, ExpressionTypeError, PlanError
from inferframe.expressions.expression import Expression, _call
from inferframe.expressions.functions import ConstVector, vector_matrix, vector_size
from inferframe.expressions.nodes import Alias, Call, Col, column_not_found
from inferframe.expressions.udf import ClassSpec, UDFSpec, make_call
from inferframe.plan import logical as lp

METRICS = ("cosine", "dot", "l2")

# Scores computed per query chunk: rows x index size stays under this many numbers (~64 MB in float32).
_SCORE_BUDGET = 1 << 24


def cosine_similarity(a: Any, b: Any) -> Expression:
    """Cosine similarity of two vectors, row by row, as a float32 column.

    Parameters:
        a: an expression over an embedding column (``fixed_size_list<float>`` or ``list<float>``).
        b: another such expression, or a constant vector (a list of numbers or a 1-D numpy array)
            compared with every row.

    The result is null where either side is null, and also where either vector has norm 0
    (the angle is undefined there; null rather than NaN, so it sorts and aggregates cleanly).
    Fixed-size vectors of different sizes are an ``ExpressionTypeError`` when the plan is built;
    ``list<float>`` columns are checked per batch when the plan runs.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"q": [[1.0, 0.0]], "d": [[0.0, 2.0]]})
        >>> df.select(cosine_similarity(ifr.col("q"), ifr.col("d")).alias("s")).to_pydict()
        {'s': [0.0]}
    """
    if not isinstance(a, Expression):
        raise TypeError(f"cosine_similarity(): the first argument must be a column expression such as col('embedding'), got {type(a).__name__}.")
    if isinstance(b, Expression):
        return _call("cosine_similarity", a, b)
    if isinstance(b, (list, tuple, np.ndarray)):
        try:
            vec = ConstVector(b)
        except (TypeError, ValueError) as e:
            raise TypeError(f"cosine_similarity(): {e}") from None
        return _call("cosine_similarity", a, vector=vec)
    raise TypeError(
        f"cosine_similarity(): the second argument must be an expression or a constant vector (list or numpy array), "
        f"got {type(b).__name__}."
    )


# --- top-k search ---------------------------------------------------------------------------------


def top_k(queries: np.ndarray, index: np.ndarray, k: int, metric: str = "cosine",
          index_sqnorms: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best index rows for every query row: (positions, scores), each of shape (m, min(k, n)).

    Parameters:
        queries: (m, d) matrix; for "cosine" already normalised to unit length.
        index: (n, d) matrix; for "cosine" already normalised.
        k: how many matches per query.
        metric: "cosine" or "dot" (higher is better) or "l2" (Euclidean distance, lower is better).
        index_sqnorms: squared norms of the index rows, for "l2" (computed when not given).

    Ties are broken by index position, so results are deterministic.

    Example:
        >>> pos, score = top_k(np.eye(2), np.array([[0.0, 1.0], [1.0, 0.0]]), k=1)
        >>> pos.tolist(), score.tolist()
        ([[1], [0]], [[1.0], [1.0]])
    """
    m, n = len(queries), len(index)
    kk = min(k, n)
    if kk == 0 or m == 0:
        return np.zeros((m, kk), dtype=np.int64), np.zeros((m, kk), dtype=queries.dtype)
    if metric == "l2" and index_sqnorms is None:
        index_sqnorms = np.einsum("ij,ij->i", index, index)
    step = max(1, _SCORE_BUDGET // n)
    positions = np.empty((m, kk), dtype=np.int64)
    scores = np.empty((m, kk), dtype=np.result_type(queries.dtype, index.dtype))
    for lo in range(0, m, step):
        q = queries[lo: lo + step]
        sim = q @ index.T
        if metric == "l2":
            # |q - x|^2 = |q|^2 + |x|^2 - 2 q.x; rank on the negated squared distance so "higher is better" holds.
            key = 2 * sim - index_sqnorms[None, :] - np.einsum("ij,ij->i", q, q)[:, None]
        else:
            key = sim
        if np.isnan(key).any():  # NaN values in a vector: such a row is never a match
            key = np.where(np.isnan(key), -np.inf, key)
        if kk < n:
            cand = np.argpartition(key, n - kk, axis=1)[:, n - kk:]  # the kk largest, without a negated copy
        else:
            cand = np.broadcast_to(np.arange(n), (len(q), n))
        vals = np.take_along_axis(key, cand, axis=1)
        order = np.lexsort((cand, -vals), axis=-1)
        cand = np.take_along_axis(cand, order, axis=1)
        vals = np.take_along_axis(vals, order, axis=1)
        positions[lo: lo + step] = cand
        scores[lo: lo + step] = np.sqrt(np.maximum(-vals, 0)) if metric == "l2" else vals
    return positions, scores


def _normalise(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    norms = np.sqrt(np.einsum("ij,ij->i", m, m))
    with np.errstate(divide="ignore", invalid="ignore"):
        return m / np.where(norms == 0, 1, norms)[:, None], norms


class NearestIndex:
    """The index side of ``DataFrame.nearest``: built once per run from ``other``'s plan.

    Runs ``other``'s plan, keeps its rows and its vectors as one matrix (normalised once for
    "cosine"), and answers batches of query vectors with a list of matches per row.

    Parameters:
        plan: the logical plan of ``other``.
        on: its vector column.
        k: matches per query row.
        metric: "cosine", "dot" or "l2".
        out_type: the Arrow type of the answer: list<struct<c0.., score, rank>>.
    """

    def __init__(self, plan: lp.LogicalPlan, on: str, k: int, metric: str, out_type: pa.DataType) -> None:
        from inferframe.plan.optimizer import optimize
        from inferframe.runners import get_runner

        batches = list(get_runner().run(optimize(plan)))
        table = pa.Table.from_batches(batches, schema=plan.schema) if batches else plan.schema.empty_table()
        self.k, self.metric, self.out_type = k, metric, out_type
        self.columns = [c.combine_chunks() if c.num_chunks != 1 else c.chunk(0) for c in table.columns]
        m, valid = vector_matrix(table.column(on).combine_chunks())
        if metric == "cosine":
            m, norms = _normalise(m)
            valid &= norms > 0  # a zero vector has no direction: it can never be a match
        self.rows = np.flatnonzero(valid)
        self.matrix = np.ascontiguousarray(m if valid.all() else m[valid])  # no second copy when all rows count
        self.sqnorms = np.einsum("ij,ij->i", self.matrix, self.matrix) if metric == "l2" else None

    def search(self, vectors) -> pa.Array:
        """Answer one batch of query vectors (a Series): one list of matches per row, empty for no match."""
        arr = vectors.to_arrow() if hasattr(vectors, "to_arrow") else vectors
        n = len(arr)
        q, valid = vector_matrix(arr, self.matrix.dtype if len(self.matrix) else None)
        if len(self.matrix) and valid.any() and q.shape[1] != self.matrix.shape[1]:
            raise ExecutionError(
                f"nearest(): the query vectors have {q.shape[1]} values but the index vectors have "
                f"{self.matrix.shape[1]}. Embed both sides with the same model and size."
            )
        if self.metric == "cosine":
            q, norms = _normalise(q)
            valid &= norms > 0
        kk = min(self.k, len(self.matrix))
        qrows = np.flatnonzero(valid)
        pos, scores = top_k(q[qrows], self.matrix, self.k, self.metric, self.sqnorms) if kk else (
            np.zeros((len(qrows), 0), dtype=np.int64), np.zeros((len(qrows), 0)))
        counts = np.zeros(n, dtype=np.int64)
        counts[qrows] = kk
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        take = pa.array(self.rows[pos.ravel()] if pos.size else np.zeros(0, dtype=np.int64))
        struct_t = self.out_type.value_type
        fields = [struct_t.field(i) for i in range(struct_t.num_fields)]
        children = [c.take(take) if len(c) else pa.nulls(0, type=c.type) for c in self.columns]
        children.append(pa.array(scores.ravel().astype(np.float32), type=pa.float32()))
        children.append(pa.array(np.tile(np.arange(1, kk + 1, dtype=np.int64), len(qrows))))
        values = pa.StructArray.from_arrays(children, fields=fields)
        return pa.ListArray.from_arrays(pa.array(offsets), values, type=self.out_type)


def _vector_field(schema: pa.Schema, name: str, side: str) -> int | None:
    idx = schema.get_field_index(name)
    if idx < 0:
        raise column_not_found(name, schema)
    t = schema.field(idx).type
    try:
        return vector_size(t)
    except TypeError:
        raise ExpressionTypeError(
            f"nearest(): {side} column {name!r} is {t}, not a vector. Pass an embedding column "
            "(fixed_size_list<float> or list<float>, e.g. from embed_text()) as on=/other_on=."
        ) from None


def nearest_plan(left: lp.LogicalPlan, right: lp.LogicalPlan, *, on: str, other_on: str | None = None, k: int = 5,
                 metric: str = "cosine", score_column: str = "score", rank_column: str = "rank",
                 prefix: str = "right.") -> lp.LogicalPlan:
    """The lazy plan of ``DataFrame.nearest``: see that method for the meaning of every argument.

    Shape: project the matches of each row as a list (one UDF stage holding the index), explode
    it to one row per match, drop rows without a match, then unpack the match into columns.

    Example:
        >>> import inferframe as ifr
        >>> a = ifr.from_pydict({"v": [[1.0, 0.0]]})
        >>> nearest_plan(a._plan, a._plan, on="v", k=1).schema.names
        ['v', 'right.v', 'score', 'rank']
    """
    other_on = other_on or on
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise PlanError(f"nearest(): k must be a positive integer, got {k!r}.")
    if metric not in METRICS:
        raise PlanError(f"nearest(): unknown metric {metric!r}; use one of {', '.join(METRICS)}.")
    sl = _vector_field(left.schema, on, "the")
    sr = _vector_field(right.schema, other_on, "other's")
    if sl is not None and sr is not None and sl != sr:
        raise ExpressionTypeError(
            f"nearest(): {on!r} holds vectors of {sl} values but other's {other_on!r} holds {sr}. "
            "Embed both sides with the same model and size."
        )
    left_names = list(left.schema.names)
    right_names = [prefix + f.name if f.name in left_names else f.name for f in right.schema]
    out_names = left_names + right_names + [score_column, rank_column]
    dupes = sorted({n for n in out_names if out_names.count(n) > 1})
    if dupes:
        raise PlanError(
            f"nearest() would produce duplicate column names {dupes}. Pick other names with "
            "score_column=, rank_column= or prefix=, or rename the columns first."
        )
    struct_t = pa.struct(
        [pa.field(f"c{i}", f.type) for i, f in enumerate(right.schema)]
        + [pa.field("score", pa.float32()), pa.field("rank", pa.int64())]
    )
    out_type = pa.list_(struct_t)
    owner = ClassSpec(NearestIndex, (right, other_on, k, metric, out_type), {})
    spec = UDFSpec(name="nearest", fn=NearestIndex.search, return_dtype=out_type, is_batch=True, owner=owner)
    call = make_call(spec, (Expression(Col(on)),), {})._node
    tmp = "__nearest"
    while tmp in left_names:
        tmp = "_" + tmp
    plan: lp.LogicalPlan = lp.Project(left, tuple(Col(n) for n in left_names) + (Alias(call, tmp),))
    plan = lp.Explode(plan, (tmp,))
    plan = lp.Filter(plan, Call("not_null", (Col(tmp),)))

    def get(field: str, name: str):
        return Alias(Call("struct.get", (Col(tmp),), (("field", field),)), name)

    unpack = [get(f"c{i}", name) for i, name in enumerate(right_names)]
    unpack += [get("score", score_column), get("rank", rank_column)]
    return lp.Project(plan, tuple(Col(n) for n in left_names) + tuple(unpack))
