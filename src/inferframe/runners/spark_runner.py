"""The Spark runner: the same physical plan on a Spark cluster, as Spark DataFrame operators over Arrow.

``set_runner_spark()`` (or ``INFERFRAME_RUNNER=spark``) makes every DataFrame run here; pipeline code
does not change. Each physical operator (``plan.physical``) becomes Spark operators:

| physical operator | on Spark |
|---|---|
| a file source (Parquet, CSV, JSON paths) | one task per file, on the executors (``ReadPaths``) |
| an in-memory table, an Arrow stream, a source with a limit | read on the driver, handed to Spark as Arrow |
| projections, filters, explode, ``map_batches`` | ``mapInArrow`` (``MapPartitions``) |
| ``@func``, ``@cls``, AI calls | ``mapInArrow``, the operator built once per Python worker (``UDFPartitions``) |
| a run of the steps above (and a file read below them) | ONE ``mapInArrow`` (``Steps``): one pass to Python and back |
| ``sort`` | Spark's sort; nulls placed as locally, ties in input order (a row id breaks them) |
| ``groupby().agg()`` | Spark's ``groupBy().applyInArrow`` with the local aggregation per group, then groups in key order |
| ``distinct`` | a window per key keeping the first row, in input order |
| inner, left, semi, anti ``join`` | Spark's join (keys of one concrete type) |
| ``repartition(n)`` | ``by=``: Spark's hash repartition; else ranges of the input's order (the input is materialized once) |
| ``into_batches(n)`` | partitions of about ``n`` rows in order (the input is materialized once, to count it) |
| ``limit`` | the first ``n`` rows gathered on the driver |
| right/full outer joins, other keys, whole-table aggregation, ``nearest``, ``concat`` of other operators | GATHER: the inputs go to the driver, which runs the operator locally |
| writes | each task writes part files under ``root/._inferframe_tmp_<id>/``; the driver renames them once, in order, when every task succeeded |

A plan with a type Spark cannot hold (unsigned integers, dictionaries, extension types) runs on the
driver with the local executor, with a warning; one with no ``@func``, ``@cls`` or AI call whose rows all
come from the driver runs there too, silently (a Spark job would only ship them out and back). Each job gets a service on the driver
(``spark_service``): key handles for the executors and their counters back.

Example:
    >>> import inferframe as ifr
    >>> runner = SparkRunner()                        # doctest: +SKIP
    >>> _ = ifr.set_runner_spark()                    # doctest: +SKIP
    >>> ifr.from_pydict({"a": [1, 2]}).with_column("b", ifr.col("a") * 2).to_pydict()  # doctest: +SKIP
    {'a': [1, 2], 'b': [2, 4]}
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
from types import MappingProxyType
from typing import Any, Iterator

import pyarrow as pa

import inferframe.errors as errors
from inferframe.errors import InferframeError, warn_user
from inferframe.io.arrow_stream import StreamSource
from inferframe.observe.stats import RunCounters
from inferframe.plan import logical as lp
from inferframe.plan import physical as pp
from inferframe.plan.row_bound import rows_at_most
from inferframe.runners import spark_plan as sp
from inferframe.runners.base import Runner
from inferframe.runners.local import LocalRunner, on_the_driver_anyway
from inferframe.runners.spark_connect import require_classic
from inferframe.runners.spark_jobs import Job
from inferframe.runners.spark_python import ensure_executor_python

ROW = "__ifr_row"  # a row id: monotonically increasing in the input's order
# A sort of at most this many rows (known from the plan, ``plan.row_bound``) runs in one partition: Spark's global
# sort first runs a sampling job over its whole input (upstream Python stages included) to pick range bounds.
SMALL_SORT_ROWS = 10_000
# Sources Spark's tasks read themselves, one file per task.
EXECUTOR_FORMATS = ("parquet", "csv", "json")


def _pyspark():
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import functions as F
    except ImportError as e:  # pragma: no cover - the install has it
        raise ImportError("The Spark runner needs pyspark and Java 17+: pip install 'inferframe[spark]' "
                          "('inferframe doctor' checks Java).") from e
    return F


def q(name: str):
    """A column by its exact name (dots and spaces included)."""
    F = _pyspark()
    return F.col("`" + name.replace("`", "``") + "`")


class SparkRunner(Runner):
    """Run plans on Spark; results equal the local runner's, row for row where the plan defines an order.

    Parameters:
        spark: the SparkSession; None: the active one (``SparkSession.getActiveSession()``), else a new local one.
    """

    name = "spark"
    writes_in_workers = True

    def __init__(self, spark: Any = None) -> None:
        require_classic(spark, "The Spark runner (ifr.set_runner_spark(spark))")
        self._spark = spark

    @property
    def spark(self):
        """The session, its executors' Python chosen and checked once (``spark_python``) before its first job."""
        if self._spark is None:
            _pyspark()
            from pyspark.sql import SparkSession

            self._spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
            require_classic(self._spark, "The Spark runner (ifr.set_runner_spark(), INFERFRAME_RUNNER=spark)")
        ensure_executor_python(self._spark)
        return self._spark

    def execute(self, op: pp.PhysicalOp, counters: RunCounters | None = None) -> Iterator[pa.RecordBatch]:
        counters = counters if counters is not None else RunCounters()
        if not _mappable(op):
            yield from _on_driver(op, counters)
            return
        if on_the_driver_anyway(op, _read_on_driver):
            yield from LocalRunner().execute(op, counters)
            return
        with Job(self.spark, counters) as job, _own_errors():
            table = _collect(Builder(job).build(op), op.schema)
        yield from table.combine_chunks().to_batches()

    def write_parts(self, plan: lp.LogicalPlan, pending: Any, counters: RunCounters | None = None) -> list[list[str]]:
        """Each task writes its partition's rows as part files under ``pending``'s temporary directory; the names, in order."""
        counters = counters if counters is not None else RunCounters()
        op = pp.plan_physical(plan)
        if not _mappable(op):
            return [pending.write_parts(_on_driver(op, counters), keep_empty=False)]
        with Job(self.spark, counters) as job, _own_errors():
            sdf = Builder(job).build(op).mapInArrow(sp.WritePartitions(pending, plan.schema), sp.WRITE_RESULT)
            names = sdf.toArrow()
        order = sorted(range(names.num_rows), key=names.column("part").to_pylist().__getitem__)
        return [names.column("names")[i].as_py() for i in order]

    def to_spark(self, plan: lp.LogicalPlan):
        """The plan as a lazy Spark DataFrame (``df.to_spark()``); its AI calls report to no progress line."""
        return Builder(Job.lazy(self.spark)).build(pp.plan_physical(plan))


