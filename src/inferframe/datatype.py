"""Logical data types: a thin, user-facing face over Arrow types.

Every ``DataType`` maps to exactly one Arrow type (``dtype.to_arrow()``), so
columns stay Arrow end to end. Images and files are Arrow extension types so
they survive a Parquet round trip with their meaning.

Example:
    >>> import inferframe as ifr
    >>> ifr.DataType.list(ifr.DataType.string()).to_arrow()
    ListType(list<item: string>)
"""

from __future__ import annotations

import builtins
import dataclasses
import datetime
import decimal
import enum
import types
from types import MappingProxyType
import typing
from typing import Any

import pyarrow as pa

from inferframe.errors import ArgumentTypeError, ExpressionTypeError, PlanError


class _ImageType(pa.ExtensionType):
    """Encoded image bytes (PNG/JPEG/...), one image per row."""

    def __init__(self) -> None:
        super().__init__(pa.binary(), "inferframe.image")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):  # noqa: ARG003
        return cls()


class _FileType(pa.ExtensionType):
    """A reference to a file: its path or URL, read lazily when needed."""

    def __init__(self) -> None:
        super().__init__(pa.string(), "inferframe.file")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):  # noqa: ARG003
        return cls()


for _ext in (_ImageType(), _FileType()):
    try:
        pa.register_extension_type(_ext)
    except pa.ArrowKeyError:  # already registered (module reloaded)
        pass


class DataType:
    """A column's type; wraps one Arrow type.

    Parameters:
        arrow_type: the Arrow type this DataType stands for.

    Example:
        >>> DataType.struct({"a": DataType.int64()}).to_arrow()
        StructType(struct<a: int64>)
    """

    __slots__ = ("_arrow",)

    def __init__(self, arrow_type: pa.DataType) -> None:
        if not isinstance(arrow_type, pa.DataType):
            raise ArgumentTypeError(f"DataType needs a pyarrow.DataType, got {type(arrow_type).__name__}")
        self._arrow = arrow_type

    # --- constructors -------------------------------------------------
    @classmethod
    def from_arrow(cls, arrow_type: pa.DataType) -> "DataType":
        return cls(arrow_type)

    @classmethod
    def string(cls) -> "DataType":
        return cls(pa.string())

    @classmethod
    def binary(cls) -> "DataType":
        return cls(pa.binary())

    @classmethod
    def bool(cls) -> "DataType":
        return cls(pa.bool_())

    @classmethod
    def null(cls) -> "DataType":
        return cls(pa.null())

    @classmethod
    def int8(cls) -> "DataType":
        return cls(pa.int8())

    @classmethod
    def int16(cls) -> "DataType":
        return cls(pa.int16())

    @classmethod
    def int32(cls) -> "DataType":
        return cls(pa.int32())

    @classmethod
    def int64(cls) -> "DataType":
        return cls(pa.int64())

    @classmethod
    def uint8(cls) -> "DataType":
        return cls(pa.uint8())

    @classmethod
    def uint32(cls) -> "DataType":
        return cls(pa.uint32())

    @classmethod
    def uint64(cls) -> "DataType":
        return cls(pa.uint64())

    @classmethod
    def float32(cls) -> "DataType":
        return cls(pa.float32())

    @classmethod
    def float64(cls) -> "DataType":
        return cls(pa.float64())

    @classmethod
    def date(cls) -> "DataType":
        return cls(pa.date32())

    @classmethod
    def timestamp(cls, unit: str = "us", timezone: str | None = None) -> "DataType":
        return cls(pa.timestamp(unit, tz=timezone))

    @classmethod
    def list(cls, inner: "DataType") -> "DataType":
        return cls(pa.list_(_as_arrow(inner)))

    @classmethod
    def fixed_size_list(cls, inner: "DataType", size: int) -> "DataType":
        return cls(pa.list_(_as_arrow(inner), size))

    @classmethod
    def struct(cls, fields: dict[str, "DataType"]) -> "DataType":
        return cls(pa.struct([pa.field(k, _as_arrow(v)) for k, v in fields.items()]))

    @classmethod
    def map(cls, key: "DataType", value: "DataType") -> "DataType":
        return cls(pa.map_(_as_arrow(key), _as_arrow(value)))

    @classmethod
    def embedding(cls, inner: "DataType", size: int) -> "DataType":
        """A fixed-size vector, e.g. ``DataType.embedding(DataType.float32(), 384)``."""
        if size <= 0:
            raise PlanError(f"embedding size must be positive, got {size}; pass the model's vector size, e.g. 384.")
        return cls(pa.list_(_as_arrow(inner), size))

    @classmethod
    def image(cls) -> "DataType":
        """Encoded image bytes, one image per row."""
        return cls(_ImageType())

    @classmethod
    def file(cls) -> "DataType":
        """A file reference (path or URL)."""
        return cls(_FileType())

    @classmethod
    def python(cls) -> "DataType":
        """Arbitrary Python objects are not stored; use a concrete type instead."""
        raise ExpressionTypeError(
            "inferframe keeps every column in Arrow, so it has no Python-object type. "
            "Declare a concrete return_dtype (string, struct, list, ...) or serialise the value."
        )

    @classmethod
    def infer_from_type(cls, python_type: Any) -> "DataType":
        """Map a Python type annotation to a DataType.

        Example:
            >>> DataType.infer_from_type(list[int])
            DataType(list<int64>)
        """
        return cls(_arrow_from_python_type(python_type))

    # --- inspection ---------------------------------------------------
    def to_arrow(self) -> pa.DataType:
        return self._arrow

    def is_string(self) -> builtins.bool:
        return pa.types.is_string(self._arrow) or pa.types.is_large_string(self._arrow)

    def is_numeric(self) -> builtins.bool:
        return pa.types.is_integer(self._arrow) or pa.types.is_floating(self._arrow) or pa.types.is_decimal(self._arrow)

    def is_image(self) -> builtins.bool:
        return isinstance(self._arrow, _ImageType)

    def is_file(self) -> builtins.bool:
        return isinstance(self._arrow, _FileType)

    def __eq__(self, other: object) -> builtins.bool:
        if isinstance(other, DataType):
            return self._arrow == other._arrow
        if isinstance(other, pa.DataType):
            return self._arrow == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self._arrow))

    def __repr__(self) -> str:
        return f"DataType({short_type_name(self._arrow)})"

    def __str__(self) -> str:
        return short_type_name(self._arrow)

    def __reduce__(self):
        return (DataType, (self._arrow,))


