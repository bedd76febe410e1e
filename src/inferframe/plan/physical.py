"""The physical plan: an optimized logical plan turned, once, into the operators every runner runs.

This is the only place that looks at logical node types. Each physical operator says what it
needs, not how to do it: a source (``ReadTable``, ``ReadFiles``), a streaming per-batch map
(``Project``, ``Filter``, ``Explode``, ``MapBatches``), a streaming cut (``Limit``, ``Rebatch``),
a ``Union``, a ``UDFStage`` (one UDF or AI call, in its own stage), or an ``Exchange`` of a named
kind that sees more than one batch at a time (sort, aggregate, distinct, join, repartition,
nearest). A runner only decides where each one runs: the local executor in this process's
threads, the Ray runner in tasks, actor pools and Ray's own shuffles.

A logical operator defined outside this package plans itself: its ``to_physical(inputs)``
returns a physical operator (most often a ``MapBatches``), and both runners run it unchanged.

Example:
    >>> import inferframe as ifr
    >>> print(plan_physical(ifr.from_pydict({"a": [1, 2]}).where(ifr.col("a") > 1).sort("a")._plan).tree())
    * Exchange sort [a asc]
      * Filter gt(col(a), lit(1))
        * ReadTable rows=2
"""

from __future__ import annotations

import dataclasses
import itertools
from types import MappingProxyType
from typing import Any, Callable, Mapping

import pyarrow as pa

from inferframe.expressions.nodes import Col, Node, UDFCall, contains_udf
from inferframe.plan import logical as lp


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class PhysicalOp:
    """One physical operator: its inputs (other physical operators) and its output schema."""

    inputs: tuple["PhysicalOp", ...] = ()
    schema: pa.Schema

    @property
    def input(self) -> "PhysicalOp":
        return self.inputs[0]

    def alone(self) -> "PhysicalOp":
        """This operator without its inputs: what a worker needs to run it on its batches (small to pickle)."""
        return dataclasses.replace(self, inputs=())

    def describe(self) -> str:
        return type(self).__name__

    def tree(self, indent: int = 0) -> str:
        lines = ["  " * indent + f"* {self.describe()}"]
        lines += [i.tree(indent + 1) for i in self.inputs]
        return "\n".join(lines)


# --- sources --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class ReadTable(PhysicalOp):
    """An in-memory table, its pushed-down columns and limit already applied."""

    table: pa.Table

    def describe(self) -> str:
        return f"ReadTable rows={self.table.num_rows}"


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class ReadFiles(PhysicalOp):
    """Files read through ``io.scan`` with the source's pushed-down columns, filter and limit."""

    source: lp.Source

    def describe(self) -> str:
        return "Read" + self.source.describe()


# --- streaming operators --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class Map(PhysicalOp):
    """A streaming operator that turns each batch into at most one batch, on its own: runs anywhere."""


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class Project(Map):
    exprs: tuple[Node, ...]

    def describe(self) -> str:
        return f"Project [{', '.join(str(e) for e in self.exprs)}]"


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class Filter(Map):
    predicate: Node

    def describe(self) -> str:
        return f"Filter {self.predicate}"


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class Explode(Map):
    columns: tuple[str, ...]

    def describe(self) -> str:
        return f"Explode [{', '.join(self.columns)}]"


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class MapBatches(Map):
    """Any per-batch function ``fn(batch) -> batch`` giving ``schema`` (picklable, for the Ray runner)."""

    fn: Callable[[pa.RecordBatch], pa.RecordBatch]
    name: str = "map_batches"

    def describe(self) -> str:
        return f"MapBatches {self.name}"


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class Limit(PhysicalOp):
    """The first ``n`` rows, in order."""

    n: int

    def describe(self) -> str:
        return f"Limit {self.n}"


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class Rebatch(PhysicalOp):
    """Batches of ``size`` rows, so the work after it spreads batch by batch."""

    size: int

    def describe(self) -> str:
        return f"Rebatch {self.size}"


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class Union(PhysicalOp):
    """The inputs one after another, each cast to ``schema``."""

    def describe(self) -> str:
        return f"Union ({len(self.inputs)} inputs)"


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class UDFStage(PhysicalOp):
    """One UDF or AI call over its input's columns, appended as column ``out_name`` (its own stage)."""

    call: UDFCall
    out_name: str
    out_type: pa.DataType

    def describe(self) -> str:
        return f"UDFStage {self.call.udf.name} -> {self.out_name}"


# --- exchanges ------------------------------------------------------------------------------------

EXCHANGE_KINDS = ("sort", "aggregate", "distinct", "join", "repartition", "nearest")


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class Exchange(PhysicalOp):
    """An operator that needs more than one batch at a time (a gather here, a distributed exchange on Ray).

    ``kind`` names it (one of ``EXCHANGE_KINDS``); ``spec`` is the logical node holding its
    parameters (keys, directions, aggregations, join sides' keys and prefix, k and metric).
    A join or nearest search has two inputs: left, then right.
    """

    kind: str
    spec: lp.LogicalPlan

    def describe(self) -> str:
        return f"Exchange {self.kind} {self.spec.describe().split(' ', 1)[-1]}"


