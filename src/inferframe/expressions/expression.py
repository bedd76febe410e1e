"""The user-facing ``Expression``: operators and method namespaces over nodes.

Example:
    >>> from inferframe import col, lit
    >>> str((col("price") * lit(2)).alias("double"))
    'mul(col(price), lit(2)) as double'
"""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa

from inferframe.datatype import DataType, to_datatype
from inferframe.expressions.nodes import Agg, Alias, Call, Cast, Col, Lit, Node, Unnest


def to_node(value: Any) -> Node:
    """Wrap a Python value or Expression as a node (plain values become literals)."""
    if isinstance(value, Expression):
        return value._node
    if isinstance(value, Node):
        return value
    if isinstance(value, DataType):
        raise TypeError("A DataType is not a value; did you mean .cast(dtype)?")
    return Lit(value)


def _call(fn: str, *args: Any, **params: Any) -> "Expression":
    return Expression(Call(fn, tuple(to_node(a) for a in args), tuple(sorted(params.items()))))


class Expression:
    """A column-valued expression, built lazily and evaluated per batch.

    Parameters:
        node: the expression node it wraps (users build expressions with ``col``/``lit``).

    Example:
        >>> e = col("a").str.upper().alias("A")
        >>> e.name()
        'A'
    """

    __slots__ = ("_node",)

    def __init__(self, node: Node) -> None:
        self._node = node

    # --- identity -----------------------------------------------------
    def name(self) -> str:
        return self._node.name()

    def alias(self, name: str) -> "Expression":
        return Expression(Alias(self._node, name))

    def cast(self, dtype: Any) -> "Expression":
        return Expression(Cast(self._node, to_datatype(dtype).to_arrow()))

    def __repr__(self) -> str:
        return str(self._node)

    def __str__(self) -> str:
        return str(self._node)

    def __bool__(self) -> bool:
        raise TypeError(
            "An expression has no truth value; combine predicates with & | ~ instead of and/or/not."
        )

    def __hash__(self) -> int:
        return hash(self._node)

    # --- arithmetic ---------------------------------------------------
    def __add__(self, o): return _call("add", self, o)
    def __radd__(self, o): return _call("add", o, self)
    def __sub__(self, o): return _call("sub", self, o)
    def __rsub__(self, o): return _call("sub", o, self)
    def __mul__(self, o): return _call("mul", self, o)
    def __rmul__(self, o): return _call("mul", o, self)
    def __truediv__(self, o): return _call("div", self, o)
    def __rtruediv__(self, o): return _call("div", o, self)
    def __floordiv__(self, o): return _call("floordiv", self, o)
    def __mod__(self, o): return _call("mod", self, o)
    def __pow__(self, o): return _call("pow", self, o)
    def __neg__(self): return _call("neg", self)
    def __abs__(self): return _call("abs", self)

    # --- comparison and boolean ----------------------------------------
    def __eq__(self, o): return _call("eq", self, o)  # type: ignore[override]
    def __ne__(self, o): return _call("ne", self, o)  # type: ignore[override]
    def __lt__(self, o): return _call("lt", self, o)
    def __le__(self, o): return _call("le", self, o)
    def __gt__(self, o): return _call("gt", self, o)
    def __ge__(self, o): return _call("ge", self, o)
    def __and__(self, o): return _call("and", self, o)
    def __rand__(self, o): return _call("and", o, self)
    def __or__(self, o): return _call("or", self, o)
    def __ror__(self, o): return _call("or", o, self)
    def __xor__(self, o): return _call("xor", self, o)
    def __invert__(self): return _call("not", self)

    def is_null(self) -> "Expression":
        return _call("is_null", self)

    def not_null(self) -> "Expression":
        return _call("not_null", self)

    def fill_null(self, value: Any) -> "Expression":
        return _call("fill_null", self, value)

    def is_in(self, values: list) -> "Expression":
        return _call("is_in", self, values=tuple(values))

    def between(self, lower: Any, upper: Any) -> "Expression":
        return (self >= lower) & (self <= upper)

    def if_else(self, if_true: Any, if_false: Any) -> "Expression":
        """``pred.if_else(a, b)``: ``a`` where the predicate holds, else ``b``."""
        return _call("if_else", self, if_true, if_false)

    def round(self, decimals: int = 0) -> "Expression":
        return _call("round", self, decimals=decimals)

    def abs(self) -> "Expression":
        return _call("abs", self)

    # --- aggregations -------------------------------------------------
    def sum(self): return Expression(Agg("sum", self._node))
    def mean(self): return Expression(Agg("mean", self._node))
    def min(self): return Expression(Agg("min", self._node))
    def max(self): return Expression(Agg("max", self._node))
    def count(self): return Expression(Agg("count", self._node))
    def count_distinct(self): return Expression(Agg("count_distinct", self._node))
    def agg_list(self): return Expression(Agg("list", self._node))
    def first(self): return Expression(Agg("first", self._node))
    def last(self): return Expression(Agg("last", self._node))
    def stddev(self): return Expression(Agg("stddev", self._node))
    def var(self): return Expression(Agg("variance", self._node))
    def any_value(self): return Expression(Agg("first", self._node))

    # --- Python functions ---------------------------------------------
    def apply(self, fn: Callable, return_dtype: Any) -> "Expression":
        """Run a Python function on each value: ``col("x").apply(len, DataType.int64())``."""
        from inferframe.expressions.udf import UDFSpec, make_call, resolve_return_dtype

        spec = UDFSpec(name=getattr(fn, "__name__", "apply"), fn=fn, return_dtype=resolve_return_dtype(fn, return_dtype))
        return make_call(spec, (self,), {})

    # --- namespaces ---------------------------------------------------
    @property
    def str(self) -> "StringNamespace":
        return StringNamespace(self)

    @property
    def list(self) -> "ListNamespace":
        return ListNamespace(self)

    @property
    def struct(self) -> "StructNamespace":
        return StructNamespace(self)

    def __getitem__(self, field: str) -> "Expression":
        return self.struct.get(field)

    def unnest(self) -> "Expression":
        return Expression(Unnest(self._node))


