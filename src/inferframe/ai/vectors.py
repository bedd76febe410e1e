"""Vector helpers shared by the embedding functions: unit length, chunk combining, Arrow columns.

Example:
    >>> import numpy as np
    >>> [round(float(x), 3) for x in combine_chunks(np.array([[1.0, 0.0], [0.0, 1.0]]), [0, 0], [3, 1], 1, True)[0]]
    [0.949, 0.316]
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def unit_rows(m: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1 (all-zero rows stay zero)."""
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1, norms)


def combine_chunks(vectors: np.ndarray, owners: list[int], weights: list[int], n: int, normalize: bool) -> np.ndarray:
    """One vector per input from its chunks' vectors: the token-weighted mean (then L2-normalised).

    Parameters:
        vectors: one row per chunk.
        owners: the input each chunk belongs to (0..n-1).
        weights: each chunk's token count.
        n: how many inputs.
        normalize: scale each result to unit length (else divide by the total weight).
    """
    w = np.asarray(weights, dtype=np.float64)
    out = np.zeros((n, vectors.shape[1]), dtype=np.float64)
    np.add.at(out, np.asarray(owners), np.asarray(vectors, dtype=np.float64) * w[:, None])
    if normalize:
        return unit_rows(out).astype(np.float32)
    totals = np.zeros(n)
    np.add.at(totals, np.asarray(owners), w)
    return (out / np.where(totals == 0, 1, totals)[:, None]).astype(np.float32)


def to_vectors(values: np.ndarray, nulls: np.ndarray, size: int) -> pa.Array:
    """A fixed-size float32 list column, null where ``nulls`` is set.

    ``values`` holds either one row per input or only the rows of the inputs that are not null.
    """
    n = len(nulls)
    if len(values) == n:
        full = np.ascontiguousarray(values[:, :size], dtype=np.float32)
    else:
        full = np.zeros((n, size), dtype=np.float32)
        full[~nulls] = values[:, :size]
    return pa.FixedSizeListArray.from_arrays(pa.array(full.reshape(-1)), size, mask=pa.array(nulls))
