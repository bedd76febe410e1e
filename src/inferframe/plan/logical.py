"""Logical plan nodes: what to compute, validated when built.

Each node computes its output schema in ``__post_init__``, so a wrong column,
a type mismatch or a bad join key raises before any data is read.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

from inferframe.errors import ExpressionTypeError, PlanError
from inferframe.expressions.functions import vector_size
from inferframe.expressions.nodes import Alias, Col, Node, column_not_found
# LogicalPlan is re-exported: every node here derives from it, and callers name it as ``lp.LogicalPlan``.
from inferframe.plan.logical_base import LogicalPlan


def _schema_str(schema: pa.Schema) -> str:
    from inferframe.datatype import short_type_name

    return ", ".join(f"{f.name}: {short_type_name(f.type)}" for f in schema)


@dataclasses.dataclass(frozen=True)
class InMemory:
    """A table held in memory, split into morsels when scanned."""

    table: pa.Table


@dataclasses.dataclass(frozen=True, eq=False)
class Source(LogicalPlan):
    source: Any  # io.ScanSource, io.StreamSource (an Arrow stream) or InMemory
    source_schema: pa.Schema
    columns: tuple[str, ...] | None = None
    filter: Node | None = None
    limit: int | None = None

    def __post_init__(self):
        schema = self.source_schema
        if self.columns is not None:
            schema = pa.schema([schema.field(c) for c in self.columns])
        self._set_schema(schema)

    def describe(self) -> str:
        if isinstance(self.source, InMemory):
            what = f"InMemory rows={self.source.table.num_rows}"
        elif hasattr(self.source, "describe"):  # a source that names itself, e.g. an Arrow stream
            what = self.source.describe()
        else:
            paths = self.source.paths
            shown = ", ".join(paths[:2]) + (f", ... ({len(paths)} files)" if len(paths) > 2 else "")
            what = f"Scan {self.source.format} [{shown}]"
        extra = ""
        if self.columns is not None:
            extra += f" columns=[{', '.join(self.columns)}]"
        if self.filter is not None:
            extra += f" filter={self.filter}"
        if self.limit is not None:
            extra += f" limit={self.limit}"
        return what + extra


def shown(expr: Node) -> str:
    """An expression as ``explain()`` prints it: a name given inside it (``cast(col(a).alias('x'))``) names nothing, so it is left out.

    Example:
        >>> from inferframe.expressions.nodes import Alias, Col, Lit
        >>> shown(Alias(Alias(Col("a"), "text"), "b")), shown(Lit(1))
        ('col(a) as b', 'lit(1)')
    """
    inner = expr.child if isinstance(expr, Alias) else expr
    inner = inner.transform_up(lambda n: n.child if isinstance(n, Alias) else n)
    return f"{inner} as {expr.alias}" if isinstance(expr, Alias) else str(inner)


@dataclasses.dataclass(frozen=True, eq=False)
class Project(LogicalPlan):
    input: LogicalPlan
    exprs: tuple[Node, ...]

    def __post_init__(self):
        fields = [e.to_field(self.input.schema) for e in self.exprs]
        seen: set[str] = set()
        for f in fields:
            if f.name in seen:
                raise PlanError(
                    f"Two output columns are both named {f.name!r}. Give one a different name with .alias('...')."
                )
            seen.add(f.name)
        self._set_schema(pa.schema(fields))

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return Project(children[0], self.exprs)

    def describe(self) -> str:
        return f"Project [{', '.join(shown(e) for e in self.exprs)}]"


@dataclasses.dataclass(frozen=True, eq=False)
class Filter(LogicalPlan):
    input: LogicalPlan
    predicate: Node

    def __post_init__(self):
        f = self.predicate.to_field(self.input.schema)
        if not pa.types.is_boolean(f.type) and not pa.types.is_null(f.type):
            raise ExpressionTypeError(
                f"where()/filter() needs a boolean predicate, but {self.predicate} is {f.type}. "
                "Compare it with something, e.g. col('x') > 0."
            )
        self._set_schema(self.input.schema)

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return Filter(children[0], self.predicate)

    def describe(self) -> str:
        # A predicate's own name names no column (sem_predicate's would print "... as literal").
        pred = self.predicate
        return f"Filter {shown(pred.child if isinstance(pred, Alias) else pred)}"


@dataclasses.dataclass(frozen=True, eq=False)
class Limit(LogicalPlan):
    input: LogicalPlan
    n: int

    def __post_init__(self):
        if not isinstance(self.n, int) or self.n < 0:
            raise PlanError(f"limit() needs a non-negative integer, got {self.n!r}")
        self._set_schema(self.input.schema)

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return Limit(children[0], self.n)

    def describe(self) -> str:
        return f"Limit {self.n}"


def _check_columns(names, schema: pa.Schema) -> None:
    for n in names:
        if schema.get_field_index(n) < 0:
            raise column_not_found(n, schema)


@dataclasses.dataclass(frozen=True, eq=False)
class Sort(LogicalPlan):
    input: LogicalPlan
    keys: tuple[str, ...]
    descending: tuple[bool, ...]
    nulls_first: bool = False

    def __post_init__(self):
        _check_columns(self.keys, self.input.schema)
        self._set_schema(self.input.schema)

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return Sort(children[0], self.keys, self.descending, self.nulls_first)

    def describe(self) -> str:
        keys = ", ".join(f"{k} {'desc' if d else 'asc'}" for k, d in zip(self.keys, self.descending))
        return f"Sort [{keys}]"


@dataclasses.dataclass(frozen=True, eq=False)
class Distinct(LogicalPlan):
    input: LogicalPlan
    on: tuple[str, ...] | None = None

    def __post_init__(self):
        if self.on:
            _check_columns(self.on, self.input.schema)
        self._set_schema(self.input.schema)

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return Distinct(children[0], self.on)

    def describe(self) -> str:
        return f"Distinct on=[{', '.join(self.on) if self.on else '*'}]"


@dataclasses.dataclass(frozen=True, eq=False)
class Explode(LogicalPlan):
    input: LogicalPlan
    columns: tuple[str, ...]

    def __post_init__(self):
        _check_columns(self.columns, self.input.schema)
        fields = []
        for f in self.input.schema:
            if f.name in self.columns:
                if not (pa.types.is_list(f.type) or pa.types.is_large_list(f.type) or pa.types.is_fixed_size_list(f.type)):
                    raise ExpressionTypeError(f"explode() needs list columns, but {f.name!r} is {f.type}.")
                fields.append(pa.field(f.name, f.type.value_type))
            else:
                fields.append(f)
        self._set_schema(pa.schema(fields))

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return Explode(children[0], self.columns)

    def describe(self) -> str:
        return f"Explode [{', '.join(self.columns)}]"


JOIN_TYPES = {"inner": "inner", "left": "left outer", "right": "right outer", "outer": "full outer", "semi": "left semi", "anti": "left anti"}


@dataclasses.dataclass(frozen=True, eq=False)
class Join(LogicalPlan):
    left: LogicalPlan
    right: LogicalPlan
    left_on: tuple[str, ...]
    right_on: tuple[str, ...]
    how: str = "inner"
    prefix: str = "right."

    def __post_init__(self):
        if self.how not in JOIN_TYPES:
            raise PlanError(f"Unknown join type {self.how!r}; use one of {', '.join(JOIN_TYPES)}.")
        if len(self.left_on) != len(self.right_on) or not self.left_on:
            raise PlanError("join() needs the same number (at least one) of left and right keys.")
        _check_columns(self.left_on, self.left.schema)
        _check_columns(self.right_on, self.right.schema)
        for lk, rk in zip(self.left_on, self.right_on):
            lt, rt = self.left.schema.field(lk).type, self.right.schema.field(rk).type
            if not _join_compatible(lt, rt):
                raise ExpressionTypeError(
                    f"Join keys {lk!r} ({lt}) and {rk!r} ({rt}) have different types. Cast one with .cast() first."
                )
        self._set_schema(self.output_schema())

    def output_schema(self) -> pa.Schema:
        fields = list(self.left.schema)
        for lk, rk in zip(self.left_on, self.right_on):
            i = self.left.schema.get_field_index(lk)
            if pa.types.is_null(fields[i].type) and self.how not in ("semi", "anti"):
                # An all-null key (e.g. from empty input) takes the other side's type.
                fields[i] = fields[i].with_type(self.right.schema.field(rk).type)
        if self.how in ("semi", "anti"):
            return pa.schema(fields)
        left_names = set(self.left.schema.names)
        for f in self.right.schema:
            if f.name in self.right_on:
                continue  # keys are coalesced into the left key columns
            name = self.prefix + f.name if f.name in left_names else f.name
            fields.append(f.with_name(name))
        return pa.schema(fields)

    def children(self):
        return (self.left, self.right)

    def with_children(self, children):
        return Join(children[0], children[1], self.left_on, self.right_on, self.how, self.prefix)

    def describe(self) -> str:
        keys = ", ".join(f"{a}={b}" for a, b in zip(self.left_on, self.right_on))
        return f"Join {self.how} on [{keys}]"


NEAREST_METRICS = ("cosine", "dot", "l2")


def _vector_size(schema: pa.Schema, name: str, side: str) -> int | None:
    """The fixed size of vector column ``name`` (None for ``list<float>``); a plan error if it is not a vector."""
    idx = schema.get_field_index(name)
    if idx < 0:
        raise column_not_found(name, schema)
    t = schema.field(idx).type
    try:
        return vector_size(t)
    except TypeError:
        raise ExpressionTypeError(
            f"nearest(): {side} column {name!r} is {t}, not a vector. Pass an embedding column "
            "(fixed_size_list<float> or list<float>, e.g. from embed_text()) as on=/other_on=."
        ) from None


@dataclasses.dataclass(frozen=True, eq=False)
class Nearest(LogicalPlan):
    """For every ``left`` row, its ``k`` closest ``right`` rows by vector (exact top-k): one output row per match.

    Output: ``left``'s columns, then ``right``'s (``prefix`` before names ``left`` has too), then
    ``score_column`` (float32) and ``rank_column`` (int64, from 1), in ``left``'s row order.

    Example:
        >>> import inferframe as ifr
        >>> a = ifr.from_pydict({"v": [[1.0, 0.0]]})._plan
        >>> node = Nearest(a, a, "v", "v", k=1)
        >>> node.schema.names, node.describe()
        (['v', 'right.v', 'score', 'rank'], 'Nearest k=1 cosine on [v ~ right v] -> score, rank')
    """

    left: LogicalPlan
    right: LogicalPlan
    on: str
    other_on: str
    k: int = 5
    metric: str = "cosine"
    score_column: str = "score"
    rank_column: str = "rank"
    prefix: str = "right."

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise PlanError(f"nearest(): k must be a positive integer, got {self.k!r}.")
        if self.metric not in NEAREST_METRICS:
            raise PlanError(f"nearest(): unknown metric {self.metric!r}; use one of {', '.join(NEAREST_METRICS)}.")
        sl = _vector_size(self.left.schema, self.on, "the")
        sr = _vector_size(self.right.schema, self.other_on, "other's")
        if sl is not None and sr is not None and sl != sr:
            raise ExpressionTypeError(
                f"nearest(): {self.on!r} holds vectors of {sl} values but other's {self.other_on!r} holds {sr}. "
                "Embed both sides with the same model and size."
            )
        names = list(self.left.schema.names) + self.right_names() + [self.score_column, self.rank_column]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise PlanError(
                f"nearest() would produce duplicate column names {dupes}. Pick other names with "
                "column= (the score's; its rank is <column>_rank) or prefix=, or rename the columns first."
            )
        right = [pa.field(name, f.type) for name, f in zip(self.right_names(), self.right.schema)]
        score = [pa.field(self.score_column, pa.float32()), pa.field(self.rank_column, pa.int64())]
        self._set_schema(pa.schema(list(self.left.schema) + right + score))

    def right_names(self) -> list[str]:
        """``right``'s column names as they appear in the output."""
        left = set(self.left.schema.names)
        return [self.prefix + n if n in left else n for n in self.right.schema.names]

    def children(self):
        return (self.left, self.right)

    def with_children(self, children):
        return dataclasses.replace(self, left=children[0], right=children[1])

    def describe(self) -> str:
        on = f"[{self.on} ~ right {self.other_on}]"
        return f"Nearest k={self.k} {self.metric} on {on} -> {self.score_column}, {self.rank_column}"


