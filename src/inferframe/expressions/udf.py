"""What the executor needs to run one user function: the function, its types and options.

The specs are defined in ``udf_spec`` and ``make_call`` next to ``Expression``, so that
the expression layer has no import cycle; the rest of the package imports them from here.

Example:
    >>> from inferframe import col, DataType
    >>> spec = UDFSpec(name="n_chars", fn=len, return_dtype=DataType.int64().to_arrow())
    >>> make_call(spec, (col("s"),), {})
    n_chars(col(s))
"""

from inferframe.expressions.expression import make_call
from inferframe.expressions.udf_spec import (
    AISpec, ClassSpec, FileArgs, UDFSpec, is_async_callable, resolve_return_dtype,
    with_file_args,
)

__all__ = [
    "AISpec", "ClassSpec", "FileArgs", "UDFSpec", "is_async_callable", "make_call",
    "resolve_return_dtype", "with_file_args",
]
