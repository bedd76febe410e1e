"""AI columns inside Spark's own plan: an inferframe expression run by a scalar Arrow UDF in each Python worker.

``inferframe.spark.functions`` (``AF.prompt(...)``) and the Spark SQL functions (``ai_classify``...) are
pyspark Columns made of a ``ColumnUDF``: Spark calls it with one Arrow batch of the inputs at a time and
gets the AI answers back, so Spark's optimizer sees an ordinary deterministic expression. A filter on
other columns runs before it, and a select that drops the column never calls it.

In the worker, a batch runs through the same physical operators as locally (``UDFStage`` through
``UDFOperator``, then the projections), with the session's one budget per endpoint and model leased
from the driver's service. The counters go to that service tagged with the Spark SQL execution
(``spark.sql.execution.id``), and the driver publishes each execution's totals as ``ifr.last_run()``
(``SessionRuns``).

A failed row is NULL. Its error is kept beside the answer for ``ai_error(...)``: Spark chains a UDF whose
one argument is another UDF in the same Python worker, handing it the very Arrow array the inner one
returned, so ``ErrorOf`` finds that array's errors by identity (``remember``/``errors_of``).

Example:
    >>> import pyarrow as pa
    >>> values = pa.array(["a", None])
    >>> remember(values, pa.array([None, "timeout: no answer"]))
    >>> errors_of(values).to_pylist()
    [None, 'timeout: no answer']
"""

from __future__ import annotations

import collections
import hashlib
import json
import threading
import time
import warnings
import uuid
from types import MappingProxyType
from typing import Any, Callable

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.plan import physical as pp
from inferframe.runners import spark_plan as sp
from inferframe.runtime.store import flush_open_stores

VALUE, ERROR = "__ai", "__ai_error"
# The latest answers of this worker and their errors; ai_error reads the array it is handed at once.
_RECENT: collections.OrderedDict[int, tuple[pa.Array, pa.Array]] = collections.OrderedDict()
_RECENT_LOCK = threading.Lock()
_RECENT_KEPT = 64


def remember(values: pa.Array, errors: pa.Array) -> None:
    """Keep ``errors`` for ``values`` (the array a ColumnUDF returns) until ``errors_of`` asks, or 64 later arrays."""
    with _RECENT_LOCK:
        _RECENT[id(values)] = (values, errors)
        while len(_RECENT) > _RECENT_KEPT:
            _RECENT.popitem(last=False)


def errors_of(values: pa.Array) -> pa.Array | None:
    """The errors kept for exactly this array (identity, not equality), or None."""
    with _RECENT_LOCK:
        found = _RECENT.get(id(values))
    return found[1] if found is not None and found[0] is values else None


def error_text(errors: pa.Array) -> pa.Array:
    """A ``<name>_error`` struct column as one string per row: ``'kind: message'``, NULL where the row succeeded."""
    out = []
    for e in errors.to_pylist():
        out.append(None if not e else f"{e.get('kind') or 'error'}: {e.get('message') or ''}".rstrip(": "))
    return pa.array(out, pa.string())


# What each physical operator is to a column: the table it reads, a step per row, or neither (PhysicalOp).
_ROLE = MappingProxyType({pp.ReadTable: "source", pp.UDFStage: "call", pp.Project: "map", pp.PhysicalOp: None})


def column_chain(op: pp.PhysicalOp) -> list[pp.PhysicalOp]:
    """The operators over the plan's in-memory table, first to last; PlanError on any that is not per row."""
    chain = []
    while (role := pp.dispatch(_ROLE, op)) != "source":
        if role is None:
            raise PlanError(f"This AI function cannot run as a Spark column ({type(op).__name__} is not one answer "
                            "per row); use inferframe.spark.with_columns or the Spark runner for it.")
        chain.append(op)
        op = op.input
    return chain[::-1]


