"""What the semantic operators' planners share: the one counter of their calls and failures, the one runner of a round.

Each asks the model in rounds whose questions depend on the last answers. A round is one job, run by
the ``Runtime`` the dataframe layer passes in (so caching, rate limits, retries, errors as data and
the current runner apply): an in-memory table of the round's questions with the operator's AI step
(an expression built by ``functions``, held by the node: this layer builds no AI call) as a column.
``ask`` is the one function that runs such a job; ``Calls`` is the one counter of what the rounds
asked and what failed, and its ``warn`` the one ``SemanticFailuresWarning`` of an operator.

Example:
    >>> document(("name", "city"), {"name": "Joes", "city": "Leeds"}), document(("a",), {"a": None})
    ('name: Joes; city: Leeds', '')
    >>> Calls(calls=2, failed=1).add(Calls(calls=3)).as_dict(plan="quick")["calls"]
    5
"""

from __future__ import annotations

import collections
import dataclasses
import warnings
from types import MappingProxyType
from typing import Any

import pyarrow as pa

from inferframe.errors import LowInformationWarning, SemanticFailuresWarning, ServiceError, warn_user
from inferframe.expressions.expression import Expression
from inferframe.observe.progress import last_run, record_operator
from inferframe.observe.recorder import DriftWarning
from inferframe.plan import logical as lp
from inferframe.plan.inspect import cheap_total, has_ai
from inferframe.plan.semantic.rel import Rel
from inferframe.plan.whole_table import Runtime

# An operator stops (``Calls.check``) when more than this share of its model calls failed, once it made at least
# MIN_CALLS: past half, the answers kept are the exception, and a config fault (too small max_tokens, a model that
# cannot answer the format) would fail the rest the same way.
MAX_FAILED_SHARE = 0.5
MIN_CALLS = 10
# What the rounds' jobs do not warn of themselves: rounds ask different questions by design (the run history's
# drift warning is meant for one pipeline run again over similar data), and the operator judges its rounds
# together (one round's answers may all be alike by design: a pivot better than every candidate) and counts the
# failures of all of them in one warning.
QUIET = (DriftWarning, LowInformationWarning, SemanticFailuresWarning)
_STATS = ("calls", "jobs", "failed", "requests", "cache_hits", "input_tokens", "output_tokens", "cost_usd")
_FIXES = MappingProxyType({
    "length": "the answers were cut off at max_tokens: raise max_tokens=..., or lower pairs_per_request=...",
    "schema": "the model's answers did not fit the format: use a stronger model (provider=..., model=...), or "
              "plan='nested' (one yes/no per pair)",
})


@dataclasses.dataclass
class Calls:
    """The model calls an operator made: ``calls`` questions asked in ``jobs`` jobs, ``failed`` of them failed.

    A question the response cache answers is counted too (``cache_hits`` of them); ``requests``, the
    tokens and ``cost_usd`` are what the jobs' ``last_run()`` totals say was sent and billed. The failed
    calls' kinds (``kinds``), the last one's message and the pairs they held (``lost``) name the fix.

    Example:
        >>> c = Calls(calls=5)
        >>> c.failures([{"kind": "length", "message": "cut off"}], lost=8)
        >>> c.failed, c.summary()
        (1, '1 of 5 model calls failed (length: 1)')
    """

    calls: int = 0
    jobs: int = 0
    failed: int = 0
    requests: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    lost: int = 0
    kinds: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    last: str = ""

    def count(self, answers: list, usage: list[dict], errors: list | None = None) -> None:
        """One job's answers (None: failed; ``errors``: their error records, where kept) and its ``last_run()`` totals."""
        self.job(len(answers), usage)
        errors = errors or [None] * len(answers)
        self.failures([e or {} for a, e in zip(answers, errors) if a is None])

    def job(self, asked: int, usage: list[dict]) -> None:
        """One job of ``asked`` calls, its ``last_run()`` totals; its failures are counted apart (``failures``)."""
        self.calls += asked
        self.jobs += 1
        for u in usage:
            self.requests += u.get("requests", 0)
            self.cache_hits += u.get("cache_hits", 0)
            self.input_tokens += u.get("input_tokens", 0)
            self.output_tokens += u.get("output_tokens", 0)
            self.cost_usd += u.get("cost", 0.0)

    def failures(self, errors: list[dict], lost: int = 0) -> None:
        """Calls that failed in the end (their error records), holding ``lost`` pairs between them."""
        self.failed += len(errors)
        self.lost += lost
        for e in errors:
            self.kinds[str(e.get("kind") or "unknown")] += 1
            self.last = str(e.get("message") or "")[:300]

    def add(self, other: "Calls") -> "Calls":
        """The two counts summed (an operator's phases into its total)."""
        out = Calls(*(getattr(self, f) + getattr(other, f) for f in _STATS), lost=self.lost + other.lost,
                    kinds=self.kinds + other.kinds, last=other.last or self.last)
        return out

    def as_dict(self, **extra: Any) -> dict:
        return {**{f: getattr(self, f) for f in _STATS}, **extra}

    def summary(self) -> str:
        kinds = ", ".join(f"{k}: {n}" for k, n in self.kinds.most_common())
        return f"{self.failed} of {self.calls} model calls failed" + (f" ({kinds})" if kinds else "")

    def fix(self) -> str:
        top = self.kinds.most_common(1)[0][0] if self.kinds else ""
        return _FIXES.get(top, "see the errors in last_run() and the run report")

    def check(self, operator: str, lost: str = "pairs") -> None:
        """Stop the job (``ServiceError``) when more than ``MAX_FAILED_SHARE`` of at least ``MIN_CALLS`` calls failed."""
        if self.calls >= MIN_CALLS and self.failed > MAX_FAILED_SHARE * self.calls:
            raise ServiceError(
                f"{operator} stopped: {self.summary()}, more than {MAX_FAILED_SHARE:.0%} of the calls; its result "
                f"would miss most {lost}. Fix: {self.fix()}. Last error: {self.last}")

    def warn(self, operator: str, effect: str) -> None:
        """The operator's one ``SemanticFailuresWarning``, where any call failed: the count, ``effect``, the fix.

        Example:
            >>> import warnings
            >>> c = Calls(calls=12)
            >>> c.failures([{"kind": "bad_request", "message": "HTTP 400"}] * 3)
            >>> with warnings.catch_warnings(record=True) as w:
            ...     warnings.simplefilter("always")
            ...     c.warn("SemDedup '{a}' k=5", "a failed call counts as no answer")
            >>> print(w[0].message)
            SemDedup '{a}' k=5: 3 of 12 model calls failed (bad_request: 3); a failed call counts as no answer. Fix: see the errors in last_run() and the run report; on_error='raise' stops at the first failure. Last error: HTTP 400
        """
        if self.failed:
            last = f" Last error: {self.last}" if self.last else ""
            warn_user(f"{operator}: {self.summary()}; {effect}. Fix: {self.fix()}; on_error='raise' stops at the "
                      f"first failure.{last}", SemanticFailuresWarning)


