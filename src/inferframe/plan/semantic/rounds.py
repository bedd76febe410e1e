"""What the whole-table operators' planners (sem_topk, sem_agg, sem_dedup) share: counts, a round of questions, warnings.

Each asks the model in rounds whose questions depend on the last answers. A round is one job, run by
the ``Runtime`` the dataframe layer passes in (so caching, rate limits, retries, errors as data and
the current runner apply): an in-memory table of the round's questions with the operator's AI step
(an expression built by ``functions``, held by the node: this layer builds no AI call) as a column.

Example:
    >>> document(("name", "city"), {"name": "Joes", "city": "Leeds"}), document(("a",), {"a": None})
    ('name: Joes; city: Leeds', '')
    >>> Calls(calls=2, failed=1).add(Calls(calls=3)).as_dict(plan="quick")["calls"]
    5
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import pyarrow as pa

from inferframe.errors import LowInformationWarning, SemanticFailuresWarning, warn_user
from inferframe.expressions.expression import Expression
from inferframe.observe.progress import last_run, record_operator
from inferframe.observe.recorder import DriftWarning
from inferframe.plan import logical as lp
from inferframe.plan.inspect import cheap_total, has_ai
from inferframe.plan.semantic.rel import Rel
from inferframe.plan.whole_table import Runtime


@dataclasses.dataclass
class Calls:
    """The model calls an operator made: ``calls`` questions asked in ``jobs`` jobs, ``failed`` of them failed.

    A question the response cache answers is counted too (``cache_hits`` of them); ``requests``, the
    tokens and ``cost_usd`` are what the jobs' ``last_run()`` totals say was sent and billed.
    """

    calls: int = 0
    jobs: int = 0
    failed: int = 0
    requests: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def count(self, answers: list, usage: list[dict]) -> None:
        """One job's answers (None: failed) and its ``last_run()`` totals."""
        self.calls += len(answers)
        self.jobs += 1
        self.failed += sum(a is None for a in answers)
        for u in usage:
            self.requests += u.get("requests", 0)
            self.cache_hits += u.get("cache_hits", 0)
            self.input_tokens += u.get("input_tokens", 0)
            self.output_tokens += u.get("output_tokens", 0)
            self.cost_usd += u.get("cost", 0.0)

    def add(self, other: "Calls") -> "Calls":
        """The two counts summed (an operator's phases into its total)."""
        return Calls(*(getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(self)))

    def as_dict(self, **extra: Any) -> dict:
        return {**dataclasses.asdict(self), **extra}


def document(columns: tuple, row: dict) -> str:
    """One row's values of the template's ``columns``: the value alone for one column, ``"a: ...; b: ..."`` for several."""
    if len(columns) == 1:
        return "" if row[columns[0]] is None else str(row[columns[0]])
    return "; ".join(f"{c}: {'' if row[c] is None else row[c]}" for c in columns)


def in_memory(table: pa.Table) -> lp.LogicalPlan:
    """A plan reading ``table``."""
    return lp.Source(lp.InMemory(table), table.schema)


def ask(runtime: Runtime, table: pa.Table, name: str, step: Expression, calls: Calls) -> list:
    """One job: ``step`` (an AI expression over ``table``'s columns) as column ``name``; its answers, counted in ``calls``.

    Rounds ask different questions by design, so the run history's drift warning (meant for one
    pipeline run again over similar data) is silenced for them; the operator judges its rounds
    together (one round's answers may all be alike by design: a pivot better than every candidate)
    and counts the failures of all of them in one warning.
    """
    plan = Rel(in_memory(table)).with_column(name, step).plan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DriftWarning)
        warnings.simplefilter("ignore", LowInformationWarning)
        warnings.simplefilter("ignore", SemanticFailuresWarning)
        answers = runtime.table(plan).column(name).to_pylist()
    # The job's own totals: it has just ended in this thread (jobs of other threads could end in between).
    calls.count(answers, last_run())
    return answers


def ask_texts(runtime: Runtime, texts: list[str], step: Expression, calls: Calls) -> list:
    """One job: ``step`` (an AI expression over column ``q``) of every text (None where the call failed)."""
    if not texts:
        return []
    return ask(runtime, pa.table({"q": pa.array(texts, pa.string())}), "a", step, calls)


def finish(note: str, stats: dict) -> dict:
    """``last_run()`` shows the operator as one entry (its rounds' sums); failed calls give one warning. Returns ``stats``."""
    record_operator(note, stats)
    warn_failed(note, stats)
    return stats


def warn_failed(note: str, stats: dict) -> None:
    """One SemanticFailuresWarning when calls of the operator failed: how many, and how to stop at the first.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as w:
        ...     warnings.simplefilter("always")
        ...     warn_failed("SemDedup '{a}' k=5", {"calls": 12, "failed": 3})
        >>> print(w[0].message)
        3 of 12 model calls failed in SemDedup '{a}' k=5 (a failed call counts as no answer; sem_stats has the counts). Pass on_error='raise' to stop at the first failure.
    """
    if stats.get("failed"):
        warn_user(f"{stats['failed']} of {stats.get('calls', 0)} model calls failed in {note} (a failed call counts "
                  "as no answer; sem_stats has the counts). Pass on_error='raise' to stop at the first failure.",
                  SemanticFailuresWarning)


def known_rows(plan: lp.LogicalPlan) -> int | None:
    """The rows ``plan`` gives where they are known without reading data or asking a model, else None."""
    return None if has_ai(plan) else cheap_total(plan)


def calls_word(n: int | None) -> str:
    """An estimate of calls as explain() writes it: ``est_calls=12`` or ``est_calls=?``."""
    return f"est_calls={'?' if n is None else n}"
