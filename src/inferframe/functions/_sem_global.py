"""What the whole-table semantic operators' API builders (``sem_topk``, ``sem_agg``, ``sem_dedup``) share.

Each checks its arguments, builds its AI steps and wraps its planner (``plan.semantic``: topk, agg,
cluster) in a lazy ``WholeTable`` node (``operator``). ``ask_labels``/``ask_prompts``/``run_job`` ask
the model through small DataFrames (sem_join's batches and bench/sem_global.py's naive plans use them);
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

import warnings
from typing import Any

import pyarrow as pa

from inferframe.errors import LowInformationWarning, PlanError, SemanticFailuresWarning
from inferframe.expressions.expression import col
from inferframe.expressions.nodes import column_not_found
from inferframe.functions._input_types import check_input
from inferframe.functions.ai import classify_text, prompt
from inferframe.functions.templates import Field, Template
from inferframe.observe.progress import last_run
from inferframe.observe.recorder import DriftWarning
from inferframe.plan import logical as lp
from inferframe.plan.semantic import rounds
from inferframe.plan.semantic.rounds import Calls, warn_failed
from inferframe.plan.whole_table import Operator, WholeTable

__all__ = ["Calls", "ask_labels", "ask_prompts", "check_columns", "criterion", "document", "frame", "model_name",
           "operator", "run_job", "warn_failed"]


def frame(df: Any, table: pa.Table) -> Any:
    """A DataFrame (of ``df``'s class) over an in-memory table."""
    return type(df)(lp.Source(lp.InMemory(table), table.schema))


def check_columns(df: Any, t: Template, fn: str, extra: tuple = ()) -> None:
    """A column the template reads (or in ``extra``) that ``df`` lacks, or one it reads that is not text, is a PlanError, before anything runs."""
    missing = [c for c in [*t.columns(), *extra] if c not in df.column_names]
    if missing:
        found = column_not_found(missing[0], df.schema().to_arrow())  # its "Did you mean" and the columns
        raise PlanError(f"{fn}(): the DataFrame has no column {missing[0]!r}; name one of its columns in the "
                        f"template. {found}")
    schema = df.schema().to_arrow()
    for name in t.columns():  # the one input rule of AI functions: a {field} reads text
        check_input(fn, schema.field(name), template=True)


def operator(df: Any, schema: pa.Schema, op: Operator) -> Any:
    """A lazy DataFrame (of ``df``'s class) of the rows ``op`` (a planner of ``plan.semantic``) makes of all of ``df``'s rows."""
    return type(df)(WholeTable(df._plan, schema, op.note, op=op))


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
    return rounds.document(tuple(t.columns()), row)


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
