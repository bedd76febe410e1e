"""What a job with AI calls records in the run history: its identity (``job_info``) and a recorder (``recording``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any, Iterator

import pyarrow as pa

from inferframe.plan import logical as lp
from inferframe.plan.inspect import ai_calls, row_steps, whole_tables


def job_info(plan: lp.LogicalPlan) -> dict:
    """The pipeline's identity and calls: the same for every run of the same prompts, whatever the data.

    The fingerprint covers every AI call (``AICall.fingerprint``: for a prompt its endpoint, provider
    and URL, model, system message, options and return format; for a cascade its stages; for an
    in-process model its model and settings), the projections, filters and aggregations around them,
    and the output schema; not the input data (its files, a limit), the cache or any key. Its ``directory`` is the session's ``history_dir`` given the first AI call's cache directory.
    """
    from inferframe.session import current

    calls, ident = [], []
    directory = None
    for _, node in ai_calls(plan):
        call = node.udf.call
        if call is None:
            continue
        if call.summary is not None:  # a download or an image step has no model to list
            calls.append(call.summary)
        ident.append(call.fingerprint)
        runtime = getattr(call.config, "runtime", None)
        directory = directory or (runtime.cache_dir if runtime is not None else None)
    ident.append([[f.name, str(f.type)] for f in plan.schema])
    # What is done to the rows around the calls: a column stripped and lowercased after the model
    # (the demo) is another pipeline than the raw answers, whose shares must not be compared.
    ident.append(list(row_steps(plan)))
    fingerprint = hashlib.sha256(json.dumps(ident, default=str).encode()).hexdigest()[:16]
    return {"fingerprint": fingerprint, "calls": calls, "directory": current().history_dir(cache_dir=directory)}


def ai_columns(schema: pa.Schema) -> list[str]:
    """The output columns an AI call produced: those with a ``<name>_error`` side column."""
    names = set(schema.names)
    return [n for n in schema.names if f"{n}_error" in names and pa.types.is_struct(schema.field(f"{n}_error").type)]


def calls_a_model(plan: lp.LogicalPlan) -> bool:
    """The job asks a model somewhere: an AI call in a projection or filter (``sem_filter``), or a whole-table operator.

    Such a job is recorded whatever its output columns: a filter's verdicts or a top-k's order cost
    model calls too.

    Example:
        >>> import inferframe as ifr
        >>> calls_a_model(ifr.from_pydict({"t": ["a"]})._plan)
        False
        >>> calls_a_model(ifr.from_pydict({"t": ["a"]}).sem_filter("{t} is a greeting", model="gemma-3-270m")._plan)
        True
    """
    return next(ai_calls(plan), None) is not None or next(whole_tables(plan), None) is not None


@contextlib.contextmanager
def recording(plan: lp.LogicalPlan, counters: Any = None) -> Iterator[Any]:
    """Record the job into the run history (a ``RunRecorder``; None when history is off or the job calls no model).

    ``counters``: the job's ``RunCounters`` (the runner's services carry the same). The stored run
    becomes the session's ``last_recorded``, which ``evaluate()`` attaches to.
    """
    from inferframe.observe.recorder import RunRecorder
    from inferframe.session import current, remember_run

    columns = ai_columns(plan.schema)
    settings = current().history
    if not settings.enabled or not (columns or calls_a_model(plan)):
        yield None
        return
    recorder = RunRecorder(job_info(plan), columns, sample=settings.sample, max_sample=settings.max_sample,
                           counters=counters, on_stored=remember_run)
    try:
        yield recorder
    except (KeyboardInterrupt, GeneratorExit, SystemExit):  # stopped from outside: Ctrl-C, or the consumer quit
        recorder.finish(status="interrupted")
        raise
    except BaseException:
        recorder.finish(failed=True)
        raise
    recorder.finish()