def _join_compatible(a: pa.DataType, b: pa.DataType) -> bool:
    if a == b:
        return True
    num = lambda t: pa.types.is_integer(t) or pa.types.is_floating(t)  # noqa: E731
    strs = lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)  # noqa: E731
    nulls = pa.types.is_null(a) or pa.types.is_null(b)
    return nulls or (num(a) and num(b)) or (strs(a) and strs(b))


@dataclasses.dataclass(frozen=True, eq=False)
class Aggregate(LogicalPlan):
    """Group by key columns and aggregate: ``aggs`` holds (op, input column, output name)."""

    input: LogicalPlan
    group_by: tuple[str, ...]
    aggs: tuple[tuple[str, str, str], ...]
    out_schema: pa.Schema

    def __post_init__(self):
        _check_columns(self.group_by, self.input.schema)
        _check_columns([c for _, c, _ in self.aggs], self.input.schema)
        self._set_schema(self.out_schema)

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return Aggregate(children[0], self.group_by, self.aggs, self.out_schema)

    def describe(self) -> str:
        aggs = ", ".join(f"{op}({c}) as {o}" for op, c, o in self.aggs)
        return f"Aggregate by=[{', '.join(self.group_by)}] [{aggs}]"


@dataclasses.dataclass(frozen=True, eq=False)
class Concat(LogicalPlan):
    inputs: tuple[LogicalPlan, ...]

    def __post_init__(self):
        first = self.inputs[0].schema
        for other in self.inputs[1:]:
            if other.schema.names != first.names or not all(
                _join_compatible(a.type, b.type) or a.type == b.type for a, b in zip(first, other.schema)
            ):
                raise PlanError(
                    "concat() needs the same columns with the same types in every DataFrame: "
                    f"[{_schema_str(first)}] vs [{_schema_str(other.schema)}]. Use select()/cast() to align them."
                )
        self._set_schema(first)

    def children(self):
        return self.inputs

    def with_children(self, children):
        return Concat(tuple(children))

    def describe(self) -> str:
        return f"Concat ({len(self.inputs)} inputs)"


