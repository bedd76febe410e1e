"""Exact top-k search: ``DataFrame.nearest`` vs the same search written directly in numpy.

Random unit vectors (384 dimensions, float32): Q queries against D documents, k nearest by cosine.
The numpy baseline does, per chunk of 256 queries, one matrix product, ``argpartition`` and a sort of
the k, on arrays already in memory; inferframe starts from two DataFrames and returns a table of matches. Both results are
checked to be the same documents.

    .venv/bin/python bench/nearest_search.py [--queries 2000] [--docs 100000] [--k 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))

from _util import PeakRSS, table  # noqa: E402


def unit(n: int, dims: int, seed: int) -> np.ndarray:
    m = np.random.default_rng(seed).standard_normal((n, dims), dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def numpy_topk(q: np.ndarray, d: np.ndarray, k: int, chunk: int = 256) -> np.ndarray:
    """What a careful hand-written search does: queries in chunks so the score matrix stays small."""
    out = []
    for start in range(0, len(q), chunk):
        scores = q[start:start + chunk] @ d.T
        idx = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, idx, axis=1), axis=1, kind="stable")
        out.append(np.take_along_axis(idx, order, axis=1))
    return np.concatenate(out)


def frame(ids: str, m: np.ndarray):
    import inferframe as ifr

    vec = pa.FixedSizeListArray.from_arrays(pa.array(m.reshape(-1)), m.shape[1])
    return ifr.from_arrow(pa.table({ids: pa.array(np.arange(len(m))), "vec": vec}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=2000)
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--dims", type=int, default=384)
    p.add_argument("--k", type=int, default=10)
    args = p.parse_args()
    q, d = unit(args.queries, args.dims, 1), unit(args.docs, args.dims, 2)
    print(f"nearest_search: {args.queries:,} queries x {args.docs:,} docs x {args.dims} dims, k={args.k}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    queries, docs = frame("qid", q), frame("did", d)
    with PeakRSS() as rss:  # inferframe first, so its peak is its own
        t = time.perf_counter()
        out = queries.nearest(docs, on="vec", k=args.k).select("qid", "did", "rank").to_arrow()
        dt_if = time.perf_counter() - t
    peak_if = rss.peak_mib
    t = time.perf_counter()
    expected = numpy_topk(q, d, args.k)
    dt_np = time.perf_counter() - t
    rows.append(["numpy, 256 queries per chunk", f"{dt_np:.2f}", f"{args.queries / dt_np:,.0f}"])
    rows.append(["inferframe df.nearest", f"{dt_if:.2f}", f"{args.queries / dt_if:,.0f}"])
    got = out.column("did").to_numpy().reshape(args.queries, args.k)
    same = float((got == expected).mean())
    print(table(["search", "seconds", "queries/s"], rows, "lrr"))
    print(f"\nsame matches: {same:.2%}; inferframe/numpy speed: {dt_np / dt_if:.2f}x; inferframe's peak RSS {peak_if:.0f} MiB "
          f"(the documents are {d.nbytes / 2**20:.0f} MiB)")


if __name__ == "__main__":
    main()