def _mappable(op: pp.PhysicalOp) -> bool:
    """Whether every operator's schema has a Spark type."""
    try:
        sp.spark_schema(op.schema)
    except Exception:
        return False
    return all(_mappable(i) for i in op.inputs)


NOT_SPARK_TYPES = ("this plan has a column type Spark cannot hold (unsigned integers, dictionaries, extension "
                   "types...): it runs on the driver with the local executor. Cast such columns (for example "
                   "col('x').cast(ifr.DataType.int64())) to run it on Spark.")


def _on_driver(op: pp.PhysicalOp, counters: RunCounters) -> Iterator[pa.RecordBatch]:
    warn_user(NOT_SPARK_TYPES, RuntimeWarning)
    return LocalRunner().execute(op, counters)


def _read_on_driver(op: pp.ReadFiles) -> bool:
    # An Arrow stream lives in this process, and a limit is the first n rows: the driver reads them.
    node = op.source
    return (isinstance(node.source, StreamSource) or node.limit is not None
            or getattr(node.source, "format", None) not in EXECUTOR_FORMATS)


def _collect(sdf, schema: pa.Schema) -> pa.Table:
    """A Spark DataFrame's rows on the driver, in its order, in the plan's Arrow types."""
    table = sdf.toArrow()
    return table.select(schema.names).cast(schema) if table.schema != schema else table


