"""The physical ``Nearest`` operator: hold the right side as one matrix, stream the left side against it.

The right side's rows are gathered once per run (its vectors normalised once for "cosine");
each left batch then costs one matrix product and one ``argpartition`` (see ``topk``), and
its matches come out as one batch, one row per match.

Example:
    >>> import pyarrow as pa
    >>> from inferframe.execution.context import ExecContext
    >>> from inferframe.plan.logical import InMemory, Nearest, Source
    >>> t = pa.table({"v": [[1.0, 0.0], [0.0, 1.0]]})
    >>> src = Source(InMemory(t), t.schema)
    >>> node = Nearest(src, src, "v", "v", k=1)
    >>> out = nearest(iter(t.to_batches()), iter(t.to_batches()), node, ExecContext())
    >>> pa.Table.from_batches(list(out)).select(["v", "right.v", "rank"]).to_pydict()
    {'v': [[1.0, 0.0], [0.0, 1.0]], 'right.v': [[1.0, 0.0], [0.0, 1.0]], 'rank': [1, 1]}
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa

from inferframe.errors import ExecutionError
from inferframe.execution.context import ExecContext
from inferframe.execution.operators import gather
from inferframe.execution.topk import normalise, top_k
from inferframe.expressions.functions import vector_matrix
from inferframe.plan.logical import Nearest

Batches = Iterator[pa.RecordBatch]


class VectorIndex:
    """The right side of a search: its rows, and its usable vectors as one contiguous matrix.

    Parameters:
        table: the right side's rows.
        on: its vector column.
        metric: "cosine", "dot" or "l2".

    A null vector (or, for "cosine", an all-zero one) is never a match.

    Example:
        >>> import pyarrow as pa
        >>> index = VectorIndex(pa.table({"v": [[1.0, 0.0], None, [0.0, 0.0]]}), "v", "cosine")
        >>> index.rows.tolist(), index.matrix.shape
        ([0], (1, 2))
    """

    def __init__(self, table: pa.Table, on: str, metric: str) -> None:
        self.metric = metric
        self.columns = [c.combine_chunks() if c.num_chunks != 1 else c.chunk(0) for c in table.columns]
        m, valid = vector_matrix(self.columns[table.schema.get_field_index(on)])  # the copy kept above, not a second one
        if metric == "cosine":
            m, norms = normalise(m)
            valid &= norms > 0  # a zero vector has no direction: it can never be a match
        self.rows = np.flatnonzero(valid)
        self.matrix = np.ascontiguousarray(m if valid.all() else m[valid])  # no second copy when all rows count
        self.sqnorms = np.einsum("ij,ij->i", self.matrix, self.matrix) if metric == "l2" else None

    def search(self, vectors: pa.Array, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Match one batch of query vectors: (query row, index row, score) per match, best first per query.

        Parameters:
            vectors: the query vectors; null (or zero, for "cosine") rows get no match.
            k: matches per query row (fewer when the index is smaller).

        Example:
            >>> import pyarrow as pa
            >>> index = VectorIndex(pa.table({"v": [[1.0, 0.0], [0.0, 1.0]]}), "v", "dot")
            >>> [a.tolist() for a in index.search(pa.array([[0.0, 2.0], None]), k=2)]
            [[0, 0], [1, 0], [2.0, 0.0]]
        """
        q, valid = vector_matrix(vectors, self.matrix.dtype if len(self.matrix) else None)
        if len(self.matrix) and valid.any() and q.shape[1] != self.matrix.shape[1]:
            raise ExecutionError(
                f"nearest(): the query vectors have {q.shape[1]} values but the index vectors have "
                f"{self.matrix.shape[1]}. Embed both sides with the same model and size."
            )
        if self.metric == "cosine":
            q, norms = normalise(q)
            valid &= norms > 0
        qrows = np.flatnonzero(valid)
        kk = min(k, len(self.matrix))
        if kk == 0 or len(qrows) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        pos, scores = top_k(q[qrows], self.matrix, k, self.metric, self.sqnorms)
        return np.repeat(qrows, kk), self.rows[pos.ravel()], scores.ravel()


def _matches(batch: pa.RecordBatch, index: VectorIndex, node: Nearest) -> pa.RecordBatch:
    """One output row per match of the rows of ``batch``: its columns, the match's columns, score, rank."""
    parents, rows, scores = index.search(batch.column(node.on), node.k)
    kk = min(node.k, len(index.matrix))
    left = pa.array(parents)
    right = pa.array(rows)
    arrays = [c.take(left) for c in batch.columns]
    arrays += [c.take(right) for c in index.columns]
    arrays.append(pa.array(scores.astype(np.float32), type=pa.float32()))
    arrays.append(pa.array(np.tile(np.arange(1, kk + 1, dtype=np.int64), len(parents) // kk if kk else 0)))
    return pa.RecordBatch.from_arrays(arrays, schema=node.schema)


def nearest(left: Iterable[pa.RecordBatch], right: Iterable[pa.RecordBatch], node: Nearest, ctx: ExecContext) -> Batches:
    """Run ``node``: gather ``right`` (once, when the first batch is asked for), then match ``left`` batch by batch.

    Parameters:
        left: the left side's batches (streamed).
        right: the right side's batches (held in memory).
        node: the logical ``Nearest`` (columns, k, metric, output schema).
        ctx: the run's context.
    """
    index = VectorIndex(gather(right, node.right.schema), node.other_on, node.metric)
    for batch in left:
        ctx.check()
        out = _matches(batch, index, node)
        if out.num_rows:  # a batch with no match gives no batch, like a filter would
            yield out
