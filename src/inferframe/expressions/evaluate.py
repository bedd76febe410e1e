"""Evaluate pure (non-UDF) expressions over an Arrow record batch with pyarrow compute."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from inferframe.expressions.functions import REGISTRY
from inferframe.expressions.nodes import Alias, Call, Cast, Col, Lit, Node, UDFCall


def evaluate(node: Node, batch: pa.RecordBatch) -> pa.Array:
    """Evaluate ``node`` on ``batch``; the result always has ``batch.num_rows`` rows.

    Example:
        >>> from inferframe import col, lit
        >>> batch = pa.record_batch({"a": [1, 2]})
        >>> evaluate((col("a") * 10)._node, batch).to_pylist(), evaluate(lit("x")._node, batch).to_pylist()
        ([10, 20], ['x', 'x'])
    """
    out = _eval(node, batch)
    if isinstance(out, pa.Scalar):
        return pa.repeat(out, batch.num_rows)
    if isinstance(out, pa.ChunkedArray):
        return out.combine_chunks()
    return out


def _eval(node: Node, batch: pa.RecordBatch):
    if isinstance(node, Col):
        return batch.column(node.column)
    if isinstance(node, Lit):
        return node.scalar()
    if isinstance(node, Alias):
        return _eval(node.child, batch)
    if isinstance(node, Cast):
        v = _eval(node.child, batch)
        if pa.types.is_floating(v.type) and pa.types.is_integer(node.dtype):
            v = pc.trunc(v)  # like int(): drop the fraction, but still fail on overflow
        return v.cast(node.dtype) if isinstance(v, pa.Scalar) else pc.cast(v, node.dtype)
    if isinstance(node, Call):
        args = [_eval(a, batch) for a in node.args]
        if args and all(isinstance(a, pa.Scalar) for a in args):
            # Kernels disagree on all-scalar inputs; broadcast to one row and back.
            args = [pa.repeat(a, 1) for a in args]
            return REGISTRY[node.function].evaluate(args, dict(node.params))[0]
        return REGISTRY[node.function].evaluate(args, dict(node.params))
    if isinstance(node, UDFCall):
        raise RuntimeError(f"internal: UDF {node.udf.name} must be planned into its own operator")
    raise TypeError(f"internal: cannot evaluate {type(node).__name__} here: {node}")


def to_pyarrow_filter(node: Node):
    """Translate a predicate to a ``pyarrow.compute.Expression`` for scan pushdown, or None.

    Example:
        >>> from inferframe import col
        >>> to_pyarrow_filter(((col("a") > 1) & col("b").not_null())._node)
        <pyarrow.compute.Expression ((a > 1) and is_valid(b))>
        >>> to_pyarrow_filter(col("s").str.lower()._node) is None  # no pyarrow equivalent: filtered after the scan
        True
    """
    import pyarrow.dataset as ds

    ops = {"eq": "__eq__", "ne": "__ne__", "lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__", "and": "__and__", "or": "__or__"}

    def tr(n: Node):
        if isinstance(n, Col):
            return ds.field(n.column)
        if isinstance(n, Lit):
            return pc.scalar(n.value) if n.dtype is None else pc.scalar(n.scalar())
        if isinstance(n, Alias):
            return tr(n.child)
        if isinstance(n, Call):
            if n.function in ops and len(n.args) == 2:
                a, b = tr(n.args[0]), tr(n.args[1])
                if a is None or b is None:
                    return None
                return getattr(a, ops[n.function])(b)
            if n.function == "not":
                a = tr(n.args[0])
                return None if a is None else ~a
            if n.function == "is_null":
                a = tr(n.args[0])
                return None if a is None else a.is_null()
            if n.function == "not_null":
                a = tr(n.args[0])
                return None if a is None else a.is_valid()
            if n.function == "is_in":
                a = tr(n.args[0])
                return None if a is None else a.isin(list(dict(n.params)["values"]))
        return None

    return tr(node)