class ColumnUDF:
    """Spark's scalar Arrow UDF for one AI column: input arrays in, the answers (NULL where a row failed) out.

    Parameters:
        job: the session's job id (one per SparkContext: every AI column of the session shares the worker's services).
        link: the session service's ``ServiceLink``.
        chain: the physical operators after the in-memory table (``column_chain``).
        inputs: the names of the inputs, in the UDF's argument order (each is read as a string).
        value_type: the Arrow type Spark expects back.
    """

    def __init__(self, job: str, link: Any, chain: list[pp.PhysicalOp], inputs: list[str], value_type: pa.DataType,
                 label: str = "ai", as_json: bool = False, stable_id: bool = False) -> None:
        self.job, self.link, self.chain, self.inputs, self.value_type = job, link, chain, inputs, value_type
        self.as_json = as_json  # a struct answer as JSON text (Spark SQL's ai_extract)
        # An id the stages are kept under in the worker: made once on the driver, or ``label`` itself when the
        # call is built in each task (Spark SQL) and must find the operator an earlier task built.
        self.id = f"{job}-{label}" if stable_id else f"{job}-{label}-{uuid.uuid4().hex[:8]}"
        calls = {i for i, op in enumerate(chain) if pp.dispatch(_ROLE, op) == "call"}
        self.stages = {i: sp.UDFPartitions(job, f"{self.id}-s{i}", op, link) for i, op in enumerate(chain) if i in calls}
        self.maps = {i: sp.MapPartitions(op) for i, op in enumerate(chain) if i not in calls}

    def __call__(self, *arrays: pa.Array) -> pa.Array:
        from pyspark import TaskContext

        task = TaskContext.get()
        execution = (task.getLocalProperty("spark.sql.execution.id") if task is not None else None) or "none"
        worker = sp.WorkerServices.for_job(f"{self.job}:x{execution}", self.link, tag=f"x{execution}|")
        batch = pa.RecordBatch.from_arrays([a.cast(pa.string()) for a in arrays], names=self.inputs)
        before = worker.rows()
        stream: Any = iter([batch])
        for i in range(len(self.chain)):
            stream = self.stages[i].built(worker).op.run(stream) if i in self.stages else self.maps[i](stream)
        done = [b for b in stream if b.num_rows]
        out = pa.Table.from_batches(done) if done else None
        values, errors = self._split(out, batch.num_rows)
        flush_open_stores()  # paid answers are stored before Spark counts the task done
        self._count(worker, before, task, execution)
        remember(values, errors)
        return values

    def _split(self, out: pa.Table | None, n: int) -> tuple[pa.Array, pa.Array]:
        if out is None or out.num_rows == 0:
            return pa.nulls(n, self.value_type), pa.nulls(n, pa.string())
        values = out.column(VALUE).combine_chunks()
        if self.as_json:
            values = pa.array([None if v is None else json.dumps(v, default=str) for v in values.to_pylist()], pa.string())
        values = values.cast(self.value_type) if values.type != self.value_type else values
        # Every AI column the call made (ai_similarity: one per side); a row's first error is its error.
        found = [error_text(out.column(c).combine_chunks()) for c in out.column_names
                 if c.startswith(VALUE) and c.endswith("_error") and pa.types.is_struct(out.schema.field(c).type)]
        errors = [next((e[i].as_py() for e in found if e[i].is_valid), None) for i in range(n)]
        return values, pa.array(errors, pa.string())

    def _count(self, worker: Any, before: dict, task: Any, execution: str) -> None:
        zero = dict.fromkeys(sp.ROW_FIELDS, 0)
        delta = {label: {k: v - before.get(label, zero)[k] for k, v in rows.items()}
                 for label, rows in worker.rows().items()}
        part = task.partitionId() if task is not None else 0
        # One key per batch of a partition: a partition that Spark runs again replaces its counts.
        n = worker.batches[(self.id, part)] = worker.batches.get((self.id, part), 0) + 1
        self.link.call("rows", f"x{execution}|{self.id}:{part}:{n}", delta)
        worker.report()


class ErrorOf:
    """``ai_error(<an AI column>)``: the error of each row of the AI column it is handed, NULL where it succeeded."""

    def __call__(self, values: pa.Array) -> pa.Array:
        errors = errors_of(values)
        if errors is None:
            raise PlanError("ai_error() takes an AI function call itself, e.g. ai_error(ai_classify(review, "
                            "array('positive', 'negative'))), not an expression over one.")
        return errors


