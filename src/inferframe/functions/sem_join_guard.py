"""A semantic step whose failed calls are counted: one warning with the count, or the job stopped past half.

``guarded`` wraps a DataFrame holding an AI column and its ``<name>_error`` column in a ``WholeTable``: a
run computes it once as one job, counts the rows that failed (``sem_join_batches.Failures``), warns once
(``SemanticFailuresWarning``) or raises ``ServiceError`` when more than half of at least 10 calls
failed, and keeps the answered rows. sem_join's pair checks and properties run through it.

Example:
    >>> import inferframe as ifr
    >>> df = ifr.from_pydict({"a": [1, 2], "x": ["yes", None], "x_error": [None, {"kind": "length", "message": "cut"}]})
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     out = guarded(df, "x", ["a"], "demo").to_pydict()
    >>> out, str(seen[0].message)[:48]
    ({'a': [1], 'x': ['yes']}, 'sem_join: 1 of 2 model calls failed (length: 1);')
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from inferframe.functions.sem_join_batches import Failures
from inferframe.observe.progress import last_run, record_operator
from inferframe.plan.whole_table import WholeTable

# record_operator's counts from last_run()'s fields
_TOTALS = (("calls", "rows_done"), ("failed", "errors"), ("requests", "requests"), ("cache_hits", "cache_hits"),
           ("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"), ("cost_usd", "cost"))


def guarded(df: Any, value: str, keep: list[str], what: str, shared: dict | None = None) -> Any:
    """``df`` (an AI column ``value`` and its ``<value>_error``) computed once as a whole, its failures counted:
    one ``SemanticFailuresWarning``, or a ``ServiceError`` past ``MAX_FAILED_SHARE``; the failed rows dropped.

    ``shared`` ({"done", "parts"}, its ``failures`` added on the first run): two such steps (projection's sides)
    counted together, warned once after both.
    """
    return type(df)(guarded_plan(df._plan, value, keep, what, shared))


def guarded_plan(plan: Any, value: str, keep: list[str], what: str, shared: dict | None = None) -> WholeTable:
    """``guarded`` over a logical plan: the ``WholeTable`` node (sem_join's planner builds it when the job runs)."""
    error = value + "_error"
    names = [*keep, value]
    schema = pa.schema([plan.schema.field(n) for n in names])

    def compute(source):
        table = source.to_arrow()
        answered = table.column(value).is_valid()
        errors = [e for e in table.column(error).to_pylist() if e is not None]
        state = shared if shared is not None else {"done": 0, "parts": 1}
        failures = state.setdefault("failures", Failures("sem_join"))
        failures.add(int(pa.compute.sum(answered).as_py() or 0), errors)
        runs = state.setdefault("runs", [])
        runs += last_run()  # this step's job has just ended in this thread
        state["done"] += 1
        if state["done"] > 1:  # several jobs (projection's sides): last_run() shows them as one entry per label
            for label in dict.fromkeys(r["label"] for r in runs):
                mine = [r for r in runs if r["label"] == label]
                total = {key: sum(r.get(field, 0) or 0 for r in mine) for key, field in _TOTALS}
                record_operator(label, total)
        failures.check()
        if state["done"] == state["parts"]:
            failures.warn()
        return table.filter(answered).select(names), {"calls": failures.calls, "failed": failures.failed}

    return WholeTable(plan, schema, f"SemJoinChecked {what} (failed calls counted)", compute,
                      lambda rows: "calls as below")
