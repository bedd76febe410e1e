"""Run a physical plan (``plan.physical``) in this process as a pipeline of streaming operators.

Scans, UDF stages and nearest-neighbour searches each run in their own thread
behind a small bounded queue, so reading, model work and writing overlap while
memory stays flat; an exchange (sort, aggregate, distinct, join, repartition)
gathers its input into one Arrow table.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable, Iterator

import pyarrow as pa

from inferframe.execution import operators as ops
from inferframe.execution.context import ExecContext
from inferframe.execution.gc_scope import job_gc
from inferframe.execution.nearest import nearest
from inferframe.execution.stream import prefetch
from inferframe.execution.udf_ops import UDFOperator
from inferframe.plan import physical as pp

Batches = Iterator[pa.RecordBatch]


class _Builder:
    """Physical operators -> streams of record batches, each in this process (sources and UDF stages in threads)."""

    def __init__(self, ctx: ExecContext) -> None:
        self.ctx = ctx

    def build(self, op: pp.PhysicalOp) -> Batches:
        return pp.dispatch(_RUN, op)(self, op)

    def read_table(self, op: pp.ReadTable) -> Batches:
        return prefetch(ops.scan_table(op.table, self.ctx), self.ctx, maxsize=2, name="scan")

    def read_files(self, op: pp.ReadFiles) -> Batches:
        return prefetch(ops.scan(op.source, self.ctx), self.ctx, maxsize=2, name="scan")

    def map(self, op: pp.Map) -> Batches:
        return map_stream(op, self.build(op.input))

    def limit(self, op: pp.Limit) -> Batches:
        return ops.limit(self.build(op.input), op.n)

    def rebatch(self, op: pp.Rebatch) -> Batches:
        return ops.rebatch(self.build(op.input), op.size)

    def union(self, op: pp.Union) -> Batches:
        return ops.concat([self.build(i) for i in op.inputs], op.schema)

    def udf_stage(self, op: pp.UDFStage) -> Batches:
        udf = UDFOperator(op.call, op.out_name, op.out_type, self.ctx)
        return prefetch(udf.run(self.build(op.input)), self.ctx, maxsize=2, name=f"udf-{op.call.udf.name}")

    def exchange(self, op: pp.Exchange) -> Batches:
        ctx, node = self.ctx, op.spec
        if op.kind == "nearest":
            # Its own thread, like a UDF stage: the matrix products overlap reading and what comes after.
            stream = nearest(self.build(op.inputs[0]), self.build(op.inputs[1]), node, ctx)
            return prefetch(stream, ctx, maxsize=2, name="nearest")
        table = ops.gather(self.build(op.input), op.input.schema)
        if op.kind == "repartition":
            return ops.repartition(table, node.num_partitions, node.by, ctx)
        if op.kind == "join":
            right = ops.gather(self.build(op.inputs[1]), op.inputs[1].schema)
            return ops.join_batches(table, right, node, op.schema, ctx.morsel_size)
        return ops.emit(_GATHERED[op.kind](table, node), ctx)


# The exchanges that work on their whole input as one table, here.
_GATHERED: MappingProxyType[str, Callable[[pa.Table, Any], pa.Table]] = MappingProxyType({
    "sort": lambda t, n: ops.sort(t, n.keys, n.descending, n.nulls_first),
    "distinct": lambda t, n: ops.distinct(t, n.on),
    "aggregate": lambda t, n: ops.aggregate(t, n.group_by, n.aggs, n.schema),
})

_RUN: MappingProxyType[type, Callable[[_Builder, Any], Batches]] = MappingProxyType({
    pp.ReadTable: _Builder.read_table, pp.ReadFiles: _Builder.read_files, pp.Map: _Builder.map,
    pp.Limit: _Builder.limit, pp.Rebatch: _Builder.rebatch, pp.Union: _Builder.union,
    pp.UDFStage: _Builder.udf_stage, pp.Exchange: _Builder.exchange,
})


def map_stream(op: pp.Map, batches: Batches) -> Batches:
    """Run a per-batch physical operator over ``batches`` (in this process's pipeline, or in a Ray task).

    Example:
        >>> import pyarrow as pa
        >>> from inferframe.plan import physical as pp
        >>> op = pp.MapBatches(schema=pa.schema([("a", pa.int64())]), fn=lambda b: b.slice(0, 1))
        >>> [b.num_rows for b in map_stream(op, iter([pa.record_batch({"a": [1, 2]})]))]
        [1]
    """
    return pp.dispatch(_MAPS, op)(op, batches)


_MAPS: MappingProxyType[type, Callable[[Any, Batches], Batches]] = MappingProxyType({
    pp.Project: lambda op, s: ops.project(s, op.exprs, op.schema),
    pp.Filter: lambda op, s: ops.filter_(s, op.predicate),
    pp.Explode: lambda op, s: ops.explode(s, op.columns, op.schema),
    pp.MapBatches: lambda op, s: (op.fn(b) for b in s),
})


def execute(op: pp.PhysicalOp, *, morsel_size: int = 8192, services: Any = None) -> Batches:
    """Run a physical plan (``plan.physical.plan_physical``), yielding its record batches in order.

    Closing the iterator early, an error, or Ctrl-C stops every stage and joins its thread.
    ``services`` is what the runner shares with this run's operators (opaque here).

    Example:
        >>> import inferframe as ifr
        >>> from inferframe.plan.physical import plan_physical
        >>> batches = list(execute(plan_physical(ifr.from_pydict({"a": [1, 2]})._plan)))
        >>> sum(b.num_rows for b in batches)
        2
    """
    ctx = ExecContext(morsel_size=morsel_size, services=services)
    try:
        with job_gc():
            yield from _Builder(ctx).build(op)
    finally:
        ctx.close()
