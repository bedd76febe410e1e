"""``DataFrame.sem_dedup()`` and ``sem_cluster_by()``: rows the model finds the same, grouped into clusters.

Both are lazy; when they run they collect their input (they need every row). Blocking first: every
row's text (the values of the columns the template reads) is embedded in process (the packaged all-MiniLM-L6-v2, through an
``embed_text`` DataFrame job), and each row's ``k`` most similar rows (cosine similarity at least
``threshold``, when given) become candidate pairs. Then the model checks every candidate pair in one
DataFrame job: "Record 1: ... Record 2: ... Statement: the two records' <criterion>. Is the statement
true? Answer yes or no." (labels yes/no: label scoring on llama.cpp, constrained generation
elsewhere). Pairs it says yes to join their rows' clusters, unless the checks between the two
clusters say "no" at least as often as "yes" (``merge="evidence"``, the default): a transitive
closure of every "yes" (``merge="any"``) lets one wrong answer chain two groups together, and with
5% of wrong answers on bench/sem_global.py's Febrl records it kept 81 clusters of 100 at pairwise
precision 0.26. A failed check counts as neither and is counted; ``on_error="raise"`` stops at it.
The result's ``sem_stats`` holds the calls and the merges the evidence refused.

Example:
    >>> uf = UnionFind(5)
    >>> uf.union(3, 1); uf.union(4, 3)
    >>> uf.cluster_ids()
    [0, 1, 2, 1, 1]
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.expression import col
from inferframe.functions._sem_global import (Calls, sealed, ask_labels, check_columns, criterion, document, frame,
                                              model_name, whole_table)
from inferframe.functions._vocabulary import take
from inferframe.functions.embed import embed_text
from inferframe.functions.templates import parse_template
from inferframe.observe.quality import all_yes, warn_low_information

__all__ = ["MERGES", "UnionFind", "candidate_pairs", "cluster_ids", "expected_calls", "sem_cluster_by",
           "sem_dedup"]


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


MERGES = ("evidence", "any")


def cluster_ids(n: int, answers: list[tuple[int, int, bool | None]], merge: str = "evidence") -> tuple[list[int], int]:
    """Cluster ids (0, 1, ... in order of first element) from checked pairs (a, b, same?); and the merges refused.

    ``merge="evidence"``: a "yes" joins two clusters only when the checks between them say "yes" more
    often than "no". ``"any"``: every "yes" joins (transitive closure).

    Example:
        >>> checks = [(0, 1, True), (2, 3, True), (1, 2, True), (0, 3, False), (1, 3, False)]
        >>> cluster_ids(4, checks), cluster_ids(4, checks, merge="any")
        (([0, 0, 1, 1], 1), ([0, 0, 0, 0], 0))
    """
    uf = UnionFind(n)
    said: dict[int, dict[int, bool]] = {}
    for a, b, same in answers:
        if same is not None:
            said.setdefault(a, {})[b] = same
            said.setdefault(b, {})[a] = same
    members = {i: [i] for i in range(n)}
    refused = 0
    for a, b, same in answers:
        if not same:
            continue
        ra, rb = uf.find(a), uf.find(b)
        if ra == rb:
            continue
        if merge == "evidence":
            votes = [v for x in members[ra] for z, v in said.get(x, {}).items() if uf.find(z) == rb]
            if 2 * sum(votes) <= len(votes):
                refused += 1
                continue
        uf.union(ra, rb)
        root = uf.find(ra)
        members[root] = members.pop(ra if root == rb else rb) + members[root]
    return uf.cluster_ids(), refused


def _clusters(df: Any, template: str, k: int, threshold: float | None, embed_model: str | None, on_error: str,
              options: dict, fn: str, merge: str, finish: Callable[[pa.Table, list[int]], pa.Table]) -> Any:
    """The lazy operator: checks now; when it runs, ``finish(table, cluster ids)`` makes its rows."""
    options = sealed(options)
    embed_model = take(fn, options, "embed_model", embed_model)
    t = parse_template(template, fn)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise PlanError(f"{fn}(): k={k!r} must be a whole number >= 1 (candidates per row), e.g. k=5.")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                  or not -1 <= threshold <= 1):
        raise PlanError(f"{fn}(): threshold={threshold!r} must be a cosine similarity from -1 to 1, e.g. 0.7.")
    if merge not in MERGES:
        raise PlanError(f"{fn}(): merge={merge!r} is not one of {', '.join(map(repr, MERGES))}; e.g. merge='evidence' "
                        "(two clusters join when their checks say yes more often than no).")
    if "cluster_id" in df.column_names:
        raise PlanError(f"{fn}(): the DataFrame has a column 'cluster_id'; rename it first, e.g. "
                        "df.with_column_renamed('cluster_id', 'old_cluster_id').")
    check_columns(df, t, fn)
    what = criterion(t)

    def compute(source: Any) -> tuple[pa.Table, dict]:
        table = source.to_arrow()
        docs = [document(t, r) for r in table.select(t.columns()).to_pylist()]
        calls = Calls()
        pairs: list[tuple[int, int]] = []
        closeness: dict[tuple[int, int], float] = {}
        if len(docs) > 1:
            texts = frame(source, pa.table({"t": pa.array(docs, pa.string())}))
            vectors = texts.with_column("v", embed_text(col("t"), model=embed_model)).to_pydict()["v"]
            ok = [i for i, v in enumerate(vectors) if v is not None]
            unit = np.array([vectors[i] for i in ok], dtype=np.float64)
            unit = unit / np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12) if len(ok) else unit
            for a, b in candidate_pairs(unit, k, threshold):
                pairs.append((ok[a], ok[b]))
                closeness[(ok[a], ok[b])] = float(unit[a] @ unit[b])
        questions = [f"Record 1: {docs[a]}\nRecord 2: {docs[b]}\nStatement: the two records' {what}.\n"
                     "Is the statement true? Answer yes or no." for a, b in pairs]
        # Uncalibrated unless asked: a batch prior would make about half of the candidate pairs matches,
        # where most of them are not.
        # The user's system_message replaces the default instructions, as in every AI function.
        asked = {"calibrate": False, **options, "on_error": on_error}
        answers = ask_labels(source, questions, ["yes", "no"], calls, asked,
                             asked.pop("system_message", None) or "Answer yes or no.")
        checked = [(a, b, None if x is None else x == "yes") for (a, b), x in zip(pairs, answers)]
        # The most similar pairs join first: a wrong "yes" then meets clusters its other checks speak against.
        checked.sort(key=lambda c: -closeness[(c[0], c[1])])
        ids, refused = cluster_ids(len(docs), checked, merge)
        out = finish(table, ids)
        said = [same for _, _, same in checked if same is not None]
        # The guard: a model that says yes to every pair groups rows by chance, not by sameness.
        quality = warn_low_information(model_name(options), [all_yes(sum(said), len(said))], where=fn)
        return out, calls.as_dict(pairs=calls.calls, clusters=len(set(ids)), refused_merges=refused,
                                   yes=sum(said), quality=quality)

    schema = df.schema().to_arrow().append(pa.field("cluster_id", pa.int64()))
    return whole_table(df, schema, f"{'SemDedup' if fn == 'sem_dedup' else 'SemClusterBy'} {template!r} k={k} "
                      f"merge={merge}", compute, lambda n: expected_calls(n, k))


def expected_calls(n: int | None, k: int) -> str:
    """sem_dedup's model calls before it runs, in words, for ``n`` input rows (None: not known before the run).

    Example:
        >>> expected_calls(100, 5)
        'at most 500 pair checks for 100 rows (each row with its 5 most similar; a pair asked once), after 100 in-process embeddings'
    """
    if n is None:
        return f"at most {k} pair checks per row (each row with its {k} most similar; a pair asked once)"
    return (f"at most {n * k:,} pair checks for {n:,} rows (each row with its {k} most similar; a pair asked once), "
            f"after {n:,} in-process embeddings")


def sem_cluster_by(df: Any, template: str, *, k: int = 5, threshold: float | None = None,
                   embed_model: str | None = None, merge: str = "evidence", on_error: str = "null",
                   **options: Any) -> Any:
    """Every row with a ``cluster_id`` (0, 1, ... in order of first appearance): rows the model finds the same share one.

    Lazy (``explain()`` shows it and the calls expected); its first run collects ``df`` and computes the
    result, once. Its ``sem_stats`` (after the run) is
    {"calls", "jobs", "failed", "pairs", "clusters", "refused_merges", "yes", "quality"} ("yes": the pair checks
    that said yes; "quality": the quality guard's measurements, empty when the answers vary: a
    ``LowInformationWarning`` names them when (nearly) every check said yes).

    Parameters:
        df: the DataFrame.
        template: the statement about two rows, with the columns it reads: ``"{name} and {address} are the same business"``.
        k: candidate pairs per row: its k most similar rows by embedding.
        threshold: also require a cosine similarity of at least this (None: the k nearest whatever their similarity).
        embed_model: the in-process embedding model (default: the packaged all-MiniLM-L6-v2).
        merge: "evidence" (default): a "yes" joins two clusters only when the checks between them say
            "yes" more often than "no"; "any": every "yes" joins (transitive closure).
        on_error: "null" (default): a failed check is neither "yes" nor "no"; "raise": ``RowFailed``.
        **options: what ``classify_text`` takes (provider, model, base_url, method, ...).

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"name": ["Joe's Pizza", "Joes Pizza", "Blue Cafe"]})
        >>> df.sem_cluster_by("{name} are the same business", model="gemma-3-270m").to_pydict()  # doctest: +SKIP
        {'name': ["Joe's Pizza", 'Joes Pizza', 'Blue Cafe'], 'cluster_id': [0, 0, 1]}
    """
    return _clusters(df, template, k, threshold, embed_model, on_error, options, "sem_cluster_by", merge,
                     lambda table, ids: table.append_column("cluster_id", pa.array(ids, pa.int64())))


def sem_dedup(df: Any, template: str, *, k: int = 5, threshold: float | None = None,
              embed_model: str | None = None, merge: str = "evidence", on_error: str = "null", **options: Any) -> Any:
    """One row per cluster of rows the model finds the same (the cluster's first row), with its ``cluster_id``.

    Parameters and result as for ``sem_cluster_by``.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"name": ["Joe's Pizza", "Joes Pizza", "Blue Cafe"]})
        >>> df.sem_dedup("{name} are the same business", model="gemma-3-270m").to_pydict()  # doctest: +SKIP
        {'name': ["Joe's Pizza", 'Blue Cafe'], 'cluster_id': [0, 1]}
    """
    return _clusters(df, template, k, threshold, embed_model, on_error, options, "sem_dedup", merge, _first_of_each)


def _first_of_each(table: pa.Table, ids: list[int]) -> pa.Table:
    """The first row of each cluster, with its ``cluster_id``."""
    seen: set[int] = set()
    idx = pa.array([i for i, c in enumerate(ids) if not (c in seen or seen.add(c))], pa.int64())
    return table.take(idx).append_column("cluster_id", pa.array(ids, pa.int64()).take(idx))