class SessionRuns:
    """The driver's side: each Spark SQL execution's counters, published as ``last_run()`` as they arrive, and
    stored in the run history (``ifr.runs()``) once Spark has no job running.

    Set as the session service's ``on_change``: the latest execution with AI work is the last run.

    Parameters:
        publish: makes a list of totals the last run's (``observe.progress.publish_last``).
        busy: whether Spark runs a job now (None: runs are not stored in the history).
        record: stores one execution (its counters and start time) in the run history.
    """

    def __init__(self, publish: Callable[[list[dict]], None], busy: Callable[[], bool] | None = None,
                 record: Callable[[Any, float], None] | None = None) -> None:
        self.publish, self.record = publish, record
        self._lock = threading.Lock()
        self.latest = -1
        self._counters: dict[str, Any] = {}  # execution tag -> its RunCounters
        self._started: dict[str, float] = {}
        self._stored: set[str] = set()
        if busy is not None and record is not None:
            threading.Thread(target=self._watch, args=(busy,), name="inferframe-spark-session-runs", daemon=True).start()

    def __call__(self, service: Any, key: str) -> None:
        from inferframe.observe.stats import RunCounters

        tag = key.split("|", 1)[0]
        if not tag.startswith("x"):
            return
        number = int(tag[1:]) if tag[1:].isdigit() else 0
        with self._lock:
            # A report after its run was stored (an action's end seen before another task's report: Connect's
            # progress events name no action) still counts in last_run(): the service holds every report.
            late = tag in self._stored
            counters = RunCounters() if late else self._counters.setdefault(tag, RunCounters())
            if not late:
                self._started.setdefault(tag, time.time())
            prefix = f"{tag}|"
            for source, snaps in service.counter_reports(prefix).items():
                counters.merge(source, snaps)
            rows = service.row_counts(prefix)
            if rows:
                counters.merge("spark:rows", [{**dict.fromkeys(sp.ROW_FIELDS, 0), **r} for r in rows])
            if number >= self.latest:  # a late report of an earlier execution leaves the last run as it is
                self.latest = number
                self.publish([s.as_dict() for s in counters.runs()])

    def _watch(self, busy: Callable[[], bool]) -> None:
        while True:
            time.sleep(0.5)
            try:
                if busy():
                    continue
            except Exception:  # the SparkContext stopped: what it ran is stored below, then the watch ends
                self._store_all()
                return
            self._store_all()

    def _store_all(self) -> None:
        with self._lock:
            done = [(t, self._counters.pop(t), self._started.pop(t)) for t in list(self._counters)]
            self._stored.update(t for t, _, _ in done)
        for _, counters, started in done:
            try:
                self.record(counters, started)
            except Exception as e:  # the history is a record of the work, never a reason to fail it
                warnings.warn(f"inferframe could not store a Spark run in the run history: {type(e).__name__}: {e}",
                              stacklevel=1)


def record_run(counters: Any, started: float) -> None:
    """Store one Spark SQL execution's AI work in the run history (``ifr.runs()``), as a job's run is stored."""
    from inferframe.observe.recorder import RunRecorder
    from inferframe.session import current, remember_run

    session = current()
    if not session.history.enabled:
        return
    labels = sorted({r.label for r in counters.runs()})
    fingerprint = hashlib.sha256(json.dumps(["spark", labels]).encode()).hexdigest()[:16]
    # A call's label is "operator[model]"; the provider is not in the counters a worker reports.
    calls = [{"label": label, "provider": None, "model": label.partition("[")[2].rstrip("]") or label}
             for label in labels]
    job = {"fingerprint": fingerprint, "calls": calls,
           "directory": session.history_dir()}
    # Not live: the execution has ended, so a "running" row first would only be a state a reader can catch.
    recorder = RunRecorder(job, [], sample=0.0, counters=counters, on_stored=remember_run, live=False)
    recorder.started = started
    recorder.finish()
