"""The semantic operators as ``DataFrame`` methods: each builds a lazy plan (see ``inferframe.functions``' modules).

Example:
    >>> import inferframe as ifr
    >>> ifr.from_pydict({"r": ["Fun."]}).sem_filter("{r} is positive", model="gemma-3-270m").column_names
    ['r', 'sem_filter', 'sem_filter_error']
"""

from __future__ import annotations

from typing import Any

from inferframe.plan.whole_table import WholeTable


class SemanticMethods:
    """``sem_filter``, ``sem_topk``, ``sem_rank``, ``sem_agg``, ``sem_dedup``, ``sem_cluster_by``, ``sem_join``,
    ``sem_sim_join`` and ``sem_stats``, mixed into ``DataFrame``."""

    def sem_filter(self, template: str, **options: Any) -> "DataFrame":
        """Keep the rows for which a statement about them is true, ``"{review} is a positive review"`` (see
        ``inferframe.functions.sem_filter``: plans, cascades with target_recall=/target_precision=, errors: a failed
        row is kept with ``sem_filter_error`` unless ``error_column=False``).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"r": ["Fun."]}).sem_filter("{r} is positive", model="gemma-3-270m").column_names
            ['r', 'sem_filter', 'sem_filter_error']
        """
        from inferframe.functions import sem_filter

        return sem_filter(self, template, **options)

    @property
    def sem_stats(self) -> dict | None:
        """What a whole-table semantic operator (sem_topk, sem_agg, sem_dedup, sem_cluster_by) asked in its last
        run: its plan, calls, jobs and failures. Reading it starts no job: it is None before the operator has
        run (run it first: ``to_pydict()``, ``show()``, ``collect()``, a write), and None for any other DataFrame.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1]}).sem_stats is None
            True
            >>> ifr.from_pydict({"r": ["Wow!"]}).sem_topk("{r} is enthusiastic", k=1, model="gemma-3-270m").sem_stats is None
            True
        """
        return self._plan.stats if isinstance(self._plan, WholeTable) else None

    def sem_topk(self, template: str, k: int, **options: Any) -> "DataFrame":
        """The k rows that best fit the statement, best first, by the model's judgement (``inferframe.functions.sem_topk``).

        ``plan=``: "quick" (quickselect by pairwise comparisons, about 2n + k(k-1)/2 calls), "rerank"
        (a 1-``scale`` score per row, then the comparisons among the best max(k, ceil(``oversample`` * k))
        rows plus those tied with the last: n + O(m) calls) or "auto" (default: "quick" where
        n <= 3m, else "rerank"). ``sem_stats`` names the plan and the calls of each phase
        (``score_calls``, ``compare_calls``). ``method=`` is classify_text's, as for sem_filter.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"r": ["Wow!", "Meh."]}).sem_topk("{r} is enthusiastic", k=1, model="gemma-3-270m").column_names
            ['r']
        """
        from inferframe.functions import sem_topk

        return sem_topk(self, template, k, **options)

    def sem_rank(self, template: str, **options: Any) -> "DataFrame":
        """Lazy: a 1-N score column per row and a sort on it, best first (``inferframe.functions.sem_topk.sem_rank``).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"r": ["Wow!"]}).sem_rank("{r} is enthusiastic", model="gemma-3-270m").column_names
            ['r', 'sem_rank', 'sem_rank_error']
        """
        from inferframe.functions import sem_rank

        return sem_rank(self, template, **options)

    def sem_agg(self, template: str, group_by: Any = None, **options: Any) -> "DataFrame":
        """One model-written answer per group by hierarchical reduction (``inferframe.functions.sem_agg``).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"r": ["Late.", "Cold."]}).sem_agg("Summarise the complaints in {r}", model="gemma-3-270m").column_names
            ['sem_agg']
        """
        from inferframe.functions import sem_agg

        return sem_agg(self, template, group_by=group_by, **options)

    def sem_dedup(self, template: str, **options: Any) -> "DataFrame":
        """One row per cluster of rows the model finds the same (``inferframe.functions.sem_dedup``).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"n": ["Joe's", "Joes"]}).sem_dedup("{n} are the same business", model="gemma-3-270m").column_names
            ['n', 'cluster_id']
        """
        from inferframe.functions import sem_dedup

        return sem_dedup(self, template, **options)

    def sem_cluster_by(self, template: str, **options: Any) -> "DataFrame":
        """Every row with a ``cluster_id``: rows the model finds the same share one (``inferframe.functions.sem_dedup``).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"n": ["Joe's", "Joes"]}).sem_cluster_by("{n} are the same business", model="gemma-3-270m").column_names
            ['n', 'cluster_id']
        """
        from inferframe.functions import sem_cluster_by

        return sem_cluster_by(self, template, **options)

    def sem_join(self, other: "DataFrame", predicate: str, **options: Any) -> "DataFrame":
        """The pairs of rows for which a model says ``predicate`` holds (``inferframe.functions.sem_join``).

        The plan (per-side property + hash join, embedding blocking + pair check, or nested loop) is
        chosen by estimated calls and cost, and shown with its estimate by ``explain()``.

        Example:
            >>> import inferframe as ifr
            >>> a = ifr.from_pydict({"review": ["great", "awful"]})
            >>> a.sem_join(a, "{review:left} and {review:right} agree", model="gemma-3-270m").column_names
            ['review', 'right.review']
        """
        from inferframe.functions import sem_join

        return sem_join(self, other, predicate, **options)

    def sem_sim_join(self, other: "DataFrame", on: str, k: int = 5, **options: Any) -> "DataFrame":
        """For every row, the ``k`` most similar rows of ``other`` by embedding (``inferframe.functions._sem_join_api.sem_sim_join``).

        Example:
            >>> import inferframe as ifr
            >>> q = ifr.from_pydict({"t": ["a red apple"]})
            >>> docs = ifr.from_pydict({"t": ["a green car", "a ripe red apple"]})
            >>> q.sem_sim_join(docs, on="t", k=1).select("right.t", "rank").to_pydict()
            {'right.t': ['a ripe red apple'], 'rank': [1]}
        """
        from inferframe.functions._sem_join_api import sem_sim_join

        return sem_sim_join(self, other, on, k=k, **options)
