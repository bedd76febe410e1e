"""``DataFrame.sem_dedup()`` and ``sem_cluster_by()``: rows the model finds the same, grouped into clusters.

Both collect their input (they need every row). Blocking first: every row's text (the values of
the columns the template reads) is embedded in process (the packaged all-MiniLM-L6-v2, through an
``embed_text`` DataFrame job), and each row's ``k`` most similar rows (cosine similarity at least
``threshold``, when given) become candidate pairs. Then the model checks every candidate pair in one
DataFrame job: "Record 1: ... Record 2: ... Statement: the two records' <criterion>. Is the statement
true? Answer yes or no." (labels yes/no: label scoring on llama.cpp, constrained generation
elsewhere). Pairs it says yes to are joined by union-find. A failed check counts as "not the same"
and is counted; ``on_error="raise"`` stops at it. The result's ``sem_stats`` holds the calls.

Example:
    >>> uf = UnionFind(5)
    >>> uf.union(3, 1); uf.union(4, 3)
    >>> uf.cluster_ids()
    [0, 1, 2, 1, 1]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.expression import col
from inferframe.functions._sem_global import Calls, ask_labels, criterion, document, frame, rows_of
from inferframe.functions.embed import embed_text
from inferframe.functions.templates import parse_template

__all__ = ["UnionFind", "candidate_pairs", "sem_cluster_by", "sem_dedup"]


class UnionFind:
    """Disjoint sets over 0..n-1 (path halving, union by size)."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.size = [1] * n

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]

    def cluster_ids(self) -> list[int]:
        """A cluster id per element: 0, 1, ... in order of each cluster's first element."""
        ids: dict[int, int] = {}
        return [ids.setdefault(self.find(i), len(ids)) for i in range(len(self.parent))]


def candidate_pairs(vectors: np.ndarray, k: int, threshold: float | None = None) -> list[tuple[int, int]]:
    """(i, j), i < j, for each row's ``k`` most cosine-similar rows (at least ``threshold`` when given), sorted.

    Example:
        >>> candidate_pairs(np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]]), k=1)
        [(0, 1), (1, 2)]
        >>> candidate_pairs(np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]]), k=1, threshold=0.5)
        [(0, 1)]
    """
    n = len(vectors)
    if n < 2:
        return []
    v = np.asarray(vectors, dtype=np.float64)
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    sim = v @ v.T
    np.fill_diagonal(sim, -np.inf)
    pairs = set()
    for i in range(n):
        for j in np.argsort(-sim[i], kind="stable")[:k]:
            if threshold is None or sim[i, j] >= threshold:
                pairs.add((min(i, int(j)), max(i, int(j))))
    return sorted(pairs)


def _clusters(df: Any, template: str, k: int, threshold: float | None, embed_model: str | None, on_error: str,
              options: dict, fn: str) -> tuple[pa.Table, list[int], Calls]:
    t = parse_template(template, fn)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise PlanError(f"{fn}(): k={k!r} must be a whole number >= 1 (candidates per row), e.g. k=5.")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                  or not -1 <= threshold <= 1):
        raise PlanError(f"{fn}(): threshold={threshold!r} must be a cosine similarity from -1 to 1, e.g. 0.7.")
    if "cluster_id" in df.column_names:
        raise PlanError(f"{fn}(): the DataFrame has a column 'cluster_id'; rename it first, e.g. "
                        "df.with_column_renamed('cluster_id', 'old_cluster_id').")
    table, rows = rows_of(df, t, fn)
    docs = [document(t, r) for r in rows]
    calls = Calls()
    pairs: list[tuple[int, int]] = []
    if len(rows) > 1:
        texts = frame(df, pa.table({"t": pa.array(docs, pa.string())}))
        vectors = texts.with_column("v", embed_text(col("t"), model=embed_model)).to_pydict()["v"]
        ok = [i for i, v in enumerate(vectors) if v is not None]
        pairs = [(ok[a], ok[b]) for a, b in candidate_pairs(np.array([vectors[i] for i in ok]), k, threshold)]
    what = criterion(t)
    questions = [f"Record 1: {docs[a]}\nRecord 2: {docs[b]}\nStatement: the two records' {what}.\n"
                 "Is the statement true? Answer yes or no." for a, b in pairs]
    answers = ask_labels(df, questions, ["yes", "no"], calls, dict(options, on_error=on_error), "Answer yes or no.")
    uf = UnionFind(len(rows))
    for (a, b), answer in zip(pairs, answers):
        if answer == "yes":
            uf.union(a, b)
    return table, uf.cluster_ids(), calls


def sem_cluster_by(df: Any, template: str, *, k: int = 5, threshold: float | None = None,
                   embed_model: str | None = None, on_error: str = "null", **options: Any) -> Any:
    """Every row with a ``cluster_id`` (0, 1, ... in order of first appearance): rows the model finds the same share one.

    Collects ``df``; the result is an in-memory DataFrame whose ``sem_stats`` is
    {"calls", "jobs", "failed", "pairs", "clusters"}.

    Parameters:
        df: the DataFrame.
        template: the statement about two rows, with the columns it reads: ``"{name} and {address} are the same business"``.
        k: candidate pairs per row: its k most similar rows by embedding.
        threshold: also require a cosine similarity of at least this (None: the k nearest whatever their similarity).
        embed_model: the in-process embedding model (default: the packaged all-MiniLM-L6-v2).
        on_error: "null" (default): a failed check is "not the same"; "raise": ``RowFailed``.
        **options: what ``classify_text`` takes (provider, model, base_url, method, ...).

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"name": ["Joe's Pizza", "Joes Pizza", "Blue Cafe"]})
        >>> df.sem_cluster_by("{name} are the same business", model="gemma-3-270m").to_pydict()  # doctest: +SKIP
        {'name': ["Joe's Pizza", 'Joes Pizza', 'Blue Cafe'], 'cluster_id': [0, 0, 1]}
    """
    table, ids, calls = _clusters(df, template, k, threshold, embed_model, on_error, options, "sem_cluster_by")
    out = frame(df, table.append_column("cluster_id", pa.array(ids, pa.int64())))
    out.sem_stats = calls.as_dict(pairs=calls.calls, clusters=len(set(ids)))
    return out


def sem_dedup(df: Any, template: str, *, k: int = 5, threshold: float | None = None,
              embed_model: str | None = None, on_error: str = "null", **options: Any) -> Any:
    """One row per cluster of rows the model finds the same (the cluster's first row), with its ``cluster_id``.

    Parameters and result as for ``sem_cluster_by``.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"name": ["Joe's Pizza", "Joes Pizza", "Blue Cafe"]})
        >>> df.sem_dedup("{name} are the same business", model="gemma-3-270m").to_pydict()  # doctest: +SKIP
        {'name': ["Joe's Pizza", 'Blue Cafe'], 'cluster_id': [0, 1]}
    """
    table, ids, calls = _clusters(df, template, k, threshold, embed_model, on_error, options, "sem_dedup")
    seen: set[int] = set()
    first = [i for i, c in enumerate(ids) if not (c in seen or seen.add(c))]
    idx = pa.array(first, pa.int64())
    out = frame(df, table.take(idx).append_column("cluster_id", pa.array(ids, pa.int64()).take(idx)))
    out.sem_stats = calls.as_dict(pairs=calls.calls, clusters=len(first))
    return out