def compact(t: pa.DataType) -> str:
    """A short type name for table headers: structs list only their field names."""
    if pa.types.is_struct(t):
        return "struct{" + ", ".join(t.field(i).name for i in range(t.num_fields)) + "}"
    return short_type_name(t)


def short_type_name(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return f"category<{short_type_name(t.value_type)}>"
    if isinstance(t, _ImageType):
        return "image"
    if isinstance(t, _FileType):
        return "file"
    if pa.types.is_large_string(t):
        return "string"
    if pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return f"list<{short_type_name(t.value_type)}>"
    if pa.types.is_fixed_size_list(t):
        return f"embedding<{short_type_name(t.value_type)}, {t.list_size}>"
    if pa.types.is_struct(t):
        inner = ", ".join(f"{t.field(i).name}: {short_type_name(t.field(i).type)}" for i in range(t.num_fields))
        return f"struct<{inner}>"
    return str(t)


def _as_arrow(t: Any) -> pa.DataType:
    if isinstance(t, DataType):
        return t.to_arrow()
    if isinstance(t, pa.DataType):
        return t
    return _arrow_from_python_type(t)


def to_datatype(t: Any) -> DataType:
    """Accept a DataType, an Arrow type or a Python type annotation."""
    if isinstance(t, DataType):
        return t
    if isinstance(t, pa.DataType):
        return DataType(t)
    return DataType.infer_from_type(t)


_SCALARS: MappingProxyType[Any, pa.DataType] = MappingProxyType({
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    builtins.bool: pa.bool_(),
    bytes: pa.binary(),
    datetime.datetime: pa.timestamp("us"),
    datetime.date: pa.date32(),
    datetime.time: pa.time64("us"),
    datetime.timedelta: pa.duration("us"),
    decimal.Decimal: pa.decimal128(38, 18),
    type(None): pa.null(),
})


def _arrow_from_python_type(tp: Any) -> pa.DataType:
    if tp in _SCALARS:
        return _SCALARS[tp]
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return _arrow_from_python_type(non_none[0])
        raise ExpressionTypeError(f"Cannot map the union {tp!r} to one column type; use a single type or Optional[T].")
    if origin is typing.Annotated:
        return _arrow_from_python_type(args[0])
    if origin is typing.Literal:
        kinds = {type(a) for a in args}
        if len(kinds) != 1:
            raise ExpressionTypeError(f"Literal values of mixed types {tp!r} cannot share one column type.")
        return _arrow_from_python_type(kinds.pop())
    if origin in (list, tuple, set, frozenset, typing.Sequence) or tp in (list, tuple):
        if not args:
            raise ExpressionTypeError(f"Cannot infer the element type of bare {tp!r}; annotate it, e.g. list[str].")
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            args = (args[0],)
        if origin is tuple and len(set(args)) > 1:
            raise ExpressionTypeError(f"Tuples with mixed element types {tp!r} cannot be one list column; use a TypedDict.")
        return pa.list_(_arrow_from_python_type(args[0]))
    if origin is dict or tp is dict:
        if len(args) != 2:
            raise ExpressionTypeError("Cannot infer the key/value types of a bare dict; annotate it, e.g. dict[str, int].")
        return pa.map_(_arrow_from_python_type(args[0]), _arrow_from_python_type(args[1]))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return pa.string()
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        return pa.struct([pa.field(k, _arrow_from_python_type(v)) for k, v in hints.items()])
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return pa.struct([pa.field(f.name, _arrow_from_python_type(hints[f.name])) for f in dataclasses.fields(tp)])
    if isinstance(tp, type) and hasattr(tp, "model_fields") and hasattr(tp, "model_json_schema"):
        hints = typing.get_type_hints(tp)
        return pa.struct([pa.field(k, _arrow_from_python_type(hints[k])) for k in tp.model_fields])
    if isinstance(tp, DataType):
        return tp.to_arrow()
    raise ExpressionTypeError(
        f"Cannot map the Python type {tp!r} to a column type. "
        "Pass return_dtype=inferframe.DataType.<type>() explicitly."
    )
