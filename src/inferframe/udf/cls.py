"""``@inferframe.cls``: a model class whose instances are built once per worker.

``MyModel(args)`` only records its arguments. While a query runs, each worker
builds its instance once and reuses it for every row.

Example:
    >>> import inferframe as ifr
    >>> @ifr.cls
    ... class Prefixer:
    ...     def __init__(self, prefix: str):
    ...         self.prefix = prefix
    ...     def __call__(self, s: str) -> str:
    ...         return self.prefix + s
    >>> p = Prefixer("> ")
    >>> ifr.from_pydict({"s": ["a"]}).select(p(ifr.col("s"))).to_pydict()
    {'s': ['> a']}
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from inferframe.errors import ArgumentTypeError, PlanError
from inferframe.expressions.udf import (
    ClassSpec, UDFSpec, is_async_callable, make_call, resolve_return_dtype, with_file_args,
)

_MARK = "__inferframe_method__"


def _method_options(fn: Callable, is_batch: bool, return_dtype: Any, batch_size: int | None,
                    max_concurrency: int | None = None) -> Callable:
    setattr(fn, _MARK, {"is_batch": is_batch, "return_dtype": return_dtype, "batch_size": batch_size,
                        "max_concurrency": max_concurrency})
    return fn


class _MethodDecorator:
    """``@method``, ``@method(return_dtype=...)`` and ``@method.batch(return_dtype=..., batch_size=...)``.

    Example:
        >>> import inferframe as ifr
        >>> @ifr.cls
        ... class Scorer:
        ...     def __init__(self, weight: int):
        ...         self.weight = weight
        ...     @ifr.method(return_dtype=ifr.DataType.string())
        ...     def tag(self, s):
        ...         return f"{s}:{self.weight}"
        ...     @ifr.method.batch(return_dtype=ifr.DataType.int64(), batch_size=64)
        ...     def score(self, s: ifr.Series):
        ...         return [self.weight * len(v) for v in s]
        >>> m = Scorer(10)
        >>> ifr.from_pydict({"s": ["ab", "c"]}).select(m.tag(ifr.col("s")).alias("t"), m.score(ifr.col("s"))).to_pydict()
        {'t': ['ab:10', 'c:10'], 's': [20, 10]}
    """

    def __call__(self, fn: Callable | None = None, *, return_dtype: Any = None, max_concurrency: int | None = None):
        def wrap(f):
            return _method_options(f, False, return_dtype, None, max_concurrency)

        return wrap(fn) if fn is not None else wrap

    def batch(self, fn: Callable | None = None, *, return_dtype: Any = None, batch_size: int | None = None,
              max_concurrency: int | None = None):
        def wrap(f):
            return _method_options(f, True, return_dtype, batch_size, max_concurrency)

        return wrap(fn) if fn is not None else wrap


method = _MethodDecorator()


class BoundMethod:
    """A method of a recorded instance; calling it with expressions builds a column expression."""

    def __init__(self, owner: ClassSpec, name: str, fn: Callable) -> None:
        opts = getattr(fn, _MARK, {})
        self.spec = UDFSpec(
            name=f"{owner.cls.__name__}.{name}" if name != "__call__" else owner.cls.__name__,
            fn=fn if opts.get("is_batch") else with_file_args(fn),
            return_dtype=resolve_return_dtype(fn, opts.get("return_dtype")),
            is_batch=opts.get("is_batch", False),
            is_async=is_async_callable(fn),
            max_concurrency=opts.get("max_concurrency"),
            batch_size=opts.get("batch_size"),
            use_process=owner.use_process,
            gpus=owner.gpus,
            owner=owner,
        )

    def __call__(self, *args: Any, **kwargs: Any):
        return make_call(self.spec, args, kwargs)


class ClsHandle:
    """What ``MyModel(args)`` returns: the recorded arguments, not an instance."""

    def __init__(self, spec: ClassSpec) -> None:
        self._spec = spec

    def __getattr__(self, name: str) -> BoundMethod:
        if name.startswith("__"):
            raise AttributeError(name)
        fn = getattr(self._spec.cls, name, None)
        if fn is None or not callable(fn):
            raise AttributeError(f"{self._spec.cls.__name__} has no method {name!r}")
        return BoundMethod(self._spec, name, fn)

    def __call__(self, *args: Any, **kwargs: Any):
        fn = getattr(self._spec.cls, "__call__", None)
        if fn is None or fn is object.__call__:
            raise ArgumentTypeError(f"{self._spec.cls.__name__} has no __call__; call one of its methods instead.")
        return BoundMethod(self._spec, "__call__", fn)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<inferframe.cls {self._spec.cls.__name__} (built once per worker)>"


class ClsFactory:
    """The decorated class: calling it records arguments and returns a ``ClsHandle``."""

    def __init__(self, cls: type, *, max_concurrency: int | None, use_process: bool, gpus: float) -> None:
        if max_concurrency is not None and max_concurrency < 1:
            raise PlanError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if gpus < 0:
            raise PlanError(f"gpus must be >= 0 (a share of one GPU per instance, e.g. 0.5), got {gpus}")
        self.cls = cls
        self.options = dict(max_concurrency=max_concurrency, use_process=use_process, gpus=gpus)
        self.__name__ = cls.__name__
        self.__doc__ = cls.__doc__
        self.__wrapped__ = cls

    def __call__(self, *args: Any, **kwargs: Any) -> ClsHandle:
        try:
            inspect.signature(self.cls).bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentTypeError(f"{self.cls.__name__}(...): {e}") from None
        return ClsHandle(ClassSpec(self.cls, args, kwargs, **self.options))

    def __repr__(self) -> str:
        return f"<inferframe.cls {self.cls.__name__}>"


def cls(klass: type | None = None, *, max_concurrency: int | None = None, use_process: bool = False, gpus: float = 0):
    """Decorate a model class; see the module docstring.

    Parameters:
        max_concurrency: how many instances may exist at once (default 1 per worker).
        use_process: build each instance in its own process (its own GIL).
        gpus: GPUs each instance needs; honoured by the Ray runner.
    """

    def wrap(k: type) -> ClsFactory:
        return ClsFactory(k, max_concurrency=max_concurrency, use_process=use_process, gpus=gpus)

    return wrap(klass) if klass is not None else wrap
