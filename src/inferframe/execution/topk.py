"""Numpy kernels of exact nearest-neighbour search: unit-length rows and the top-k of a matrix product.

Example:
    >>> import numpy as np
    >>> pos, score = top_k(np.eye(2), np.array([[0.0, 1.0], [1.0, 0.0]]), k=1)
    >>> pos.tolist(), score.tolist()
    ([[1], [0]], [[1.0], [1.0]])
"""

from __future__ import annotations

import numpy as np

# Scores computed per query chunk: rows x index size stays under this many numbers (~64 MB in float32).
_SCORE_BUDGET = 1 << 24


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
        >>> pos, score = top_k(np.array([[0.0, 0.0]]), np.array([[3.0, 4.0], [1.0, 0.0]]), k=2, metric="l2")
        >>> pos.tolist(), score.tolist()
        ([[1, 0]], [[1.0, 5.0]])
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


def normalise(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows scaled to unit length, and their original norms (a zero row stays zero).

    Parameters:
        m: (n, d) matrix.

    Example:
        >>> unit, norms = normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
        >>> unit.tolist(), norms.tolist()
        ([[0.6, 0.8], [0.0, 0.0]], [5.0, 0.0])
    """
    norms = np.sqrt(np.einsum("ij,ij->i", m, m))
    with np.errstate(divide="ignore", invalid="ignore"):
        return m / np.where(norms == 0, 1, norms)[:, None], norms