def document(columns: tuple, row: dict) -> str:
    """One row's values of the template's ``columns``: the value alone for one column, ``"a: ...; b: ..."`` for several."""
    if len(columns) == 1:
        return "" if row[columns[0]] is None else str(row[columns[0]])
    return "; ".join(f"{c}: {'' if row[c] is None else row[c]}" for c in columns)


def in_memory(table: pa.Table) -> lp.LogicalPlan:
    """A plan reading ``table``."""
    return lp.Source(lp.InMemory(table), table.schema)


def collect(runtime: Runtime, plan: lp.LogicalPlan) -> tuple[pa.Table, list[dict]]:
    """One job: ``plan``'s rows and the job's ``last_run()`` totals (it has just ended in this thread; jobs of other
    threads could end in between, so they are read here and nowhere later)."""
    table = runtime.table(plan)
    return table, last_run()


def ask(runtime: Runtime, table: pa.Table, name: str, step: Expression, calls: Calls, *, errors: bool = False,
        quiet: tuple = QUIET) -> Any:
    """One round: ``step`` (an AI expression over ``table``'s columns) as column ``name``, as one job; its answers.

    The job is counted in ``calls``, and so are its failed calls (None answers, with their error records where the
    step keeps them), unless ``errors``: then the answers and their error records are returned, the caller judging
    which calls failed in the end (``Calls.failures``: an answer cut off and asked again in halves did not).
    ``quiet``: the warnings the round's job does not give (``QUIET``).
    """
    rel = Rel(in_memory(table)).with_column(name, step)
    error = name + "_error"
    rel = rel.select(name, *([error] if error in rel.names else []))
    with warnings.catch_warnings():
        for category in quiet:
            warnings.simplefilter("ignore", category)
        out, usage = collect(runtime, rel.plan)
    answers = out.column(name).to_pylist()
    records = out.column(error).to_pylist() if error in out.column_names else [None] * len(answers)
    if errors:
        calls.job(len(answers), usage)
        return answers, records
    calls.count(answers, usage, records)
    return answers


def ask_texts(runtime: Runtime, texts: list[str], step: Expression, calls: Calls) -> list:
    """One round: ``step`` (an AI expression over column ``q``) of every text (None where the call failed)."""
    if not texts:
        return []
    return ask(runtime, pa.table({"q": pa.array(texts, pa.string())}), "a", step, calls)


def finish(note: str, stats: dict, calls: Calls) -> dict:
    """``last_run()`` shows the operator as one entry (its rounds' sums); failed calls give one warning. Returns ``stats``."""
    record_operator(note, stats)
    calls.warn(note, "a failed call counts as no answer (sem_stats has the counts)")
    return stats


def known_rows(plan: lp.LogicalPlan) -> int | None:
    """The rows ``plan`` gives where they are known without reading data or asking a model, else None."""
    return None if has_ai(plan) else cheap_total(plan)


def calls_word(n: int | None) -> str:
    """An estimate of calls as explain() writes it: ``est_calls=12`` or ``est_calls=?``."""
    return f"est_calls={'?' if n is None else n}"
