"""What the Spark runner's tasks run: this project's own code over Arrow batches, in ``mapInArrow`` stages.

Each callable here is pickled into a Spark task and called with a partition's Arrow record batches:

- ``ReadPaths``: a file source, one file per partition, read through ``io.scan`` (pushed-down
  columns, filter and limit as locally);
- ``MapPartitions``: a per-batch physical operator (projection, filter, explode, ``map_batches``)
  through the local executor's ``map_stream``;
- ``UDFPartitions``: one ``@func``, ``@cls`` or AI call through ``UDFOperator``. The operator (a model
  class's instance, the AI call's event loop and HTTP clients) is built once per Python worker and
  job, and kept for the job's next partitions (Spark reuses its Python workers: seed 003's "load
  once per worker", done for the user);
- ``WritePartitions``: a partition's rows as part files of a pending write; the names go back.

Spark's Arrow types are narrower than Arrow's (a ``large_string`` comes back a ``string``): every
callable conforms its output to the Spark schema's Arrow form (``spark_arrow``), and the driver
casts the result back to the plan's schema.

Example:
    >>> import pyarrow as pa
    >>> from inferframe.plan import physical as pp
    >>> op = pp.MapBatches(schema=pa.schema([("a", pa.large_string())]), fn=lambda b: b)
    >>> out = list(MapPartitions(op)(iter([pa.record_batch({"a": pa.array(["x"], pa.large_string())})])))
    >>> out[0].schema.field("a").type
    DataType(string)
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import uuid
from typing import Any, Iterator

import pyarrow as pa

from inferframe.expressions.evaluate import to_pyarrow_filter
from inferframe.expressions.nodes import UDFCall
from inferframe.plan import logical as lp
from inferframe.plan import physical as pp
from inferframe.runtime.store import flush_open_stores

# The row counters (counted once per finished partition); the rest is spending, reported as it grows.
ROW_FIELDS = ("rows_done", "errors", "not_run", "cache_hits", "deduped", "truncated", "returned")
REPORT_SECONDS = 0.25


def spark_schema(schema: pa.Schema):
    """The Spark ``StructType`` of an Arrow schema (raises TypeError/ValueError where Spark has no such type)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def spark_arrow(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema Spark exchanges for ``schema`` (what a ``mapInArrow`` stage must yield)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema(schema), timezone="UTC")


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``schema``'s columns, in its order and types."""
    if batch.schema == schema:
        return batch
    return pa.RecordBatch.from_arrays([batch.column(n).cast(f.type) for n, f in zip(schema.names, schema)],
                                      schema=schema)


# --- sources --------------------------------------------------------------------------------------


