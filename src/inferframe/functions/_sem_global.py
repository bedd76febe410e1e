"""What the whole-table semantic operators (``sem_topk``, ``sem_agg``, ``sem_dedup``) share.

They need every row, so each is a lazy ``WholeTable`` plan node: when a run reaches it, it collects its
input, runs its algorithm in Python, and asks the model through small inferframe DataFrames (one job
per round of questions), so caching, rate limits, retries, errors as data and the current runner apply.
``frame`` builds a DataFrame of the same class as the input without importing the dataframe layer.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.functions.templates import parse_template
    >>> t = parse_template("{name} and {city} are the same business", "sem_dedup")
    >>> criterion(t), document(t, {"name": "Joes", "city": "Leeds"})
    ('name and city are the same business', 'name: Joes; city: Leeds')
    >>> frame(ifr.from_pydict({"a": [1]}), pa.table({"b": [2]})).to_pydict()
    {'b': [2]}
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable

import pyarrow as pa

from inferframe.errors import LowInformationWarning, PlanError, SemanticFailuresWarning, warn_user
from inferframe.expressions.expression import col
from inferframe.expressions.nodes import column_not_found
from inferframe.functions.ai import classify_text, prompt
from inferframe.functions.templates import Field, Template
from inferframe.observe.progress import last_run, record_operator
from inferframe.observe.recorder import DriftWarning
from inferframe.plan import logical as lp
from inferframe.plan.whole_table import Compute, WholeTable

__all__ = ["Calls", "ask_labels", "ask_prompts", "check_columns", "criterion", "document", "frame", "model_name",
           "run_job", "warn_failed", "whole_table"]


@dataclasses.dataclass
class Calls:
    """The model calls an operator made: ``calls`` questions asked in ``jobs`` DataFrame jobs, ``failed`` of them failed.

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


def frame(df: Any, table: pa.Table) -> Any:
    """A DataFrame (of ``df``'s class) over an in-memory table."""
    return type(df)(lp.Source(lp.InMemory(table), table.schema))


def check_columns(df: Any, t: Template, fn: str, extra: tuple = ()) -> None:
    """A column the template reads (or in ``extra``) that ``df`` lacks is a PlanError, before anything runs."""
    missing = [c for c in [*t.columns(), *extra] if c not in df.column_names]
    if missing:
        found = column_not_found(missing[0], df.schema().to_arrow())  # its "Did you mean" and the columns
        raise PlanError(f"{fn}(): the DataFrame has no column {missing[0]!r}; name one of its columns in the "
                        f"template. {found}")


def whole_table(df: Any, schema: pa.Schema, note: str, compute: Compute, calls: Callable[[int | None], str]) -> Any:
    """A lazy DataFrame (of ``df``'s class) of the rows ``compute`` makes of all of ``df``'s rows (``plan.whole_table``).

    ``compute(source)`` gets ``df`` as it will run and collects it once: the operator builds its result
    from that table (collecting again would run its plan again, its model calls too, and could give
    other rows than the ones the model was asked about). It returns (table, ``sem_stats``); ``last_run()``
    then shows the operator as one entry (its jobs' sums).
    """
    def run(source: Any) -> tuple[pa.Table, dict]:
        table, stats = compute(source)
        record_operator(note, stats)  # last_run(): the operator's rounds as one entry
        warn_failed(note, stats)
        return table, stats

    return type(df)(WholeTable(df._plan, schema, note, run, calls))


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


def sealed(options: dict) -> dict:
    """``options`` with an ``api_key`` turned into a provider spec holding only its handle: the key never enters a plan's pickle.

    The operators' rounds capture their options in the plan; a key among them would travel in clear.

    Example:
        >>> out = sealed({"provider": "openai", "api_key": "sk-secret", "model": "gpt-5-mini"})
        >>> "api_key" in out, "sk-secret" in repr(out), out["provider"].key_ref is not None
        (False, False, True)
    """
    if not isinstance(options.get("api_key"), str):
        return options
    from inferframe.providers.registry import resolve
    from inferframe.session import current

    out = dict(options)
    out["provider"] = resolve(out.get("provider"), default=current().provider, model=out.get("model"),
                              api_key=out.pop("api_key"))
    return out


def model_name(options: dict) -> str:
    """The model an operator's calls use, for the quality guard's message (the embedded model when none is named)."""
    return str(options.get("model") or "gemma-3-270m")


def criterion(t: Template) -> str:
    """The template with every field written as its column's name: ``"review is the most enthusiastic"``."""
    return "".join(p.column if isinstance(p, Field) else p for p in t.parts).strip()


def document(t: Template, row: dict) -> str:
    """One row's values of the template's columns: the value alone for one column, ``"a: ...; b: ..."`` for several."""
    columns = t.columns()
    if len(columns) == 1:
        return "" if row[columns[0]] is None else str(row[columns[0]])
    return "; ".join(f"{c}: {'' if row[c] is None else row[c]}" for c in columns)


def ask_labels(df: Any, questions: list[str], labels: list[str], calls: Calls, options: dict,
               system_message: str) -> list[str | None]:
    """One job: classify every question into ``labels`` (None where the call failed; counted in ``calls``)."""
    if not questions:
        return []
    q = frame(df, pa.table({"q": pa.array(questions, pa.string())}))
    out = run_job(q.with_column("a", classify_text(col("q"), list(labels), system_message=system_message,
                                                   confidence_column=False, **options)), "a", calls)
    return [None if a is None else str(a) for a in out]


def ask_prompts(df: Any, prompts: list[str], calls: Calls, options: dict) -> list[str | None]:
    """One job: the model's answer to every prompt (None where the call failed; counted in ``calls``)."""
    if not prompts:
        return []
    q = frame(df, pa.table({"q": pa.array(prompts, pa.string())}))
    return run_job(q.with_column("a", prompt(col("q"), **options)), "a", calls)


def run_job(job: Any, column: str, calls: Calls) -> list:
    """The answers (``column``) of one round's job, counted in ``calls``. Rounds ask different questions by design,
    so the run history's drift warning (meant for one pipeline run again over similar data) is silenced for them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DriftWarning)
        # The operator judges its rounds together (one round's answers may all be alike by design: a pivot
        # better than every candidate) and counts the failures of all of them in one warning.
        warnings.simplefilter("ignore", LowInformationWarning)
        warnings.simplefilter("ignore", SemanticFailuresWarning)
        answers = job.to_pydict()[column]
    # The job's own totals: it has just ended in this thread (jobs of other threads could end in between).
    calls.count(answers, last_run())
    return answers