@dataclasses.dataclass(frozen=True, eq=False)
class IntoBatches(LogicalPlan):
    input: LogicalPlan
    batch_size: int

    def __post_init__(self):
        if not isinstance(self.batch_size, int) or self.batch_size <= 0:
            raise PlanError(f"into_batches() needs a positive batch size, got {self.batch_size!r}")
        self._set_schema(self.input.schema)

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return IntoBatches(children[0], self.batch_size)

    def describe(self) -> str:
        return f"IntoBatches {self.batch_size}"


@dataclasses.dataclass(frozen=True, eq=False)
class Repartition(LogicalPlan):
    input: LogicalPlan
    num_partitions: int | None
    by: tuple[str, ...] = ()

    def __post_init__(self):
        if self.num_partitions is not None and self.num_partitions <= 0:
            raise PlanError(f"repartition() needs a positive number of partitions, got {self.num_partitions!r}")
        _check_columns(self.by, self.input.schema)
        self._set_schema(self.input.schema)

    def children(self):
        return (self.input,)

    def with_children(self, children):
        return Repartition(children[0], self.num_partitions, self.by)

    def describe(self) -> str:
        by = f" by=[{', '.join(self.by)}]" if self.by else ""
        return f"Repartition {self.num_partitions}{by}"


def is_passthrough(expr: Node) -> str | None:
    """If ``expr`` only renames or copies a column, return the source column name."""
    from inferframe.expressions.nodes import Alias

    while isinstance(expr, Alias):
        expr = expr.child
    return expr.column if isinstance(expr, Col) else None
