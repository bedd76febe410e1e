"""Turn an optimized logical plan into a pipeline of streaming operators and run it.

Scans, UDF stages and nearest-neighbour searches each run in their own thread
behind a small bounded queue, so reading, model work and writing overlap while
memory stays flat.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator

import pyarrow as pa

from inferframe.execution import operators as ops
from inferframe.execution.context import ExecContext
from inferframe.execution.nearest import nearest
from inferframe.execution.stream import prefetch
from inferframe.execution.udf_ops import UDFOperator
from inferframe.expressions.nodes import Col, Node, UDFCall, contains_udf
from inferframe.plan import logical as lp

Batches = Iterator[pa.RecordBatch]


class _Builder:
    def __init__(self, ctx: ExecContext) -> None:
        self.ctx = ctx
        self.names = (f"__udf_{i}" for i in itertools.count())  # the UDF stages' output columns

    def build(self, plan: lp.LogicalPlan) -> Batches:
        ctx = self.ctx
        if isinstance(plan, lp.Source):
            return prefetch(ops.scan(plan, ctx), ctx, maxsize=2, name="scan")
        if isinstance(plan, lp.Project):
            stream, exprs = self.run_udfs(self.build(plan.input), plan.exprs, plan.input.schema)
            return ops.project(stream, exprs, plan.schema)
        if isinstance(plan, lp.Filter):
            stream = self.build(plan.input)
            if contains_udf(plan.predicate):
                stream, (pred,) = self.run_udfs(stream, (plan.predicate,), plan.input.schema)
                keep = tuple(Col(n) for n in plan.schema.names)
                return ops.project(ops.filter_(stream, pred), keep, plan.schema)
            return ops.filter_(stream, plan.predicate)
        if isinstance(plan, lp.Limit):
            return ops.limit(self.build(plan.input), plan.n)
        if isinstance(plan, lp.IntoBatches):
            return ops.rebatch(self.build(plan.input), plan.batch_size)
        if isinstance(plan, lp.Explode):
            return ops.explode(self.build(plan.input), plan.columns, plan.schema)
        if isinstance(plan, lp.Concat):
            return ops.concat([self.build(c) for c in plan.inputs], plan.schema)
        if isinstance(plan, lp.Nearest):
            # Its own thread, like a UDF stage: the matrix products overlap reading and what comes after.
            stream = nearest(self.build(plan.left), self.build(plan.right), plan, ctx)
            return prefetch(stream, ctx, maxsize=2, name="nearest")
        return self.blocking(plan)

    def blocking(self, plan: lp.LogicalPlan) -> Batches:
        ctx = self.ctx
        table = ops.gather(self.build(plan.children()[0]), plan.children()[0].schema)
        if isinstance(plan, lp.Sort):
            return ops.emit(ops.sort(table, plan.keys, plan.descending, plan.nulls_first), ctx)
        if isinstance(plan, lp.Distinct):
            return ops.emit(ops.distinct(table, plan.on), ctx)
        if isinstance(plan, lp.Aggregate):
            return ops.emit(ops.aggregate(table, plan.group_by, plan.aggs, plan.schema), ctx)
        if isinstance(plan, lp.Join):
            right = ops.gather(self.build(plan.right), plan.right.schema)
            return ops.emit(ops.join(table, right, plan, plan.schema), ctx)
        if isinstance(plan, lp.Repartition):
            return ops.repartition(table, plan.num_partitions, plan.by, ctx)
        raise TypeError(f"internal: no physical operator for {type(plan).__name__}")

    def run_udfs(self, stream: Batches, exprs: tuple[Node, ...], schema: pa.Schema) -> tuple[Batches, tuple[Node, ...]]:
        """Give each UDF call its own stage (innermost first); rewrite exprs to read their outputs."""
        stream, _, exprs = lift_udfs(stream, exprs, schema, self.udf_stage, self.names)
        return stream, exprs

    def udf_stage(self, stream: Batches, call: UDFCall, name: str, schema: pa.Schema) -> tuple[Batches, pa.Schema]:
        field = call.to_field(schema)
        op = UDFOperator(call, name, field.type, self.ctx)
        stream = prefetch(op.run(stream), self.ctx, maxsize=2, name=f"udf-{call.udf.name}")
        return stream, schema.append(pa.field(name, field.type))


def lift_udfs(stream: Any, exprs: tuple[Node, ...], schema: pa.Schema, add_stage: Callable,
              names: Iterator[str]) -> tuple[Any, pa.Schema, tuple[Node, ...]]:
    """Give each UDF call in ``exprs`` its own stage, innermost first; the exprs then read the stages' columns.

    ``add_stage(stream, call, name, schema) -> (stream, schema)`` appends one stage (this executor's
    operator, or a Ray Data stage); ``names`` gives each stage's output column a fresh name.

    Example:
        >>> import pyarrow as pa
        >>> from inferframe.expressions.nodes import Col
        >>> lift_udfs("s", (Col("a"),), pa.schema([("a", pa.int64())]), None, iter(()))
        ('s', a: int64, (Col(column='a'),))
    """
    if not any(contains_udf(e) for e in exprs):
        return stream, schema, exprs
    state = [stream, schema]

    def extract(node: Node) -> Node:
        if not isinstance(node, UDFCall):
            return node
        name = next(names)
        state[0], state[1] = add_stage(state[0], node, name, state[1])
        return Col(name)

    new_exprs = tuple(e.transform_up(extract) for e in exprs)
    return state[0], state[1], new_exprs


def execute(plan: lp.LogicalPlan, *, morsel_size: int = 8192, services: Any = None) -> Batches:
    """Run an (already optimized) plan, yielding its record batches in order.

    Closing the iterator early, an error, or Ctrl-C stops every stage and joins its thread.
    ``services`` is what the runner shares with this run's operators (opaque here).

    Example:
        >>> import inferframe as ifr
        >>> batches = list(execute(ifr.from_pydict({"a": [1, 2]})._plan))
        >>> sum(b.num_rows for b in batches)
        2
    """
    ctx = ExecContext(morsel_size=morsel_size, services=services)
    try:
        yield from _Builder(ctx).build(plan)
    finally:
        ctx.close()