class _Namespace:
    __slots__ = ("_e",)

    def __init__(self, e: Expression) -> None:
        self._e = e


class StringNamespace(_Namespace):
    """String functions: ``col("s").str.lower()``."""

    def contains(self, pattern: str, ignore_case: bool = False) -> Expression:
        return _call("str.contains", self._e, pattern=pattern, ignore_case=ignore_case)

    def startswith(self, prefix: str) -> Expression:
        return _call("str.startswith", self._e, prefix=prefix)

    def endswith(self, suffix: str) -> Expression:
        return _call("str.endswith", self._e, suffix=suffix)

    def lower(self) -> Expression:
        return _call("str.lower", self._e)

    def upper(self) -> Expression:
        return _call("str.upper", self._e)

    def length(self) -> Expression:
        return _call("str.length", self._e)

    def strip(self) -> Expression:
        return _call("str.strip", self._e)

    def split(self, sep: str) -> Expression:
        return _call("str.split", self._e, sep=sep)

    def replace(self, pattern: str, replacement: str, regex: bool = False) -> Expression:
        return _call("str.replace", self._e, pattern=pattern, replacement=replacement, regex=regex)

    def match(self, pattern: str) -> Expression:
        return _call("str.match", self._e, pattern=pattern)

    def slice(self, start: int, stop: int | None = None) -> Expression:
        return _call("str.slice", self._e, start=start, stop=stop)

    def concat(self, *others: Any) -> Expression:
        return _call("str.concat", self._e, *others)


class ListNamespace(_Namespace):
    """List functions: ``col("tags").list.get(0)``."""

    def get(self, index: int) -> Expression:
        return _call("list.get", self._e, index=index)

    def length(self) -> Expression:
        return _call("list.length", self._e)

    def join(self, sep: str) -> Expression:
        return _call("list.join", self._e, sep=sep)


class StructNamespace(_Namespace):
    """Struct functions: ``col("s").struct.get("field")``."""

    def get(self, field: str) -> Expression:
        return _call("struct.get", self._e, field=field).alias(field)


def col(name: str) -> Expression:
    """Refer to a column by name.

    Example:
        >>> col("review").name()
        'review'
    """
    if not isinstance(name, str):
        raise TypeError(f"col() takes a column name (str), got {type(name).__name__}")
    return Expression(Col(name))


def lit(value: Any, dtype: Any = None) -> Expression:
    """A constant value, broadcast to every row.

    Example:
        >>> lit(3).name()
        'literal'
    """
    if isinstance(value, Expression):
        return value
    return Expression(Lit(value, to_datatype(dtype).to_arrow() if dtype is not None else None))


def as_arrow_type(t: Any) -> pa.DataType:
    return to_datatype(t).to_arrow()