class ReadPaths:
    """A file source on the executors: the partition holding id ``i`` reads the source's file ``i``."""

    def __init__(self, node: lp.Source) -> None:
        self.node = node
        self.out = spark_arrow(node.schema)

    def __call__(self, ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from inferframe.io import scan as io_scan

        node = self.node
        pred = to_pyarrow_filter(node.filter) if node.filter is not None else None
        columns = list(node.columns) if node.columns is not None else None
        for batch in ids:
            for i in batch.column("id").to_pylist():
                src = dataclasses.replace(node.source, paths=(node.source.paths[i],))
                for b in io_scan(src, columns=columns, filter=pred, limit=node.limit):
                    if b.num_rows:
                        yield conform(b, self.out)


# --- streaming operators --------------------------------------------------------------------------


class MapPartitions:
    """A per-batch physical operator over a partition, with the local executor's own code."""

    def __init__(self, op: pp.Map) -> None:
        self.op = op.alone()
        self.out = spark_arrow(op.schema)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from inferframe.execution.executor import map_stream

        for out in map_stream(self.op, batches):
            if out.num_rows:
                yield conform(out, self.out)


class Conform:
    """A batch in ``schema``'s columns and types (a ``concat`` input, cast as the local runner casts it)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        return conform(batch, self.schema)


class AggregateGroups:
    """One group's rows (``groupBy().applyInArrow``) through the local aggregation."""

    def __init__(self, node: lp.Aggregate) -> None:
        self.node = node
        self.out = spark_arrow(node.schema)

    def __call__(self, table: pa.Table) -> pa.Table:
        from inferframe.execution import operators as ops

        source = self.node.input.schema
        table = table.select(source.names).cast(source) if table.schema != source else table
        out = ops.aggregate(table, self.node.group_by, self.node.aggs, self.node.schema)
        return out.select(self.out.names).cast(self.out)


def aggregate_groups(node: lp.Aggregate):
    """``AggregateGroups`` as a plain function with type hints (pyspark reads them to pick the Arrow form)."""
    groups = AggregateGroups(node)

    def run(table: pa.Table) -> pa.Table:
        return groups(table)

    return run


# --- UDF stages -----------------------------------------------------------------------------------


class WorkerServices:
    """A Python worker's services for one job: keys from the driver's service, counters reported to it.

    Made once per worker process and job (``for_job``). Its coordinator leases the job's one budget
    from the driver (``spark_limits``).
    """

    _current: dict[str, Any] = {}

    def __init__(self, link: Any, tag: str = "") -> None:
        from inferframe.ai.run import RunServices
        from inferframe.observe.stats import RunCounters
        from inferframe.runners.spark_limits import SparkCoordinator

        for k, v in link.call("env").items():  # key handles, from the driver's memory: never in a closure
            os.environ.setdefault(k, v)
        self.link = link
        self.services = RunServices(SparkCoordinator(link), RunCounters(), None)
        # ``tag``: a prefix the driver groups this worker's reports by (a Spark SQL execution's id).
        self.source = f"{tag}{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.stages: dict[str, Any] = {}
        self.batches: dict[tuple, int] = {}  # (column, partition) -> batches counted (runners.spark_columns)
        self._stop = threading.Event()
        self._report_lock, self._reported = threading.Lock(), None
        threading.Thread(target=self._report_loop, name="inferframe-spark-report", daemon=True).start()

    @classmethod
    def for_job(cls, job: str, link: Any, tag: str = "") -> "WorkerServices":
        """This worker's services for ``job`` (``tag``: its reports' prefix); a new job closes the previous job's stages first."""
        found = cls._current.get(job)
        if found is None:
            for old in list(cls._current.values()):
                old.close()
            cls._current.clear()
            found = cls._current[job] = cls(link, tag)
        return found

    def rows(self) -> dict[str, dict]:
        return {s["label"]: {k: s[k] for k in ROW_FIELDS} for s in self.services.counters.snapshot()}

    def report(self, changed_only: bool = False) -> None:
        """This worker's spending (cumulative) to the driver; row counters travel per partition (``rows``).

        ``changed_only``: only if it changed since the last report, the periodic one's or a batch's. One lock over
        both: the periodic loop, which knew only its own reports, sent a batch's final spending again after the
        batch had, so once after a Connect action had ended (the driver took the session for busy again, and the
        run was not stored in the history until the next action)."""
        with self._report_lock:
            snapshot = self.services.counters.snapshot()
            spent = [(s["label"], s["requests"], s["input_tokens"], s["output_tokens"], s["retries"]) for s in snapshot]
            if not snapshot or (changed_only and spent == self._reported):
                return
            self._reported = spent
            self.link.call("report", self.source, [{**s, **dict.fromkeys(ROW_FIELDS, 0)} for s in snapshot])

    def _report_loop(self) -> None:
        while not self._stop.wait(REPORT_SECONDS):
            try:
                self.report(changed_only=True)
            except Exception:  # the job ended (its service is gone): nothing more to report
                return

    def close(self) -> None:
        self._stop.set()
        for stage in self.stages.values():
            stage.ctx.close()
        self.stages.clear()


@dataclasses.dataclass
class _Stage:
    ctx: Any
    op: Any


def worker_call(call: UDFCall) -> UDFCall:
    """The call as a Spark Python worker runs it: the worker is its own process, one instance per worker."""
    spec = call.udf
    owner = spec.owner
    if owner is not None and getattr(owner, "cls", None) is not None and (owner.use_process or owner.gpus):
        owner = dataclasses.replace(owner, use_process=False, gpus=0, max_concurrency=1)
    return dataclasses.replace(call, udf=dataclasses.replace(spec, use_process=False, gpus=0, owner=owner))


class UDFPartitions:
    """One UDF or AI call over a partition; the operator is built once per Python worker and job.

    Parameters:
        job / stage: the job's and the stage's ids (a partition's row count is keyed by stage and partition).
        op: the physical UDF stage.
        link: the job's ``ServiceLink``.
    """

    def __init__(self, job: str, stage: str, op: pp.UDFStage, link: Any, tracing: Any = None) -> None:
        self.job, self.stage, self.link = job, stage, link
        self.tracing = tracing  # the driver's job trace context (observe.otel_workers.WorkerTracing), or None
        self.call, self.out_name, self.out_type = worker_call(op.call), op.out_name, op.out_type
        self.out = spark_arrow(op.schema)

    def built(self, worker: WorkerServices) -> _Stage:
        """The stage's operator in ``worker``, built at its first partition and kept for the job's next ones."""
        stage = worker.stages.get(self.stage)
        if stage is None:
            from inferframe.execution.context import ExecContext
            from inferframe.execution.udf_ops import UDFOperator

            ctx = ExecContext(services=worker.services)
            stage = worker.stages[self.stage] = _Stage(ctx, UDFOperator(self.call, self.out_name, self.out_type, ctx))
        return stage

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return Steps([self])(batches)  # one stage: its rows counted under its own id

    def started(self) -> WorkerServices:
        """This worker's services for the job, its trace told that a task started."""
        worker = WorkerServices.for_job(self.job, self.link)
        counters = worker.services.counters
        if self.tracing is not None and counters.trace is None:
            from inferframe.observe.otel_workers import worker_trace

            counters.trace = worker_trace(self.tracing, counters, worker.source)
        if counters.trace is not None:
            counters.trace.task_started()
        return worker

    def answers(self, worker: WorkerServices, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """The stage's output batches, in the Spark schema's Arrow types."""
        for out in self.built(worker).op.run(batches):
            if out.num_rows:
                yield conform(out, self.out)

    def finish(self, worker: WorkerServices, before: dict, key: str) -> None:
        """A task's end: its answers stored, its in-flight share given back, its rows counted under ``key``."""
        from pyspark import TaskContext

        # The task's answers are stored before Spark counts it done: a retry elsewhere then pays nothing again.
        flush_open_stores()
        worker.services.coordinator.task_ended()  # its in-flight share to the job's other tasks now
        zero = dict.fromkeys(ROW_FIELDS, 0)
        delta = {label: {k: v - before.get(label, zero)[k] for k, v in rows.items()}
                 for label, rows in worker.rows().items()}
        context = TaskContext.get()
        part = context.partitionId() if context is not None else 0
        self.link.call("rows", f"{key}:{part}", delta)  # a partition run again replaces its count
        worker.report()
        if worker.services.counters.trace is not None:
            worker.services.counters.trace.task_done()


class Steps:
    """Per-partition steps (``MapPartitions``, ``UDFPartitions``) in one pass: each step's batches feed the next's."""

    def __init__(self, steps: list) -> None:
        self.steps = tuple(steps)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        stages = [s for s in self.steps if isinstance(s, UDFPartitions)]
        worker = stages[0].started() if stages else None
        before = worker.rows() if stages else None
        for step in self.steps:
            batches = step.answers(worker, batches) if isinstance(step, UDFPartitions) else step(batches)
        yield from batches
        if stages:  # the UDF stages ran interleaved in this task: one count of the rows for them all, one end of it
            stages[0].finish(worker, before, "+".join(s.stage for s in stages))


# --- writes ---------------------------------------------------------------------------------------


class WritePartitions:
    """A partition's rows as part files in the pending write's temporary directory; one row: their names."""

    def __init__(self, pending: Any, schema: pa.Schema) -> None:
        self.pending, self.schema = pending, schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        part = context.partitionId() if context is not None else 0
        rows = (conform(b, self.schema) for b in batches if b.num_rows)
        # The partition's number first in the prefix: the driver commits the names in partition order.
        names = self.pending.write_parts(rows, prefix=f"w-{part:06d}-{uuid.uuid4().hex}-", keep_empty=False)
        yield pa.record_batch({"part": pa.array([part], pa.int64()),
                               "names": pa.array([names], pa.list_(pa.string()))})


WRITE_RESULT = "part long, names array<string>"
