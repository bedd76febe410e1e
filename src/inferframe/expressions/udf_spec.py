"""What the executor needs to run one user function: the function, its types and options.

Expressions refer to these specs (``Expression.apply`` builds one), so this module
imports nothing from the expression layer; ``make_call``, which turns a spec into an
``Expression``, lives in ``expression.py``.

Example:
    >>> spec = UDFSpec(name="shout", fn=str.upper, return_dtype=pa.string())
    >>> spec.bind((("expr", 0),), ()).call_args(["hi"])
    (['hi'], {})
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, Callable

import pyarrow as pa

from inferframe.datatype import to_datatype
from inferframe.errors import ExpressionTypeError


@dataclasses.dataclass(frozen=True)
class ClassSpec:
    """A model class with the arguments its instances are built with (``MyModel(args)``)."""

    cls: type
    args: tuple
    kwargs: dict
    max_concurrency: int | None = None
    use_process: bool = False
    gpus: float = 0

    def build(self) -> Any:
        return self.cls(*self.args, **self.kwargs)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other) -> bool:
        return self is other


@dataclasses.dataclass(frozen=True, eq=False)
class UDFSpec:
    """One callable user function, as the executor sees it.

    ``fn`` is a plain function, or for a model class the unbound method whose
    first argument is the instance built from ``owner``. ``layout`` says, per
    positional argument, whether it comes from an expression ("expr", i) or is
    a constant Python value ("const", value).
    """

    name: str
    fn: Callable
    return_dtype: pa.DataType | None
    is_batch: bool = False
    is_async: bool = False
    max_concurrency: int | None = None
    batch_size: int | None = None
    use_process: bool = False
    gpus: float = 0
    owner: ClassSpec | None = None
    layout: tuple = ()
    kwargs_layout: tuple = ()

    @property
    def execution(self) -> str:
        return "python"

    def return_type(self, arg_fields: list[pa.Field]) -> pa.DataType:
        if self.return_dtype is None:
            raise ExpressionTypeError(
                f"UDF {self.name!r} has no return type: add a return annotation (def f(x) -> str) "
                "or pass return_dtype=DataType.<type>() to the decorator."
            )
        return self.return_dtype

    def bind(self, layout: tuple, kwargs_layout: tuple) -> "UDFSpec":
        return dataclasses.replace(self, layout=layout, kwargs_layout=kwargs_layout)

    def call_args(self, columns: list[Any]) -> tuple[list, dict]:
        """Merge per-call values of expression arguments with the constants, in order."""
        args = [columns[v] if kind == "expr" else v for kind, v in self.layout]
        kwargs = {k: columns[v] if kind == "expr" else v for k, kind, v in self.kwargs_layout}
        return args, kwargs


@dataclasses.dataclass(frozen=True, eq=False)
class AISpec(UDFSpec):
    """A UDF spec for AI functions: also says which side columns (error, usage, confidence) to add.

    ``on_error`` is the call's own ("null" or "raise"): a row whose input failed upstream is an
    error of this call too (kind "input"), and with "raise" it stops the job. ``call`` is the
    ``AICall`` the function built (its fingerprint and summary for the run history and ``estimate()``).
    """

    error_column: bool = True
    usage_column: bool = False
    confidence_column: bool = False
    on_error: str = "null"
    call: Any = None


def resolve_return_dtype(fn: Callable, return_dtype: Any, *, skip_self: bool = False) -> pa.DataType | None:
    """Use ``return_dtype`` when given, else the function's return annotation.

    Example:
        >>> def n_words(s: str) -> int: ...
        >>> resolve_return_dtype(n_words, None), resolve_return_dtype(n_words, float)
        (DataType(int64), DataType(double))
    """
    if return_dtype is not None:
        return to_datatype(return_dtype).to_arrow()
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = getattr(fn, "__annotations__", {})
    ret = hints.get("return")
    if ret is None or ret is inspect.Signature.empty:
        return None
    origin = typing.get_origin(ret)
    if origin in (typing.Iterator, typing.Generator) or getattr(origin, "__name__", "") in ("Iterator", "Generator", "AsyncIterator"):
        raise ExpressionTypeError(f"UDF {fn.__name__!r} is a generator; return one value per row instead.")
    try:
        return to_datatype(ret).to_arrow()
    except TypeError as e:
        raise ExpressionTypeError(f"UDF {fn.__name__!r}: {e}") from None


class FileArgs:
    """Calls ``fn`` with the values of its ``File``-annotated parameters wrapped as ``File`` (picklable)."""

    def __init__(self, fn: Callable, positions: tuple[int, ...], names: tuple[str, ...]) -> None:
        self.fn, self.positions, self.names = fn, positions, names
        self.__name__ = getattr(fn, "__name__", "udf")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from inferframe.file import File

        args = list(args)
        for i in self.positions:
            if i < len(args) and args[i] is not None and not isinstance(args[i], File):
                args[i] = File(args[i])
        for k in self.names:
            if kwargs.get(k) is not None and not isinstance(kwargs[k], File):
                kwargs[k] = File(kwargs[k])
        return self.fn(*args, **kwargs)


def with_file_args(fn: Callable) -> Callable:
    """``fn``, wrapped so that parameters annotated ``inferframe.File`` receive File objects.

    Example:
        >>> from inferframe import File
        >>> def kind(f: File) -> str:
        ...     return type(f).__name__
        >>> with_file_args(kind)("notes.txt")
        'File'
    """
    from inferframe.file import File

    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return fn
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        # In a worker process a class pickled by value lacks the module globals its string
        # annotations name ("ifr.File"): match those by their last part.
        hints = dict(getattr(fn, "__annotations__", {}))
    wanted = [p for p in params if hints.get(p) is File
              or (isinstance(hints.get(p), str) and hints[p].rsplit(".", 1)[-1] == "File")]
    if not wanted:
        return fn
    return FileArgs(fn, tuple(params.index(p) for p in wanted), tuple(wanted))


def is_async_callable(fn: Callable) -> bool:
    """Whether calling ``fn`` returns a coroutine the executor must await."""
    return inspect.iscoroutinefunction(fn)
