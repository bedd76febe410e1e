"""sem_topk's planner: its plans (quick, rerank), the rule that chooses one when the job runs, and their algorithm.

``sem_topk`` builds a ``WholeTable`` node holding a ``TopK`` (plain data: the arguments, checked, and the
AI steps ``functions.sem_topk`` built); calling it reads nothing. When a job reaches the node, ``run``
collects its input (it needs every row), chooses the plan for the rows it found and asks the rounds.

| plan | what runs | model calls |
|---|---|---|
| ``quick`` | a quickselect whose comparisons the model makes ("Which one better fits ...? A: ... B: ..."), every round one job, then the k chosen ordered by their wins among them | about 2n + k(k-1)/2 |
| ``rerank`` | a 1-``scale`` score per row (one job), the best m = max(k, ceil(oversample * k)) and those tied with the m-th kept, then quick among them | n + about 2m' + k(k-1)/2 |

``auto`` chooses "quick" where n <= 3m, "rerank" above (``choose_plan``). Every other pair is shown the
other way round (against a preference for one position); a failed comparison counts as "no
preference" and is counted. The quality guard asks up to 10 comparisons of the first round again with
A and B swapped.

Example:
    >>> import random
    >>> quickselect_top(list(range(20)), 3, lambda pairs: [a > b for a, b in pairs], random.Random(0))
    [19, 18, 17]
    >>> choose_plan(n=60, k=5, m=10), choose_plan(n=30, k=5, m=10)
    ('rerank', 'quick')
    >>> candidates_by_score([3, 5, None, 4, 5, 4], m=3)
    [1, 4, 3, 5]
    >>> estimate("auto", 100, k=5, m=10), estimate("auto", None, k=5, m=10)
    (('rerank', 140), (None, None))
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Callable

import pyarrow as pa

from inferframe.expressions.expression import Expression
from inferframe.observe.quality import MIN_SWAPS, swap_agreement, warn_low_information
from inferframe.plan.logical import LogicalPlan
from inferframe.plan.semantic.rounds import Calls, ask, ask_texts, calls_word, document, finish, known_rows
from inferframe.plan.whole_table import Runtime

# Comparisons the quality guard asks again with A and B swapped (a few extra calls per run).
SWAP_CHECKS = 10

# sem_topk's physical plans (plan=, as sem_join's).
PLANS = ("auto", "quick", "rerank")

# Compares (candidate, other) pairs in one round: True where the candidate is better, False or None (no preference) else.
Compare = Callable[[list[tuple[int, int]]], list[bool | None]]


@dataclasses.dataclass(frozen=True)
class TopK:
    """sem_topk's planner (a ``whole_table.Operator``): what the user asked, checked, and its AI steps.

    Parameters:
        template: the statement as given (for explain()); ``columns``: the columns it reads; ``what``:
            the statement with each field written as its column's name.
        k, plan, m, seed: the rows wanted, the plan asked ("auto", "quick", "rerank"), the candidates
            rerank keeps, the pivots' seed.
        model: the model's name, for the quality guard's message.
        compare: the comparison's AI step: a classification of column ``q`` into "A"/"B".
        score: rerank's score of a row (over ``columns``); None with plan="quick".
    """

    template: str
    columns: tuple
    what: str
    k: int
    plan: str
    m: int
    seed: int
    model: str
    compare: Expression = dataclasses.field(repr=False)
    score: Expression | None = dataclasses.field(default=None, repr=False)

    @property
    def note(self) -> str:
        return f"SemTopK {self.template!r} k={self.k} plan={self.plan}"

    def calls(self, rows: int | None) -> str:
        return expected_calls(self.plan, rows, self.k, self.m)

    def line(self, input: LogicalPlan, stats: dict | None) -> str:
        if stats is not None:
            return f"{self.note} -> {stats['plan']} for {stats['rows']:,} rows: {stats['calls']:,} calls"
        rows = known_rows(input)
        chosen, calls = estimate(self.plan, rows, self.k, self.m)
        if chosen is None:
            return f"{self.note} (plan chosen when the job runs: rows unknown before the run)"
        return f"{self.note} -> {chosen} {calls_word(calls)}"

    def run(self, runtime: Runtime, input: LogicalPlan) -> tuple[pa.Table, dict]:
        """The k best rows of ``input`` (collected once), best first, and its ``sem_stats``."""
        table = runtime.table(input)
        n = table.num_rows
        docs = [document(self.columns, r) for r in table.select(list(self.columns)).to_pylist()]
        chosen = choose_plan(n, self.k, self.m) if self.plan == "auto" else self.plan
        scored, compared, swapped = Calls(), Calls(), Calls()
        first_round: list[tuple[tuple[int, int], int | None]] = []

        def winners(shown: list[tuple[int, int]], calls: Calls) -> list[int | None]:
            """The row the model prefers of each (A, B) pair as shown (None: the call failed)."""
            questions = [f"Which one better fits: {self.what}?\nA: {docs[a]}\nB: {docs[b]}\nAnswer A or B."
                         for a, b in shown]
            answers = ask_texts(runtime, questions, self.compare, calls)
            return [None if x is None else (a if str(x) == "A" else b) for (a, b), x in zip(shown, answers)]

        def better(pairs: list[tuple[int, int]]) -> list[bool | None]:
            # Every other pair is asked the other way round, so a preference for one position cancels out.
            shown = [(a, b) if i % 2 == 0 else (b, a) for i, (a, b) in enumerate(pairs)]
            won = winners(shown, compared)
            if not first_round:
                first_round.extend(zip(shown, won))
            return [None if w is None else w == a for (a, _), w in zip(pairs, won)]

        candidates = list(range(n))
        if chosen == "rerank" and n > self.m:
            candidates = candidates_by_score(self._scores(runtime, table, scored), self.m)
        top = quickselect_top(candidates, self.k, better, random.Random(self.seed))
        agree, asked = swap_check(first_round, lambda shown: winners(shown, swapped))
        quality = warn_low_information(self.model, [swap_agreement(agree, asked)], where="sem_topk")
        total = scored.add(compared).add(swapped)
        stats = total.as_dict(
            plan=chosen, rows=n, candidates=len(candidates), score_calls=scored.calls, score_failed=scored.failed,
            compare_calls=compared.calls, compare_failed=compared.failed, swap_calls=swapped.calls,
            swap_agree=agree, swap_asked=asked, quality=quality)
        return table.take(pa.array(top, pa.int64())), finish(self.note, stats, total)

    def _scores(self, runtime: Runtime, table: pa.Table, calls: Calls) -> list[int | None]:
        """One job: the score of every row of ``table`` (None where it failed; counted)."""
        name = "sem_topk_score"
        while name in table.column_names or f"{name}_error" in table.column_names:
            name = "_" + name
        answers = ask(runtime, table.select(list(self.columns)), name, self.score, calls)
        return [None if a is None else int(a) for a in answers]


def quickselect_top(ids: list[int], k: int, better: Compare, rng: random.Random) -> list[int]:
    """The ``k`` best of ``ids`` by a batched comparator, ordered best first (quickselect, then wins among the k).

    Every round asks ``better`` once, with every remaining candidate against one random pivot.

    Example:
        >>> rounds = []
        >>> def better(pairs):
        ...     rounds.append(len(pairs))
        ...     return [a > b for a, b in pairs]
        >>> quickselect_top(list(range(60)), 5, better, random.Random(1))
        [59, 58, 57, 56, 55]
        >>> sum(rounds) < 60 * 59 // 2 * 0.3
        True
    """
    chosen: list[int] = []
    cand = list(ids)
    while k > 0 and cand:
        if len(cand) <= k:
            chosen += cand
            break
        pivot = cand[rng.randrange(len(cand))]
        others = [c for c in cand if c != pivot]
        answers = better([(c, pivot) for c in others])
        above = [c for c, a in zip(others, answers) if a is True]
        below = [c for c, a in zip(others, answers) if a is not True]
        if len(above) >= k:
            cand = above
        else:
            chosen += above + [pivot]
            k -= len(above) + 1
            cand = below
    return order_by_wins(chosen, better)


def order_by_wins(ids: list[int], better: Compare) -> list[int]:
    """``ids`` ordered by their wins in one round of all pairs among them (ties keep the given order).

    Example:
        >>> order_by_wins([1, 3, 2], lambda pairs: [a > b for a, b in pairs])
        [3, 2, 1]
    """
    pairs = [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]]
    wins = dict.fromkeys(ids, 0)
    for (a, b), answer in zip(pairs, better(pairs) if pairs else []):
        if answer is True:
            wins[a] += 1
        elif answer is False:
            wins[b] += 1
    return sorted(ids, key=lambda i: -wins[i])


def choose_plan(n: int, k: int, m: int) -> str:
    """plan="auto": "quick" for ``n`` rows where n <= 3m (``m`` candidates kept after scoring), else "rerank".

    Calls (the model's questions): quick asks about 2n comparisons (every round compares the
    remaining rows with a pivot; the rounds shrink geometrically) plus k(k-1)/2 to order the k chosen;
    rerank asks n scores plus the same quickselect among its m' candidates: about n + 2m' + k(k-1)/2.
    So rerank saves calls once n > 2m'. m' is m plus the rows tied with the m-th score, and on a
    1-5 scale ties are common (m' about 1.5m), so the break-even is about n = 3m: n <= 3m keeps
    "quick" (e.g. k=5, m=10: 30 rows cost about 60 + 10 comparisons either way), where it is no dearer
    and every row gets the model's pairwise judgement rather than a coarse score; above it
    "rerank" (60 rows, k=5: about 130 calls for quick, about 60 + 30 + 10 = 100 for rerank).

    Example:
        >>> [choose_plan(n, k=5, m=10) for n in (5, 30, 31, 1000)]
        ['quick', 'quick', 'rerank', 'rerank']
    """
    return "quick" if n <= 3 * m else "rerank"


def candidates_by_score(scores: list[int | None], m: int) -> list[int]:
    """The ids of the ``m`` best scores plus every id tied with the m-th, best first (ties keep the given order).

    A None score (failed) ranks below every score: such rows are candidates only where fewer than m rows scored.

    Example:
        >>> candidates_by_score([2, None, 5, 2, 1], m=2)
        [2, 0, 3]
        >>> candidates_by_score([None, 4, None], m=2)
        [1, 0, 2]
    """
    order = sorted(range(len(scores)), key=lambda i: -(scores[i] if scores[i] is not None else 0))
    if len(order) <= m:
        return order
    cut = scores[order[m - 1]]
    return [i for i in order if (scores[i] if scores[i] is not None else 0) >= (cut if cut is not None else 0)]


def swap_check(asked: list[tuple[tuple[int, int], int | None]],
               winners: Callable[[list[tuple[int, int]]], list[int | None]],
               most: int = SWAP_CHECKS) -> tuple[int, int]:
    """The quality guard's re-asks: up to ``most`` answered comparisons asked again with A and B swapped.

    Returns (comparisons that named the same winner both ways, comparisons answered both ways). With
    fewer than ``MIN_SWAPS`` answered comparisons nothing is asked: too few to judge.

    Example:
        >>> first = [((0, 1), 1), ((2, 3), 2), ((4, 5), 4), ((6, 7), 7), ((8, 9), 8), ((1, 2), 2)]
        >>> swap_check(first, lambda shown: [b for a, b in shown])   # always "B": the position, not the text
        (3, 6)
        >>> said = dict(first)   # a model that names the same winner whichever comes first
        >>> swap_check(first, lambda shown: [said[(b, a)] for a, b in shown])
        (6, 6)
        >>> swap_check(first[:3], lambda shown: [a for a, b in shown])
        (0, 0)
    """
    sample = [(pair, w) for pair, w in asked if w is not None][:most]
    if len(sample) < MIN_SWAPS:
        return 0, 0
    again = winners([(b, a) for (a, b), _ in sample])
    both = [(w, w2) for (_, w), w2 in zip(sample, again) if w2 is not None]
    return sum(w == w2 for w, w2 in both), len(both)


def estimate(plan: str, n: int | None, k: int, m: int) -> tuple[str | None, int | None]:
    """(the plan chosen for ``n`` rows, its calls, about), or (None, None) where plan="auto" and n is not known.

    Example:
        >>> estimate("quick", 20, k=5, m=10), estimate("rerank", None, k=5, m=10)
        (('quick', 50), ('rerank', None))
    """
    if n is None:
        return (None if plan == "auto" else plan), None
    chosen = choose_plan(n, k, m) if plan == "auto" else plan
    if chosen == "quick" or n <= m:
        kk = min(k, n)
        return chosen, (2 * n if n > k else 0) + kk * (kk - 1) // 2
    return chosen, n + _rerank_compares(k, m)


def _rerank_compares(k: int, m: int) -> int:
    return 2 * math.ceil(1.5 * m) + k * (k - 1) // 2  # m' (candidates with ties) about 1.5m on a 1-5 scale


def expected_calls(plan: str, n: int | None, k: int, m: int) -> str:
    """sem_topk's model calls before it runs, in words, for ``n`` input rows (None: not known before the run).

    Example:
        >>> expected_calls("auto", 100, k=5, m=10)
        'plan=rerank for 100 rows: about 140 calls (100 scores, about 40 comparisons)'
        >>> expected_calls("quick", 20, k=5, m=10)
        'plan=quick for 20 rows: about 50 calls (comparisons)'
    """
    pairs = k * (k - 1) // 2
    if n is None:
        return (f"rows not known before the run: plan=quick asks about 2n + {pairs} comparisons, plan=rerank n scores "
                f"and about {_rerank_compares(k, m)} comparisons" + (" (auto: quick up to "
                f"{3 * m} rows)" if plan == "auto" else ""))
    chosen, calls = estimate(plan, n, k, m)
    if chosen == "quick" or n <= m:
        return f"plan={chosen} for {n:,} rows: about {calls:,} calls (comparisons)"
    return (f"plan=rerank for {n:,} rows: about {calls:,} calls ({n:,} scores, about {_rerank_compares(k, m):,} "
            "comparisons)")
