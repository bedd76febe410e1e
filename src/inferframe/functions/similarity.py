"""``cosine_similarity``: vector similarity row by row, as a column expression.

It works on embedding columns (``fixed_size_list<float>`` such as ``DataType.embedding(...)``, or
``list<float>``) with numpy over Arrow's flat values buffer: no Python code runs per row. The
top-k search behind ``DataFrame.nearest`` is the plan operator ``Nearest`` (``execution/nearest.py``).

Example:
    >>> import inferframe as ifr
    >>> from inferframe.functions import cosine_similarity
    >>> df = ifr.from_pydict({"v": [[1.0, 0.0], [1.0, 1.0]]})
    >>> [round(x, 3) for x in df.select(cosine_similarity(ifr.col("v"), [1.0, 0.0]).alias("s")).to_pydict()["s"]]
    [1.0, 0.707]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inferframe.errors import ArgumentTypeError, ExpressionTypeError
from inferframe.expressions.expression import Expression, call_expression
from inferframe.expressions.functions import ConstVector


def cosine_similarity(a: Any, b: Any) -> Expression:
    """Cosine similarity of two vectors, row by row, as a float32 column.

    Parameters:
        a: an expression over an embedding column (``fixed_size_list<float>`` or ``list<float>``).
        b: another such expression, or a constant vector (a list of numbers or a 1-D numpy array)
            compared with every row.

    The result is null where either side is null, and also where either vector has norm 0
    (the angle is undefined there; null rather than NaN, so it sorts and aggregates cleanly).
    Fixed-size vectors of different sizes are an ``ExpressionTypeError`` when the plan is built;
    ``list<float>`` columns are checked per batch when the plan runs.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"q": [[1.0, 0.0]], "d": [[0.0, 2.0]]})
        >>> df.select(cosine_similarity(ifr.col("q"), ifr.col("d")).alias("s")).to_pydict()
        {'s': [0.0]}
    """
    if not isinstance(a, Expression):
        raise ArgumentTypeError(f"cosine_similarity(): the first argument must be a column expression such as col('embedding'), got {type(a).__name__}.")
    if isinstance(b, Expression):
        return call_expression("cosine_similarity", a, b)
    if isinstance(b, (list, tuple, np.ndarray)):
        try:
            vec = ConstVector(b)
        except (TypeError, ValueError) as e:
            raise ExpressionTypeError(f"cosine_similarity(): {e}") from None
        return call_expression("cosine_similarity", a, vector=vec)
    raise ArgumentTypeError(
        f"cosine_similarity(): the second argument must be an expression or a constant vector (list or numpy array), "
        f"got {type(b).__name__}."
    )
