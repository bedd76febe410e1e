"""Immutable expression nodes and their type inference.

Nodes are plain frozen dataclasses so plans pickle and compare by value. Type
inference for vectorised calls evaluates the kernel on empty arrays of the
input types: pyarrow's own type rules decide, so inference and execution can
never disagree.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Callable, Iterator

import pyarrow as pa

from inferframe.errors import ColumnNotFoundError, ExpressionTypeError


class Node:
    """Base of every expression node."""

    def children(self) -> tuple["Node", ...]:
        return ()

    def with_children(self, children: tuple["Node", ...]) -> "Node":
        return self

    def name(self) -> str:
        for c in self.children():
            return c.name()
        return "literal"

    def to_field(self, schema: pa.Schema) -> pa.Field:
        raise NotImplementedError

    def walk(self) -> Iterator["Node"]:
        yield self
        for c in self.children():
            yield from c.walk()

    def referenced_columns(self) -> set[str]:
        return {n.column for n in self.walk() if isinstance(n, Col)}

    def transform_up(self, fn: Callable[["Node"], "Node"]) -> "Node":
        kids = tuple(c.transform_up(fn) for c in self.children())
        node = self.with_children(kids) if kids else self
        return fn(node)


def column_not_found(name: str, schema: pa.Schema) -> ColumnNotFoundError:
    names = list(schema.names)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return ColumnNotFoundError(f"Column {name!r} not found.{hint} Available columns: {', '.join(names) or '(none)'}.")


@dataclasses.dataclass(frozen=True)
class Col(Node):
    column: str

    def name(self) -> str:
        return self.column

    def to_field(self, schema: pa.Schema) -> pa.Field:
        idx = schema.get_field_index(self.column)
        if idx < 0:
            raise column_not_found(self.column, schema)
        return schema.field(idx)

    def __str__(self) -> str:
        return f"col({self.column})"


@dataclasses.dataclass(frozen=True)
class Lit(Node):
    value: Any
    dtype: pa.DataType | None = None

    def scalar(self) -> pa.Scalar:
        if isinstance(self.value, pa.Scalar):
            return self.value
        return pa.scalar(self.value, type=self.dtype)

    def to_field(self, schema: pa.Schema) -> pa.Field:
        return pa.field("literal", self.scalar().type)

    def __str__(self) -> str:
        return f"lit({self.value!r})"


@dataclasses.dataclass(frozen=True)
class Alias(Node):
    child: Node
    alias: str

    def children(self):
        return (self.child,)

    def with_children(self, children):
        return Alias(children[0], self.alias)

    def name(self) -> str:
        return self.alias

    def to_field(self, schema):
        return self.child.to_field(schema).with_name(self.alias)

    def __str__(self) -> str:
        return f"{self.child} as {self.alias}"


@dataclasses.dataclass(frozen=True)
class Call(Node):
    """A vectorised function over Arrow arrays, looked up in the registry by name."""

    function: str
    args: tuple[Node, ...]
    params: tuple[tuple[str, Any], ...] = ()

    def children(self):
        return self.args

    def with_children(self, children):
        return Call(self.function, tuple(children), self.params)

    def to_field(self, schema):
        from inferframe.expressions.functions import REGISTRY, empty_of

        fn = REGISTRY[self.function]
        fields = [a.to_field(schema) for a in self.args]
        try:
            out = fn.evaluate([empty_of(f.type) for f in fields], dict(self.params))
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            types = ", ".join(str(f.type) for f in fields)
            # Our own kernels raise plain TypeErrors whose message already says what to do.
            hint = "" if type(e) is TypeError else " Cast the inputs first, e.g. col('x').cast(DataType.float64())."
            raise ExpressionTypeError(
                f"Cannot apply {fn.display} to ({types}) in {self}: {first_line(e).rstrip('.')}.{hint}"
            ) from None
        return pa.field(self.name(), out.type)

    def __str__(self) -> str:
        args = ", ".join(str(a) for a in self.args)
        params = "".join(f", {k}={v!r}" for k, v in self.params)
        return f"{self.function}({args}{params})"


@dataclasses.dataclass(frozen=True)
class Cast(Node):
    child: Node
    dtype: pa.DataType

    def children(self):
        return (self.child,)

    def with_children(self, children):
        return Cast(children[0], self.dtype)

    def to_field(self, schema):
        src = self.child.to_field(schema)
        from inferframe.expressions.functions import empty_of

        try:
            empty_of(src.type).cast(self.dtype)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as e:
            raise ExpressionTypeError(f"Cannot cast {src.name!r} from {src.type} to {self.dtype}: {first_line(e)}") from None
        return pa.field(self.name(), self.dtype)

    def __str__(self) -> str:
        return f"cast({self.child} as {self.dtype})"


AGG_OPS = frozenset({"sum", "mean", "min", "max", "count", "count_distinct", "list", "first", "last", "stddev", "variance", "any", "all"})


@dataclasses.dataclass(frozen=True)
class Agg(Node):
    op: str
    child: Node

    def children(self):
        return (self.child,)

    def with_children(self, children):
        return Agg(self.op, children[0])

    def to_field(self, schema):
        f = self.child.to_field(schema)
        t = f.type
        if pa.types.is_null(t) and self.op in ("sum", "mean", "stddev", "variance"):
            t = pa.int64()  # an all-null column (e.g. from empty input) aggregates like an empty number column
        if self.op in ("count", "count_distinct"):
            out = pa.int64()
        elif self.op == "list":
            out = pa.list_(t)
        elif self.op in ("mean", "stddev", "variance"):
            if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
                raise ExpressionTypeError(f"{self.op}() needs a numeric column, but {f.name!r} is {t}.")
            out = pa.float64()
        elif self.op == "sum":
            if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
                raise ExpressionTypeError(f"sum() needs a numeric column, but {f.name!r} is {t}.")
            out = pa.int64() if pa.types.is_signed_integer(t) else pa.uint64() if pa.types.is_unsigned_integer(t) else t
        elif self.op in ("any", "all"):
            out = pa.bool_()
        else:
            out = t
        return pa.field(self.name(), out)

    def __str__(self) -> str:
        return f"{self.op}({self.child})"


@dataclasses.dataclass(frozen=True)
class UDFCall(Node):
    """A call to a Python function or model class; run by the execution layer.

    ``udf`` is any object with ``name``, ``return_type(arg_fields) -> pa.DataType``
    and an ``execution`` attribute the executor understands.
    """

    udf: Any
    args: tuple[Node, ...]

    def children(self):
        return self.args

    def with_children(self, children):
        return UDFCall(self.udf, tuple(children))

    def to_field(self, schema):
        fields = [a.to_field(schema) for a in self.args]
        return pa.field(self.name(), self.udf.return_type(fields))

    def __str__(self) -> str:
        return f"{self.udf.name}({', '.join(str(a) for a in self.args)})"

    def __hash__(self) -> int:
        return hash((id(self.udf), self.args))

    def __eq__(self, other) -> bool:
        return isinstance(other, UDFCall) and other.udf is self.udf and other.args == self.args


@dataclasses.dataclass(frozen=True)
class Unnest(Node):
    """Marker: expand a struct into one column per field (only valid at the top of a projection)."""

    child: Node

    def children(self):
        return (self.child,)

    def with_children(self, children):
        return Unnest(children[0])

    def to_field(self, schema):
        raise ExpressionTypeError("unnest() can only be used directly in select()/with_columns(), not inside another expression.")

    def __str__(self) -> str:
        return f"unnest({self.child})"


def first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def contains_udf(node: Node) -> bool:
    return any(isinstance(n, UDFCall) for n in node.walk())


def contains_agg(node: Node) -> bool:
    return any(isinstance(n, Agg) for n in node.walk())
