"""sem_join's counted checks: a step whose failed calls are counted, one warning with the count, or the job stopped past half.

``guarded`` puts a plan holding an AI column and its ``<name>_error`` column under a ``WholeTable`` whose
planner is a ``Guard``: a run computes it once as one job, counts the rows that failed (``rounds.Calls``,
the one counter), warns once (``SemanticFailuresWarning``) or raises ``ServiceError`` when more than half
of at least 10 calls failed, and keeps the answered rows. sem_join's pair checks and properties run
through it; the projection's two sides share one ``Tally``, so their failures are counted and warned of
together.

Example:
    >>> import warnings
    >>> from inferframe.dataframe.plan_runtime import FrameRuntime
    >>> import inferframe as ifr
    >>> t = pa.table({"a": [1, 2], "x": ["yes", None], "x_error": [None, {"kind": "length", "message": "cut"}]})
    >>> node = guarded(in_memory(t), "x", ["a"], "demo", Tally(parts=1))
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     out = node.run(FrameRuntime(ifr.DataFrame), node.input)
    >>> out[0].to_pydict(), out[1], str(seen[0].message)[:48]
    ({'a': [1], 'x': ['yes']}, {'calls': 2, 'failed': 1}, 'sem_join: 1 of 2 model calls failed (length: 1);')
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc

from inferframe.observe.progress import record_operator
from inferframe.plan.logical import LogicalPlan
from inferframe.plan.semantic.rounds import Calls, collect, in_memory  # noqa: F401  (in_memory: the example)
from inferframe.plan.whole_table import Runtime, WholeTable

# record_operator's counts from last_run()'s fields
_TOTALS = (("calls", "rows_done"), ("failed", "errors"), ("requests", "requests"), ("cache_hits", "cache_hits"),
           ("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"), ("cost_usd", "cost"))
LOST = "their pairs are left out of the result"


@dataclasses.dataclass(eq=False)
class Tally:
    """What the guarded steps of one chosen plan counted together: ``parts`` steps (the projection's two sides: 2),
    ``done`` of them run, their calls (``rounds.Calls``) and their jobs' ``last_run()`` entries. It belongs to the
    chosen plan (kept on the ``SemJoin``'s key), so a run of another plan starts a new one."""

    parts: int
    done: int = 0
    calls: Calls = dataclasses.field(default_factory=Calls)
    runs: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, eq=False)
class Guard:
    """The counted check's planner (a ``whole_table.Operator``): the AI column ``value`` (and ``<value>_error``),
    the columns to ``keep``, ``what`` it checks (``"sem_join.check"``) and the ``tally`` it counts into."""

    value: str
    keep: tuple
    what: str
    tally: Tally = dataclasses.field(repr=False)

    @property
    def note(self) -> str:
        return f"SemJoinChecked {self.what} (failed calls counted)"

    def calls(self, rows: int | None) -> str:
        return "calls as below"

    def line(self, input: LogicalPlan, stats: dict | None) -> str:
        return self.note

    def run(self, runtime: Runtime, input: LogicalPlan) -> tuple[pa.Table, dict]:
        """The answered rows of ``input`` (one job), their failures counted: a warning after the last part, or a stop."""
        table, usage = collect(runtime, input)
        answered = table.column(self.value).is_valid()
        errors = [e for e in table.column(self.value + "_error").to_pylist() if e is not None]
        tally, calls = self.tally, self.tally.calls
        calls.calls += int(pc.sum(answered).as_py() or 0) + len(errors)
        calls.failures(errors)
        tally.runs += usage
        tally.done += 1
        if tally.done > 1:  # several jobs (projection's sides): last_run() shows them as one entry per label
            for label in dict.fromkeys(r["label"] for r in tally.runs):
                mine = [r for r in tally.runs if r["label"] == label]
                record_operator(label, {key: sum(r.get(field, 0) or 0 for r in mine) for key, field in _TOTALS})
        calls.check("sem_join")
        if tally.done == tally.parts:
            calls.warn("sem_join", LOST)
        return table.filter(answered).select([*self.keep, self.value]), {"calls": calls.calls, "failed": calls.failed}


def guarded(plan: LogicalPlan, value: str, keep: list[str], what: str, tally: Tally) -> WholeTable:
    """``plan`` (an AI column ``value`` and its ``<value>_error``) computed once as a whole, its failures counted in
    ``tally``: one ``SemanticFailuresWarning``, or a ``ServiceError`` past ``rounds.MAX_FAILED_SHARE``; the failed
    rows dropped."""
    schema = pa.schema([plan.schema.field(n) for n in [*keep, value]])
    return WholeTable(plan, schema, Guard(value, tuple(keep), what, tally))