def dispatch(table: Mapping[type, Any], op: PhysicalOp) -> Any:
    """The entry of ``table`` for ``op``'s class or its nearest base class (each runner's table of operators).

    Example:
        >>> dispatch({Map: "map"}, Filter(schema=pa.schema([]), predicate=Col("a")))
        'map'
    """
    for cls in type(op).__mro__:
        if cls in table:
            return table[cls]
    raise TypeError(f"internal: no implementation of physical operator {type(op).__name__}")


# --- the planner ----------------------------------------------------------------------------------


def plan_physical(plan: lp.LogicalPlan) -> PhysicalOp:
    """The physical operators of an optimized logical plan (the one planner every runner uses).

    Parameters:
        plan: an optimized logical plan.

    Example:
        >>> import inferframe as ifr
        >>> plan_physical(ifr.from_pydict({"a": [1]}).limit(1)._plan).describe()
        'Limit 1'
    """
    return _Planner().plan(plan)


class _Planner:
    def __init__(self) -> None:
        self.names = (f"__udf_{i}" for i in itertools.count())  # the UDF stages' output columns

    def plan(self, node: lp.LogicalPlan) -> PhysicalOp:
        rule = _RULES.get(type(node))
        if rule is not None:
            return rule(self, node)
        op = node.to_physical(tuple(self.plan(c) for c in node.children()))
        if op is None:
            raise TypeError(f"internal: no physical operator for {type(node).__name__}")
        return op

    def source(self, node: lp.Source) -> PhysicalOp:
        if isinstance(node.source, lp.InMemory):
            table = node.source.table
            if node.columns is not None:
                table = table.select(list(node.columns))
            if node.limit is not None:
                table = table.slice(0, node.limit)
            return ReadTable(schema=node.schema, table=table)
        return ReadFiles(schema=node.schema, source=node)

    def project(self, node: lp.Project) -> PhysicalOp:
        op, exprs = self.udf_stages(self.plan(node.input), node.exprs)
        return Project(inputs=(op,), schema=node.schema, exprs=exprs)

    def filter(self, node: lp.Filter) -> PhysicalOp:
        op = self.plan(node.input)
        if not contains_udf(node.predicate):
            return Filter(inputs=(op,), schema=node.schema, predicate=node.predicate)
        op, (pred,) = self.udf_stages(op, (node.predicate,))
        op = Filter(inputs=(op,), schema=op.schema, predicate=pred)
        # The UDF stages' columns go again after the filter.
        return Project(inputs=(op,), schema=node.schema, exprs=tuple(Col(n) for n in node.schema.names))

    def udf_stages(self, op: PhysicalOp, exprs: tuple[Node, ...]) -> tuple[PhysicalOp, tuple[Node, ...]]:
        """Give each UDF call in ``exprs`` its own stage, innermost first; the exprs then read the stages' columns."""
        if not any(contains_udf(e) for e in exprs):
            return op, exprs
        state = [op]

        def extract(n: Node) -> Node:
            if not isinstance(n, UDFCall):
                return n
            name = next(self.names)
            below = state[0]
            field = n.to_field(below.schema)
            state[0] = UDFStage(inputs=(below,), schema=below.schema.append(pa.field(name, field.type)),
                                call=n, out_name=name, out_type=field.type)
            return Col(name)

        new_exprs = tuple(e.transform_up(extract) for e in exprs)
        return state[0], new_exprs


def _exchange(kind: str):
    def rule(planner: _Planner, node: lp.LogicalPlan) -> PhysicalOp:
        return Exchange(inputs=tuple(planner.plan(c) for c in node.children()), schema=node.schema, kind=kind, spec=node)

    return rule


_RULES: Mapping[type, Callable[[_Planner, Any], PhysicalOp]] = MappingProxyType({
    lp.Source: _Planner.source,
    lp.Project: _Planner.project,
    lp.Filter: _Planner.filter,
    lp.Limit: lambda p, n: Limit(inputs=(p.plan(n.input),), schema=n.schema, n=n.n),
    lp.IntoBatches: lambda p, n: Rebatch(inputs=(p.plan(n.input),), schema=n.schema, size=n.batch_size),
    lp.Explode: lambda p, n: Explode(inputs=(p.plan(n.input),), schema=n.schema, columns=n.columns),
    lp.Concat: lambda p, n: Union(inputs=tuple(p.plan(c) for c in n.inputs), schema=n.schema),
    lp.Sort: _exchange("sort"),
    lp.Aggregate: _exchange("aggregate"),
    lp.Distinct: _exchange("distinct"),
    lp.Join: _exchange("join"),
    lp.Repartition: _exchange("repartition"),
    lp.Nearest: _exchange("nearest"),
})
