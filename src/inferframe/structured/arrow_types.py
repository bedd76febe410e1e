"""The Arrow column type a structured ``prompt(..., return_format=...)`` produces.

Mapping (Python annotation / JSON schema -> Arrow):

=================================================  ==========================================
Pydantic model, dataclass, TypedDict / ``object``   ``struct`` (one field per JSON key)
``list[X]``, ``set[X]``, ``tuple[X, ...]`` / array  ``list<X>``
``dict[str, X]`` / object with only                 ``map<string, X>``
``additionalProperties: {schema}``
``Optional[X]``, ``X | None`` / anyOf with null     ``X``, field marked nullable
``Literal["a", "b"]``, str ``Enum``, choices, enum  ``dictionary<int32, string>``
int ``Literal`` / int ``Enum``                      ``int64`` (bool ones: ``bool``)
``int`` / integer                                   ``int64``
``float`` / number                                  ``float64``
``decimal.Decimal``                                 ``float64`` (see below)
``bool`` / boolean                                  ``bool``
``str``, ``uuid.UUID`` / string                     ``string``
``datetime.date`` / string, format date             ``date32``
``datetime.datetime`` / string, format date-time    ``timestamp[us]`` (aware values become UTC)
``pydantic.AwareDatetime``                          ``timestamp[us, tz=UTC]``
``datetime.time`` / string, format time             ``time64[us]``
=================================================  ==========================================

Decisions:

* **Field names** are the JSON keys the model writes, i.e. the *validation* alias (``Field(alias=...)``,
  ``validation_alias=...``, the first of ``AliasChoices``, or an ``alias_generator``), else the attribute
  name. The column then matches the schema the server enforces and the raw JSON; a
  ``serialization_alias`` is ignored.
* **Decimal** becomes ``float64``: JSON carries numbers as binary floats anyway, so a fixed
  ``decimal128`` scale would pretend to a precision the model's text never had.
* **dict[str, X]** becomes ``map<string, X>`` (keys are data, not columns). OpenAI strict mode cannot
  express free-form keys, so the strict JSON schema sends it as a list of ``{key, value}`` pairs and the
  validator turns those back into a mapping.
* **Choices** (``Literal``, str ``Enum``, lists) are dictionary-encoded: few distinct labels repeated over
  many rows, which is what dictionary encoding is for. Pass plain strings to ``pa.array``.
* **Nullability**: ``Optional`` fields, and fields that may be absent or default to None, are nullable;
  others are marked non-nullable. A row that fails validation is a null struct, which Arrow allows even
  when its children are non-nullable.
* ``Annotated[...]`` and constrained types (``conint``, ``constr``, ``PositiveInt``, ...) map as their base
  type; their constraints go to the JSON schema and the validator.

Anything else (``Any``, unions of two non-null types, ``bytes``, bare ``list``, arbitrary classes,
recursive models) raises :class:`~inferframe.errors.PlanError` naming the field path, never a silent
string column.

Example:
    >>> from pydantic import BaseModel
    >>> class Item(BaseModel):
    ...     name: str
    ...     price: float | None
    >>> arrow_type_for(Item)
    StructType(struct<name: string not null, price: double>)
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pyarrow as pa

from inferframe.structured._spec import Node, build_spec

__all__ = ["arrow_type_for"]

_SCALAR_ARROW = MappingProxyType({
    "string": pa.string(),
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
    "time": pa.time64("us"),
})
_ENUM_ARROW = MappingProxyType({
    "string": pa.dictionary(pa.int32(), pa.string()),
    "integer": pa.int64(),
    "boolean": pa.bool_(),
})


def arrow_type_for(return_format: Any) -> pa.DataType:
    """The Arrow type of the column that ``prompt(..., return_format=return_format)`` produces.

    Parameters:
        return_format: a Pydantic v2 model class, a JSON-schema dict, ``typing.Literal[...]``, an
            ``enum.Enum`` subclass, a list of choices, or another annotation of supported types.

    Returns:
        The Arrow type; values from :meth:`Validator.validate` convert with ``pa.array(values, type=...)``.

    Raises:
        PlanError: a field cannot be mapped; the message names the field path and the fix.

    Example:
        >>> from typing import Literal
        >>> arrow_type_for(Literal["positive", "negative"])
        DictionaryType(dictionary<values=string, indices=int32, ordered=0>)
    """
    return arrow_type_of_node(build_spec(return_format).root)


def arrow_type_of_node(node: Node) -> pa.DataType:
    """The Arrow type of one parsed node (see ``_spec.build_spec``)."""
    kind = node.kind
    if kind == "object":
        return pa.struct([pa.field(f.key, arrow_type_of_node(f.node), nullable=f.nullable) for f in node.fields])
    if kind == "array":
        item = node.item
        return pa.list_(pa.field("item", arrow_type_of_node(item), nullable=item.nullable))
    if kind == "map":
        item = node.item
        return pa.map_(pa.string(), pa.field("value", arrow_type_of_node(item), nullable=item.nullable))
    if kind == "enum":
        return _ENUM_ARROW[node.value_kind]
    if kind == "datetime":
        return pa.timestamp("us", tz=node.tz)
    return _SCALAR_ARROW[kind]