_INFERFRAME_ERROR = re.compile(r"(?:inferframe\.errors\.)?([A-Z][A-Za-z]+(?:Error|Failed)): (.*)")


@contextlib.contextmanager
def _own_errors():
    """A job that failed in a task raises the task's inferframe error (its type and message), as locally."""
    try:
        yield
    except InferframeError:
        raise
    except Exception as e:
        text = str(e)
        found = None
        for line in text.splitlines():
            m = _INFERFRAME_ERROR.search(line)
            cls = getattr(errors, m.group(1), None) if m else None
            if isinstance(cls, type) and issubclass(cls, InferframeError):
                found = (cls, m.group(2))
        if found is None:
            raise
        cls, message = found
        try:
            error = cls(message)
        except TypeError:
            error = errors.ExecutionError(message)
        raise error from None


class Builder:
    """Physical operators -> one lazy Spark DataFrame (see the module's table).

    ``source``: a Spark DataFrame that stands for the plan's in-memory table (``inferframe.spark.with_columns``
    plans over an empty table of its schema).
    """

    def __init__(self, job: Job, source: Any = None) -> None:
        self.job = job
        self.spark = job.spark
        self.source = source
        self.read_rows: dict[pp.PhysicalOp, int] = {}  # operators already read on the driver: their rows

    def rows_at_most(self, op: pp.PhysicalOp) -> int | None:
        """The most rows ``op`` gives (``plan.row_bound``); None when unknown (a plan over a Spark DataFrame)."""
        return None if self.source is not None else rows_at_most(op, self.read_rows.get)

    def build(self, op: pp.PhysicalOp):
        return pp.dispatch(_RUN, op)(self, op)

    # --- sources -------------------------------------------------------------------------------
    def from_table(self, table: pa.Table, schema: pa.Schema):
        arrow = sp.spark_arrow(schema)
        table = table.select(schema.names).cast(arrow) if table.num_columns else arrow.empty_table()
        return self.spark.createDataFrame(table, schema=sp.spark_schema(schema))

    def read_table(self, op: pp.ReadTable):
        if self.source is not None:
            return self.source.select(*[q(n) for n in op.schema.names])
        return self.from_table(op.table, op.schema)

    def read_files(self, op: pp.ReadFiles):
        node = op.source
        src = node.source
        if _read_on_driver(op):
            return self.gather(op)
        if not src.paths:
            return self.from_table(op.schema.empty_table(), op.schema)
        return self.per_partition(op)

    # --- streaming -----------------------------------------------------------------------------
    def map(self, op: pp.Map):
        return self.per_partition(op)

    def udf_stage(self, op: pp.UDFStage):
        return self.per_partition(op)

    def per_partition(self, op: pp.PhysicalOp):
        """``op`` and the per-partition steps right below it (projections, filters, UDF stages) in ONE ``mapInArrow``.

        Each ``mapInArrow`` is a pass of every partition's rows to a Python worker and back: an AI column
        followed by its projection made three, 0.1-0.2 s of a small job each on a 2-core machine.
        """
        below, steps = self.steps(op)
        return below.mapInArrow(steps[0] if len(steps) == 1 else sp.Steps(steps), sp.spark_schema(op.schema))

    def steps(self, op: pp.PhysicalOp) -> tuple[Any, list]:
        """The Spark DataFrame under ``op``'s run of per-partition steps, and those steps, first first."""
        if isinstance(op, pp.ReadFiles) and not _read_on_driver(op) and op.source.source.paths:
            n = len(op.source.source.paths)  # a partition per file, which reads it
            return self.spark.range(0, n, 1, numPartitions=n), [sp.ReadPaths(op.source)]
        if not isinstance(op, (pp.Map, pp.UDFStage)):
            return self.build(op), []
        below, steps = self.steps(op.input)  # the stages below take their ids first, as they run first
        if isinstance(op, pp.Map):
            return below, [*steps, sp.MapPartitions(op)]
        trace = self.job.counters.trace  # the driver's job trace (None: not traced): its context goes to the workers
        return below, [*steps, sp.UDFPartitions(self.job.id, next(self.job.stage_ids), op, self.job.link,
                                                trace.for_workers() if trace is not None else None)]

    def union(self, op: pp.Union):
        parts = [self.build(pp.MapBatches(inputs=(i,), schema=op.schema, fn=sp.Conform(op.schema), name="conform"))
                 for i in op.inputs]
        out = parts[0]
        for p in parts[1:]:
            out = out.union(p)
        return out

    def limit(self, op: pp.Limit):
        # The first n rows in order: Spark's collect-limit reads the partitions in order, on the driver.
        table = _collect(self.build(op.input).limit(op.n), op.schema)
        self.read_rows[op] = table.num_rows
        return self.from_table(table, op.schema)

    def rebatch(self, op: pp.Rebatch):
        sdf, rows = self.materialized(self.build(op.input))
        return self.in_order(sdf, max(1, math.ceil(rows / op.size)))

    # --- exchanges -----------------------------------------------------------------------------
    def exchange(self, op: pp.Exchange):
        kind = op.kind
        if kind == "sort":
            return self.sort(self.build(op.input), op.spec, self.rows_at_most(op.input))
        if kind == "aggregate" and op.spec.group_by and _groupable(op.input.schema, op.spec.group_by):
            return self.aggregate(op)
        if kind == "distinct" and _groupable(op.input.schema, op.spec.on or op.input.schema.names):
            return self.distinct(op)
        if kind == "join" and _spark_joinable(op.spec):
            return self.join(op)
        if kind == "repartition":
            return self.repartition(op)
        # GATHER (whole-table aggregation, right/full outer joins, joins on keys of differing types,
        # nearest): the inputs go to the driver, which runs the operator with the local executor.
        return self.gather(op)

    def sort(self, sdf, node: lp.Sort, rows: int | None = None):
        """Spark's sort: a null (and NaN) flag per key placed as the local runner places nulls; ties in input order.
        ``rows``: the most rows the input has (None: unknown); few are sorted in one partition, with no sampling job."""
        F = _pyspark()
        sdf = sdf.withColumn(ROW, F.monotonically_increasing_id())
        schema = node.input.schema
        orders = []
        for k, d in zip(node.keys, node.descending):
            c = q(k)
            flags = [c.isNull()]
            if pa.types.is_floating(schema.field(k).type):
                flags.append(F.isnan(c))
            orders += [f.desc() if node.nulls_first else f.asc() for f in flags]
            orders.append(c.desc() if d else c.asc())
        if rows is not None and rows <= SMALL_SORT_ROWS:
            return sdf.repartition(1).sortWithinPartitions(*orders, F.col(ROW).asc()).drop(ROW)
        return sdf.orderBy(*orders, F.col(ROW).asc()).drop(ROW)

    def aggregate(self, op: pp.Exchange):
        node = op.spec
        sdf = self.build(op.input).groupBy(*[q(k) for k in node.group_by]).applyInArrow(
            sp.aggregate_groups(node), sp.spark_schema(node.schema))
        # The local runner gives groups in key order, nulls last: so does this.
        return self.sort(sdf, lp.Sort(node, tuple(node.group_by), (False,) * len(node.group_by), False),
                         self.rows_at_most(op))

    def distinct(self, op: pp.Exchange):
        """The first row of each key, in input order (as the local runner keeps them)."""
        F = _pyspark()
        from pyspark.sql import Window

        keys = list(op.spec.on) if op.spec.on else list(op.input.schema.names)
        sdf = self.build(op.input).withColumn(ROW, F.monotonically_increasing_id())
        first = F.row_number().over(Window.partitionBy(*[q(k) for k in keys]).orderBy(ROW))
        kept = sdf.withColumn("__ifr_n", first).where(F.col("__ifr_n") == 1)
        rows = self.rows_at_most(op.input)
        if rows is not None and rows <= SMALL_SORT_ROWS:  # in one partition, as ``sort``: no sampling job
            return kept.repartition(1).sortWithinPartitions(ROW).drop("__ifr_n", ROW)
        return kept.orderBy(ROW).drop("__ifr_n", ROW)

    def join(self, op: pp.Exchange):
        """Spark's join; the right side's clashing names get the prefix, its keys are dropped as locally."""
        node: lp.Join = op.spec
        left, right = (self.build(i) for i in op.inputs)
        left_names = set(node.left.schema.names)
        keys = {rk: f"__ifr_rk{i}" for i, rk in enumerate(node.right_on)}
        renames = {n: node.prefix + n for n in node.right.schema.names if n not in keys and n in left_names}
        right = right.select(*[q(n).alias(keys.get(n) or renames.get(n, n)) for n in node.right.schema.names])
        cond = [q(lk) == q(keys[rk]) for lk, rk in zip(node.left_on, node.right_on)]
        how = {"inner": "inner", "left": "left", "semi": "left_semi", "anti": "left_anti"}[node.how]
        return left.join(right, on=cond, how=how).select(*[q(n) for n in node.schema.names])

    def repartition(self, op: pp.Exchange):
        node: lp.Repartition = op.spec
        n = node.num_partitions or max(2, self.spark.sparkContext.defaultParallelism)
        if node.by:
            return self.build(op.input).repartition(n, *[q(k) for k in node.by])
        sdf, _ = self.materialized(self.build(op.input))
        return self.in_order(sdf, n)

    def gather(self, op: pp.PhysicalOp):
        """Run ``op`` on the driver with the local executor, its inputs gathered from Spark (see the module's table)."""
        inputs = tuple(pp.ReadTable(schema=i.schema, table=_collect(self.build(i), i.schema)) for i in op.inputs)
        local = dataclasses.replace(op, inputs=inputs) if inputs else op
        batches = list(LocalRunner().execute(local, self.job.counters))
        self.read_rows[op] = sum(b.num_rows for b in batches)
        return self.from_table(pa.Table.from_batches(batches, schema=op.schema), op.schema)

    # --- helpers -------------------------------------------------------------------------------
    def materialized(self, sdf):
        """``sdf`` with a row id, computed once (so counting and sampling it run no AI call again); its row count."""
        F = _pyspark()
        sdf = sdf.withColumn(ROW, F.monotonically_increasing_id()).localCheckpoint(eager=True)
        return sdf, sdf.count()

    def in_order(self, sdf, n: int):
        """``n`` partitions of contiguous ranges of the row id (``materialized``), rows in order; the id dropped."""
        return sdf.repartitionByRange(n, ROW).sortWithinPartitions(ROW).drop(ROW)


def _groupable(schema: pa.Schema, keys) -> bool:
    return all(not pa.types.is_nested(schema.field(k).type) for k in keys)


def _spark_joinable(node: lp.Join) -> bool:
    """Spark's join gives the local result for inner/left/semi/anti joins on keys of one concrete type."""
    if node.how not in ("inner", "left", "semi", "anti"):
        return False
    for lk, rk in zip(node.left_on, node.right_on):
        lt, rt = node.left.schema.field(lk).type, node.right.schema.field(rk).type
        if lt != rt or pa.types.is_null(lt) or pa.types.is_nested(lt) or pa.types.is_floating(lt):
            return False
    return True


_RUN = MappingProxyType({
    pp.ReadTable: Builder.read_table, pp.ReadFiles: Builder.read_files, pp.Map: Builder.map,
    pp.Limit: Builder.limit, pp.Rebatch: Builder.rebatch, pp.Union: Builder.union,
    pp.UDFStage: Builder.udf_stage, pp.Exchange: Builder.exchange,
})
