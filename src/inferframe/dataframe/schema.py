"""``Schema``: a DataFrame's column names and types."""

from __future__ import annotations

import pyarrow as pa

from inferframe.datatype import DataType, short_type_name


class Schema:
    """Column names and DataTypes, in order.

    Example:
        >>> import inferframe as ifr
        >>> ifr.from_pydict({"a": [1]}).schema().column_names()
        ['a']
    """

    def __init__(self, schema: pa.Schema) -> None:
        self._schema = schema

    def column_names(self) -> list[str]:
        return list(self._schema.names)

    def to_arrow(self) -> pa.Schema:
        return self._schema

    def __getitem__(self, name: str) -> DataType:
        return DataType(self._schema.field(name).type)

    def __iter__(self):
        return iter((f.name, DataType(f.type)) for f in self._schema)

    def __len__(self) -> int:
        return len(self._schema)

    def __eq__(self, other) -> bool:
        return isinstance(other, Schema) and other._schema == self._schema

    def __repr__(self) -> str:
        return ", ".join(f"{f.name}: {short_type_name(f.type)}" for f in self._schema)
