"""What a job with AI calls records in the run history: its identity (``job_info``) and a recorder (``recording``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any, Iterator

import pyarrow as pa

from inferframe.plan import logical as lp
from inferframe.plan.inspect import ai_calls


def _config(call) -> Any:
    owner = call.udf.owner
    return owner.args[0] if owner is not None and owner.args else None


def job_info(plan: lp.LogicalPlan) -> dict:
    """The pipeline's identity and calls: the same for every run of the same prompts, whatever the data.

    The fingerprint covers each AI call's endpoint, provider and URL, model, system message, options
    and return format, and the output schema; not the input data, the cache or any key. Its
    ``directory`` is the session's ``history_dir`` given the first AI call's cache directory.
    """
    from inferframe.session import current

    calls, ident = [], []
    directory = None
    for _, call in ai_calls(plan):
        c = _config(call)
        if c is None or not hasattr(c, "runtime"):
            continue
        provider = getattr(c.provider, "name", str(c.provider))
        calls.append({"label": c.label, "provider": provider, "base_url": getattr(c.provider, "base_url", None),
                      "model": c.model, "endpoint": c.endpoint, "prompt_version": c.runtime.prompt_version})
        ident.append([c.endpoint, provider, getattr(c.provider, "base_url", None), c.model, c.system_message,
                      repr(c.options), repr(c.format_request), repr(c.return_format), c.n_parts])
        directory = directory or c.runtime.cache_dir
    ident.append([[f.name, str(f.type)] for f in plan.schema])
    fingerprint = hashlib.sha256(json.dumps(ident, default=str).encode()).hexdigest()[:16]
    return {"fingerprint": fingerprint, "calls": calls, "directory": current().history_dir(cache_dir=directory)}


def ai_columns(schema: pa.Schema) -> list[str]:
    """The output columns an AI call produced: those with a ``<name>_error`` side column."""
    names = set(schema.names)
    return [n for n in schema.names if f"{n}_error" in names and pa.types.is_struct(schema.field(f"{n}_error").type)]


@contextlib.contextmanager
def recording(plan: lp.LogicalPlan) -> Iterator[Any]:
    """Record the job into the run history (a ``RunRecorder``; None when history is off or no AI column is out)."""
    from inferframe.observe.recorder import RunRecorder
    from inferframe.session import current

    columns = ai_columns(plan.schema)
    settings = current().history
    if not settings.enabled or not columns:
        yield None
        return
    recorder = RunRecorder(job_info(plan), columns, sample=settings.sample, max_sample=settings.max_sample)
    try:
        yield recorder
    except (KeyboardInterrupt, GeneratorExit, SystemExit):  # stopped from outside: Ctrl-C, or the consumer quit
        recorder.finish(status="interrupted")
        raise
    except BaseException:
        recorder.finish(failed=True)
        raise
    recorder.finish()
