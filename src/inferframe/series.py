"""``Series``: one column of a batch, handed to batch UDFs.

Example:
    >>> s = Series.from_pylist([1, 2, None], name="x")
    >>> s.to_pylist(), len(s), s.name(), s.datatype()
    ([1, 2, None], 3, 'x', DataType(int64))
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from inferframe.datatype import DataType


class Series:
    """A named Arrow array with conversions to Python, NumPy and pandas."""

    __slots__ = ("_array", "_name")

    def __init__(self, array: pa.Array, name: str = "") -> None:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        self._array = array
        self._name = name

    @classmethod
    def from_pylist(cls, values: list, name: str = "", dtype: Any = None) -> "Series":
        """A Series of Python values; ``dtype`` (a DataType or Arrow type) overrides the inferred type."""
        t = dtype.to_arrow() if isinstance(dtype, DataType) else dtype
        return cls(pa.array(values, type=t), name)

    @classmethod
    def from_arrow(cls, array: pa.Array, name: str = "") -> "Series":
        """A Series over an Arrow array (chunked arrays are combined)."""
        return cls(array, name)

    @classmethod
    def from_numpy(cls, values, name: str = "") -> "Series":
        """A Series of a 1-D NumPy array."""
        return cls(pa.array(values), name)

    def name(self) -> str:
        """The column name."""
        return self._name

    def datatype(self) -> DataType:
        """The type of the values."""
        return DataType(self._array.type)

    def to_arrow(self) -> pa.Array:
        """The values as an Arrow array (no copy)."""
        return self._array

    def to_pylist(self) -> list:
        """The values as a Python list; nulls become None."""
        return self._array.to_pylist()

    def to_numpy(self):
        """The values as a NumPy array (copied when Arrow's layout does not allow a view)."""
        return self._array.to_numpy(zero_copy_only=False)

    def to_pandas(self):
        """The values as a pandas Series."""
        return self._array.to_pandas()

    def __len__(self) -> int:
        return len(self._array)

    def __iter__(self):
        return iter(self._array.to_pylist())

    def __repr__(self) -> str:
        return f"Series(name={self._name!r}, dtype={DataType(self._array.type)}, len={len(self)})"
