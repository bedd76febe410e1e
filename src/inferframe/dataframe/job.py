"""One job's lifecycle, for every way a plan runs (collect, iteration, writes, interop exports).

A job with model calls gets its counters (the runner's services carry them to every AI call), the
progress line, its run in the history (``recording``), a one-line message on Ctrl-C saying what was
kept, and its HTML report when asked; a job without model calls gets none of them.

Example:
    >>> import inferframe as ifr
    >>> plan = ifr.from_pydict({"a": [1, 2]})._plan
    >>> [b.num_rows for b in run_batches(plan)]
    [2]
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator

import pyarrow as pa

from inferframe.dataframe.recording import recording
from inferframe.errors import carried_warnings
from inferframe.observe import job_progress
from inferframe.observe.stats import RunCounters
from inferframe.plan import logical as lp
from inferframe.plan.inspect import cheap_total, has_ai


@dataclasses.dataclass
class Job:
    """A running job: its plan, its counters (None without model calls) and its run recorder (None when not recorded)."""

    plan: lp.LogicalPlan
    counters: RunCounters | None = None
    recorder: Any = None

    def observe(self, batch: pa.RecordBatch) -> None:
        """Count one output batch into the run's distributions and review sample (and its trace's rows)."""
        if self.recorder is not None:
            self.recorder.observe(batch)
        if self.counters is not None and self.counters.trace is not None:
            self.counters.trace.rows += batch.num_rows


@contextlib.contextmanager
def job(plan: lp.LogicalPlan, progress: bool | None = None, report: str | None = None) -> Iterator[Job]:
    """Run the body as one job of ``plan`` (already runnable: whole-table operators computed).

    Warnings raised on the job's worker threads (a DataFrame that ``sql()`` reads runs on DuckDB's)
    come out at the user's line as the job ends (``carried_warnings``).

    Parameters:
        plan: the plan the runner executes.
        progress: show the progress line (None: the session's choice, on terminals and in notebooks).
        report: write the run's HTML report to this path when the job ends well (jobs that call a model).
    """
    with carried_warnings(), _job(plan, progress, report) as running:
        yield running


@contextlib.contextmanager
def _job(plan: lp.LogicalPlan, progress: bool | None, report: str | None) -> Iterator[Job]:
    if not has_ai(plan):
        yield Job(plan)
        return
    from inferframe.session import current

    counters = RunCounters()
    show = current().progress if progress is None else progress
    total = _total(plan) if show is not False else None
    try:
        with traced(plan, counters), job_progress(total, show, counters) as live, recording(plan, live) as recorder:
            if counters.trace is not None and recorder is not None:
                counters.trace.set_run_id(recorder.run_id)
            yield (running := Job(plan, counters, recorder))
    except KeyboardInterrupt as e:
        if e.args:
            raise
        from inferframe.dataframe.interrupt import interrupted_message

        # one line on what was kept and how to go on, instead of the executor's internals
        raise KeyboardInterrupt(interrupted_message(plan, [s.as_dict() for s in counters.runs()])) from None
    if report is not None and running.recorder is not None:
        from inferframe.dataframe.report import report as write_report

        write_report(running.recorder.run_id, report, directory=running.recorder.job["directory"])


@contextlib.contextmanager
def traced(plan: lp.LogicalPlan, counters: RunCounters) -> Iterator[None]:
    """Record the job's OpenTelemetry spans and metrics (``observe.otel``) when a provider is configured.

    Off, it costs a ``sys.modules`` lookup: ``opentelemetry`` is imported only by a process that configured it.
    The job's recorder goes on ``counters.trace``, where its AI operators find it.
    """
    import sys

    from inferframe.session import current

    setting = current().tracing
    if setting is None and "opentelemetry" not in sys.modules:
        yield
        return
    from inferframe.observe.otel import JobTrace, providers

    chosen = providers(setting)
    if chosen is None:
        yield
        return
    from inferframe.dataframe.recording import job_info
    from inferframe.runners import get_runner

    counters.trace = tracing = JobTrace(chosen, {"inferframe.plan.fingerprint": job_info(plan)["fingerprint"],
                                                 "inferframe.runner": type(get_runner()).__name__},
                                        getattr(setting, "worker_setup", None))
    status, error = None, None
    try:
        yield
    except (KeyboardInterrupt, GeneratorExit, SystemExit) as e:  # stopped from outside, as the history says it
        status, error = "interrupted", e
        raise
    except BaseException as e:
        error = e
        raise
    finally:
        tracing.finish(counters.runs(), error, status)


def run_batches(plan: lp.LogicalPlan, progress: bool | None = None, report: str | None = None) -> Iterator[pa.RecordBatch]:
    """The result of ``plan`` as record batches, as one job on the current runner."""
    from inferframe.runners import get_runner

    with job(plan, progress, report) as running:
        for batch in get_runner().run(plan, running.counters):
            running.observe(batch)
            yield batch


def write_in_workers(plan: lp.LogicalPlan, pending: Any, progress: bool | None = None,
                     report: str | None = None) -> list[str]:
    """Write ``plan`` where the runner's workers run (part files under ``pending``'s temporary directory), as one job.

    The part files appear in the target all at once when every worker succeeded; a failed or
    stopped job leaves the target as it was.
    """
    from inferframe.runners import get_runner

    try:
        with job(plan, progress, report) as running:
            groups = get_runner().write_parts(plan, pending, counters=running.counters)
    except BaseException:
        pending.abort()
        raise
    return pending.commit(groups)


def _total(plan: lp.LogicalPlan) -> int | None:
    """Rows the job will produce, when the plan, file metadata or a local text file's lines say (for the progress bar)."""
    from inferframe.io.row_count import progress_rows

    return cheap_total(plan, progress_rows)
