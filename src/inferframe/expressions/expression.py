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
from inferframe.errors import ArgumentTypeError, ExpressionTypeError
from inferframe.expressions.nodes import Agg, Alias, Call, Cast, Col, Lit, Node, UDFCall, Unnest
from inferframe.expressions.udf_spec import UDFSpec, resolve_return_dtype


def to_node(value: Any) -> Node:
    """Wrap a Python value or Expression as a node (plain values become literals).

    Example:
        >>> to_node(col("a")), to_node(3)
        (Col(column='a'), Lit(value=3, dtype=None))
    """
    if isinstance(value, Expression):
        return value._node
    if isinstance(value, Node):
        return value
    if isinstance(value, DataType):
        raise ExpressionTypeError("A DataType is not a value; did you mean .cast(dtype)?")
    return Lit(value)


def call_expression(fn: str, *args: Any, **params: Any) -> "Expression":
    return Expression(Call(fn, tuple(to_node(a) for a in args), tuple(sorted(params.items()))))


class Expression:
    """A column-valued expression, built lazily and evaluated per batch.

    Python operators build expressions too: ``+ - * / // % **``, unary ``-``,
    ``abs()``, comparisons ``== != < <= > >=`` and the boolean ``& | ^ ~``
    (not ``and``/``or``/``not``). Plain values on either side become literals.

    Parameters:
        node: the expression node it wraps (users build expressions with ``col``/``lit``).

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"a": [1, 2, 3]})
        >>> df.select((ifr.col("a") * 10 + 1).alias("b"), (ifr.col("a") % 2 == 1) & (ifr.col("a") > 1)).to_pydict()
        {'b': [11, 21, 31], 'a': [False, False, True]}
    """

    __slots__ = ("_node",)

    def _fn(self, fn: str, *args: Any, **params: Any) -> "Expression":
        """This expression as the first argument of the registered function ``fn`` (the namespaces' builder)."""
        return call_expression(fn, self, *args, **params)

    def __init__(self, node: Node) -> None:
        self._node = node

    # --- identity -----------------------------------------------------
    def name(self) -> str:
        """The name of the output column: the alias, else the first column it reads.

        Example:
            >>> (col("price") * 2).name(), col("price").alias("total").name()
            ('price', 'total')
        """
        return self._node.name()

    def alias(self, name: str) -> "Expression":
        """Rename the output column.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1]}).select((ifr.col("a") + 1).alias("b")).to_pydict()
            {'b': [2]}
        """
        return Expression(Alias(self._node, name))

    def cast(self, dtype: Any) -> "Expression":
        """Convert the values to another type (a DataType, Arrow type or Python type).

        Floats cast to integers drop their fraction, like ``int()``.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1.7, -1.7]}).select(ifr.col("a").cast(int)).to_pydict()
            {'a': [1, -1]}
        """
        return Expression(Cast(self._node, to_datatype(dtype).to_arrow()))

    def __repr__(self) -> str:
        return str(self._node)

    def __str__(self) -> str:
        return str(self._node)

    def __bool__(self) -> bool:
        raise ExpressionTypeError(
            "An expression has no truth value; combine predicates with & | ~ instead of and/or/not."
        )

    def __hash__(self) -> int:
        return hash(self._node)

    # --- arithmetic ---------------------------------------------------
    def __add__(self, o): return call_expression("add", self, o)
    def __radd__(self, o): return call_expression("add", o, self)
    def __sub__(self, o): return call_expression("sub", self, o)
    def __rsub__(self, o): return call_expression("sub", o, self)
    def __mul__(self, o): return call_expression("mul", self, o)
    def __rmul__(self, o): return call_expression("mul", o, self)
    def __truediv__(self, o): return call_expression("div", self, o)
    def __rtruediv__(self, o): return call_expression("div", o, self)
    def __floordiv__(self, o): return call_expression("floordiv", self, o)
    def __mod__(self, o): return call_expression("mod", self, o)
    def __pow__(self, o): return call_expression("pow", self, o)
    def __neg__(self): return call_expression("neg", self)
    def __abs__(self): return call_expression("abs", self)

    # --- comparison and boolean ----------------------------------------
    def __eq__(self, o): return call_expression("eq", self, o)  # type: ignore[override]
    def __ne__(self, o): return call_expression("ne", self, o)  # type: ignore[override]
    def __lt__(self, o): return call_expression("lt", self, o)
    def __le__(self, o): return call_expression("le", self, o)
    def __gt__(self, o): return call_expression("gt", self, o)
    def __ge__(self, o): return call_expression("ge", self, o)
    def __and__(self, o): return call_expression("and", self, o)
    def __rand__(self, o): return call_expression("and", o, self)
    def __or__(self, o): return call_expression("or", self, o)
    def __ror__(self, o): return call_expression("or", o, self)
    def __xor__(self, o): return call_expression("xor", self, o)
    def __invert__(self): return call_expression("not", self)

    def is_null(self) -> "Expression":
        """True where the value is null.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1, None]}).select(ifr.col("a").is_null()).to_pydict()
            {'a': [False, True]}
        """
        return call_expression("is_null", self)

    def not_null(self) -> "Expression":
        """True where the value is not null.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1, None]}).select(ifr.col("a").not_null()).to_pydict()
            {'a': [True, False]}
        """
        return call_expression("not_null", self)

    def fill_null(self, value: Any) -> "Expression":
        """Replace nulls with ``value`` (a constant or another expression).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1, None]}).select(ifr.col("a").fill_null(0)).to_pydict()
            {'a': [1, 0]}
        """
        return call_expression("fill_null", self, value)

    def is_in(self, values: list) -> "Expression":
        """True where the value is one of ``values``.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": ["x", "y"]}).select(ifr.col("a").is_in(["y", "z"])).to_pydict()
            {'a': [False, True]}
        """
        return call_expression("is_in", self, values=tuple(values))

    def between(self, lower: Any, upper: Any) -> "Expression":
        """True where ``lower <= value <= upper`` (both ends included).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1, 5, 9]}).select(ifr.col("a").between(1, 5)).to_pydict()
            {'a': [True, True, False]}
        """
        return (self >= lower) & (self <= upper)

    def if_else(self, if_true: Any, if_false: Any) -> "Expression":
        """``pred.if_else(a, b)``: ``a`` where the predicate holds, else ``b``.

        Example:
            >>> import inferframe as ifr
            >>> df = ifr.from_pydict({"a": [3, -1]})
            >>> df.select((ifr.col("a") > 0).if_else("pos", "neg").alias("sign")).to_pydict()
            {'sign': ['pos', 'neg']}
        """
        return call_expression("if_else", self, if_true, if_false)

    def round(self, decimals: int = 0) -> "Expression":
        """Round to ``decimals`` digits; exact halves go to the even neighbour.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1.26, 2.5]}).select(ifr.col("a").round(1)).to_pydict()
            {'a': [1.3, 2.5]}
        """
        return call_expression("round", self, decimals=decimals)

    def abs(self) -> "Expression":
        """The absolute value.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [-2, 3]}).select(ifr.col("a").abs()).to_pydict()
            {'a': [2, 3]}
        """
        return call_expression("abs", self)

    # --- aggregations -------------------------------------------------
    # For DataFrame.agg() and groupby().agg(); nulls are skipped.

    def sum(self) -> "Expression":
        """The sum of the values.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1, 2, None]}).agg(ifr.col("a").sum()).to_pydict()
            {'a': [3]}
        """
        return Expression(Agg("sum", self._node))

    def mean(self) -> "Expression":
        """The average of the values, as a float.

        Example:
            >>> import inferframe as ifr
            >>> df = ifr.from_pydict({"k": ["a", "a", "b"], "v": [1, 2, 5]})
            >>> df.groupby("k").agg(ifr.col("v").mean()).sort("k").to_pydict()
            {'k': ['a', 'b'], 'v': [1.5, 5.0]}
        """
        return Expression(Agg("mean", self._node))

    def min(self) -> "Expression":
        """The smallest value.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [3, 1, 2]}).agg(ifr.col("a").min()).to_pydict()
            {'a': [1]}
        """
        return Expression(Agg("min", self._node))

    def max(self) -> "Expression":
        """The largest value.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [3, 1, 2]}).agg(ifr.col("a").max()).to_pydict()
            {'a': [3]}
        """
        return Expression(Agg("max", self._node))

    def count(self) -> "Expression":
        """The number of non-null values.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1, None, 1]}).agg(ifr.col("a").count()).to_pydict()
            {'a': [2]}
        """
        return Expression(Agg("count", self._node))

    def count_distinct(self) -> "Expression":
        """The number of different values.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": ["x", "y", "x"]}).agg(ifr.col("a").count_distinct()).to_pydict()
            {'a': [2]}
        """
        return Expression(Agg("count_distinct", self._node))

    def agg_list(self) -> "Expression":
        """All values of a group, as one list.

        Example:
            >>> import inferframe as ifr
            >>> df = ifr.from_pydict({"k": ["a", "a", "b"], "v": [1, 2, 5]})
            >>> df.groupby("k").agg(ifr.col("v").agg_list()).sort("k").to_pydict()
            {'k': ['a', 'b'], 'v': [[1, 2], [5]]}
        """
        return Expression(Agg("list", self._node))

    def first(self) -> "Expression":
        """The first value, in row order.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": ["x", "y"]}).agg(ifr.col("a").first()).to_pydict()
            {'a': ['x']}
        """
        return Expression(Agg("first", self._node))

    def last(self) -> "Expression":
        """The last value, in row order.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": ["x", "y"]}).agg(ifr.col("a").last()).to_pydict()
            {'a': ['y']}
        """
        return Expression(Agg("last", self._node))

    def stddev(self) -> "Expression":
        """The sample standard deviation (null for fewer than two values).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1, 3]}).agg(ifr.col("a").stddev()).to_pydict()
            {'a': [1.4142135623730951]}
        """
        return Expression(Agg("stddev", self._node))

    def var(self) -> "Expression":
        """The sample variance (null for fewer than two values).

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"a": [1, 3]}).agg(ifr.col("a").var()).to_pydict()
            {'a': [2.0]}
        """
        return Expression(Agg("variance", self._node))

    def any_value(self) -> "Expression":
        """Some value of the group, for columns that hold the same value on every row of it.

        Example:
            >>> import inferframe as ifr
            >>> df = ifr.from_pydict({"k": [1, 1], "label": ["one", "one"]})
            >>> df.groupby("k").agg(ifr.col("label").any_value()).to_pydict()
            {'k': [1], 'label': ['one']}
        """
        return Expression(Agg("first", self._node))

    # --- Python functions ---------------------------------------------
    def apply(self, fn: Callable, return_dtype: Any) -> "Expression":
        """Run a Python function on each value (nulls included); ``return_dtype`` is the result type.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"s": ["ab", "c"]}).select(ifr.col("s").apply(len, int)).to_pydict()
            {'s': [2, 1]}
        """
        spec = UDFSpec(name=getattr(fn, "__name__", "apply"), fn=fn, return_dtype=resolve_return_dtype(fn, return_dtype))
        return make_call(spec, (self,), {})

    # --- namespaces ---------------------------------------------------
    @property
    def str(self) -> "StringNamespace":
        """String functions; see :class:`StringNamespace`.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"s": ["Ab"]}).select(ifr.col("s").str.lower()).to_pydict()
            {'s': ['ab']}
        """
        from inferframe.expressions.namespaces import StringNamespace

        return StringNamespace(self)

    @property
    def list(self) -> "ListNamespace":
        """List functions; see :class:`ListNamespace`.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"l": [[1, 2]]}).select(ifr.col("l").list.length()).to_pydict()
            {'l': [2]}
        """
        from inferframe.expressions.namespaces import ListNamespace

        return ListNamespace(self)

    @property
    def struct(self) -> "StructNamespace":
        """Struct functions; see :class:`StructNamespace`.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"p": [{"x": 1}]}).select(ifr.col("p").struct.get("x")).to_pydict()
            {'x': [1]}
        """
        from inferframe.expressions.namespaces import StructNamespace

        return StructNamespace(self)

    def __getitem__(self, field: str) -> "Expression":
        """``col("p")["x"]`` is ``col("p").struct.get("x")``.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"p": [{"x": 1}]}).select(ifr.col("p")["x"]).to_pydict()
            {'x': [1]}
        """
        return self.struct.get(field)

    def unnest(self) -> "Expression":
        """Expand a struct into one column per field; only directly in ``select``/``with_columns``.

        Example:
            >>> import inferframe as ifr
            >>> ifr.from_pydict({"p": [{"x": 1, "y": "a"}]}).select(ifr.col("p").unnest()).to_pydict()
            {'x': [1], 'y': ['a']}
        """
        return Expression(Unnest(self._node))


