"""``@inferframe.func``: run a Python function on every row (or every batch) of a column.

Example:
    >>> import inferframe as ifr
    >>> @ifr.func
    ... def shout(s: str) -> str:
    ...     return s.upper() + "!"
    >>> ifr.from_pydict({"s": ["hi"]}).select(shout(ifr.col("s"))).to_pydict()
    {'s': ['HI!']}
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression
from inferframe.expressions.udf import UDFSpec, is_async_callable, make_call, resolve_return_dtype, with_file_args


class Func:
    """A decorated function: call it with expressions to get an expression.

    Called with plain Python values only, it just runs the function.
    """

    def __init__(self, fn: Callable, *, return_dtype: Any = None, is_batch: bool = False,
                 max_concurrency: int | None = None, batch_size: int | None = None) -> None:
        if max_concurrency is not None and max_concurrency < 1:
            raise PlanError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if batch_size is not None and batch_size < 1:
            raise PlanError(f"batch_size must be at least 1, got {batch_size}")
        self.fn = fn
        functools.update_wrapper(self, fn)
        self.spec = UDFSpec(
            name=getattr(fn, "__name__", "udf"),
            fn=fn if is_batch else with_file_args(fn),
            return_dtype=resolve_return_dtype(fn, return_dtype),
            is_batch=is_batch,
            is_async=is_async_callable(fn),
            max_concurrency=max_concurrency,
            batch_size=batch_size,
        )

    def __call__(self, *args: Any, **kwargs: Any):
        if not any(isinstance(a, Expression) for a in (*args, *kwargs.values())):
            return self.fn(*args, **kwargs)
        return make_call(self.spec, args, kwargs)

    def __repr__(self) -> str:
        return f"<inferframe.func {self.spec.name}>"


class _FuncDecorator:
    """``@func``, ``@func(return_dtype=...)`` and ``@func.batch(...)``."""

    def __call__(self, fn: Callable | None = None, *, return_dtype: Any = None,
                 max_concurrency: int | None = None, batch_size: int | None = None):
        def wrap(f: Callable) -> Func:
            return Func(f, return_dtype=return_dtype, max_concurrency=max_concurrency, batch_size=batch_size)

        return wrap(fn) if fn is not None else wrap

    def batch(self, fn: Callable | None = None, *, return_dtype: Any = None,
              max_concurrency: int | None = None, batch_size: int | None = None):
        """Decorate a function that takes ``Series`` and returns one value per row.

        Example:
            >>> import inferframe as ifr
            >>> @ifr.func.batch(return_dtype=ifr.DataType.int64())
            ... def lengths(s: ifr.Series):
            ...     return [len(v) for v in s.to_pylist()]
            >>> ifr.from_pydict({"s": ["ab", "c"]}).select(lengths(ifr.col("s"))).to_pydict()
            {'s': [2, 1]}
        """

        def wrap(f: Callable) -> Func:
            return Func(f, return_dtype=return_dtype, is_batch=True, max_concurrency=max_concurrency, batch_size=batch_size)

        return wrap(fn) if fn is not None else wrap


func = _FuncDecorator()
