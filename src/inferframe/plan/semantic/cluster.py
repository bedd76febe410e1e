"""sem_dedup's and sem_cluster_by's planner: embedding blocking, a pair check per candidate, clusters merged on evidence.

``sem_dedup``/``sem_cluster_by`` build a ``WholeTable`` node holding a ``Cluster`` (plain data: the
arguments, checked, and the AI steps ``functions.sem_dedup`` built); calling them reads nothing. When
a job reaches the node, ``run`` collects its input (it needs every row). Every row's text (the values
of the columns the template reads) is embedded (one job), each row's ``k`` most similar rows (cosine
similarity at least ``threshold``, when given) become candidate pairs, and the model checks every
candidate pair in one job. Pairs it says yes to join their rows' clusters, unless the checks between
the two clusters say "no" at least as often as "yes" (``merge="evidence"``, the default): a transitive
closure of every "yes" (``merge="any"``) lets one wrong answer chain two groups together, and with 5%
of wrong answers on bench/sem_global.py's Febrl records it kept 81 clusters of 100 at pairwise
precision 0.26. A failed check counts as neither and is counted.

| plan | what runs | model calls |
|---|---|---|
| ``blocking`` | n in-process embeddings, the k nearest rows per row, a yes/no check per candidate pair | at most n * k |

Example:
    >>> uf = UnionFind(5)
    >>> uf.union(3, 1); uf.union(4, 3)
    >>> uf.cluster_ids()
    [0, 1, 2, 1, 1]
    >>> first_of_each(pa.table({"a": [5, 6, 7]}), [0, 0, 1]).to_pydict()
    {'a': [5, 7], 'cluster_id': [0, 1]}
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from inferframe.expressions.expression import Expression
from inferframe.observe.quality import all_yes, warn_low_information
from inferframe.plan.logical import LogicalPlan
from inferframe.plan.semantic.rounds import Calls, ask, ask_texts, calls_word, document, finish, known_rows
from inferframe.plan.whole_table import Runtime

MERGES = ("evidence", "any")


@dataclasses.dataclass(frozen=True)
class Cluster:
    """sem_dedup's and sem_cluster_by's planner (a ``whole_table.Operator``): the arguments, checked, and the AI steps.

    Parameters:
        fn: "sem_dedup" (the first row of each cluster) or "sem_cluster_by" (every row with its cluster).
        template: the statement as given; ``columns``: the columns it reads; ``what``: the statement
            with each field written as its column's name.
        k, threshold, merge: candidates per row, the least cosine similarity (None: any), how clusters join.
        model: the model's name, for the quality guard's message.
        embed: the embedding step over column ``t``; ``check``: the yes/no step over column ``q``.
    """

    fn: str
    template: str
    columns: tuple
    what: str
    k: int
    threshold: float | None
    merge: str
    model: str
    embed: Expression = dataclasses.field(repr=False)
    check: Expression = dataclasses.field(repr=False)

    @property
    def note(self) -> str:
        name = "SemDedup" if self.fn == "sem_dedup" else "SemClusterBy"
        return f"{name} {self.template!r} k={self.k} merge={self.merge}"

    def calls(self, rows: int | None) -> str:
        return expected_calls(rows, self.k)

    def line(self, input: LogicalPlan, stats: dict | None) -> str:
        if stats is not None:
            return f"{self.note} -> blocking: {stats['calls']:,} pair checks, {stats['clusters']:,} clusters"
        rows = known_rows(input)
        return f"{self.note} -> blocking {calls_word(None if rows is None else rows * self.k)} (at most)"

    def run(self, runtime: Runtime, input: LogicalPlan) -> tuple[pa.Table, dict]:
        """The rows with their ``cluster_id`` (sem_cluster_by) or each cluster's first row (sem_dedup), and ``sem_stats``."""
        table = runtime.table(input)
        docs = [document(self.columns, r) for r in table.select(list(self.columns)).to_pylist()]
        calls = Calls()
        pairs: list[tuple[int, int]] = []
        closeness: dict[tuple[int, int], float] = {}
        if len(docs) > 1:
            vectors = ask(runtime, pa.table({"t": pa.array(docs, pa.string())}), "v", self.embed, Calls())
            ok = [i for i, v in enumerate(vectors) if v is not None]
            unit = np.array([vectors[i] for i in ok], dtype=np.float64)
            unit = unit / np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12) if len(ok) else unit
            for a, b in candidate_pairs(unit, self.k, self.threshold):
                pairs.append((ok[a], ok[b]))
                closeness[(ok[a], ok[b])] = float(unit[a] @ unit[b])
        questions = [f"Record 1: {docs[a]}\nRecord 2: {docs[b]}\nStatement: the two records' {self.what}.\n"
                     "Is the statement true? Answer yes or no." for a, b in pairs]
        answers = ask_texts(runtime, questions, self.check, calls)
        checked = [(a, b, None if x is None else str(x) == "yes") for (a, b), x in zip(pairs, answers)]
        # The most similar pairs join first: a wrong "yes" then meets clusters its other checks speak against.
        checked.sort(key=lambda c: -closeness[(c[0], c[1])])
        ids, refused = cluster_ids(len(docs), checked, self.merge)
        out = first_of_each(table, ids) if self.fn == "sem_dedup" else table.append_column(
            "cluster_id", pa.array(ids, pa.int64()))
        said = [same for _, _, same in checked if same is not None]
        # The guard: a model that says yes to every pair groups rows by chance, not by sameness.
        quality = warn_low_information(self.model, [all_yes(sum(said), len(said))], where=self.fn)
        stats = calls.as_dict(pairs=calls.calls, clusters=len(set(ids)), refused_merges=refused, yes=sum(said),
                              quality=quality)
        return out, finish(self.note, stats, calls)


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


def first_of_each(table: pa.Table, ids: list[int]) -> pa.Table:
    """The first row of each cluster, with its ``cluster_id``."""
    seen: set[int] = set()
    idx = pa.array([i for i, c in enumerate(ids) if not (c in seen or seen.add(c))], pa.int64())
    return table.take(idx).append_column("cluster_id", pa.array(ids, pa.int64()).take(idx))


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