def col(name: str) -> Expression:
    """Refer to a column by name.

    Example:
        >>> col("review").name()
        'review'
    """
    if not isinstance(name, str):
        raise ArgumentTypeError(f"col() takes a column name (str), got {type(name).__name__}")
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
    """The Arrow type for a DataType, Arrow type or Python type.

    Example:
        >>> as_arrow_type(list[str])
        ListType(list<item: string>)
    """
    return to_datatype(t).to_arrow()


def make_call(spec: UDFSpec, args: tuple, kwargs: dict) -> Expression:
    """Build the UDF call expression, keeping non-expression arguments as constants.

    Example:
        >>> spec = UDFSpec(name="pad", fn=str.ljust, return_dtype=pa.string())
        >>> e = make_call(spec, (col("s"), 5), {})
        >>> e, e._node.udf.layout
        (pad(col(s)), (('expr', 0), ('const', 5)))
    """
    nodes = []
    layout = []
    for a in args:
        if isinstance(a, Expression):
            layout.append(("expr", len(nodes)))
            nodes.append(a._node)
        else:
            layout.append(("const", a))
    kwargs_layout = []
    for k, v in kwargs.items():
        if isinstance(v, Expression):
            kwargs_layout.append((k, "expr", len(nodes)))
            nodes.append(v._node)
        else:
            kwargs_layout.append((k, "const", v))
    if not nodes:
        raise ExpressionTypeError(f"{spec.name}() needs at least one column argument, e.g. {spec.name}(col('x')).")
    return Expression(UDFCall(spec.bind(tuple(layout), tuple(kwargs_layout)), tuple(nodes)))
