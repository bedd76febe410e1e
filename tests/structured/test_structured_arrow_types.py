"""arrow_type_for: the column type of every supported return format, and refusals with field paths."""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime as dt
import decimal
import enum
import typing
import uuid
from typing import Annotated, Any, Literal, Optional, Union

import pyarrow as pa
import pytest
from pydantic import (AliasChoices, AwareDatetime, BaseModel, ConfigDict, Field, PositiveInt, RootModel, conint,
                      constr, create_model)
from pydantic.alias_generators import to_camel

from inferframe.errors import PlanError
from inferframe.structured import arrow_type_for

DICT = pa.dictionary(pa.int32(), pa.string())


class Color(str, enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Plain(enum.Enum):
    A = "a"
    B = "b"


class Point(BaseModel):
    x: float
    y: float


def _field_type(tp: Any) -> pa.Field:
    """The Arrow field for a one-field model whose field has annotation ``tp``."""
    model = create_model("One", v=(tp, ...))
    return arrow_type_for(model).field("v")


def _item(t: pa.DataType, nullable: bool = False) -> pa.DataType:
    return pa.list_(pa.field("item", t, nullable=nullable))


def _struct(**fields: pa.DataType) -> pa.DataType:
    return pa.struct([pa.field(k, v, nullable=False) for k, v in fields.items()])


MAPPING = [
    (int, pa.int64()),
    (float, pa.float64()),
    (bool, pa.bool_()),
    (str, pa.string()),
    (dt.date, pa.date32()),
    (dt.datetime, pa.timestamp("us")),
    (AwareDatetime, pa.timestamp("us", tz="UTC")),
    (dt.time, pa.time64("us")),
    (decimal.Decimal, pa.float64()),
    (uuid.UUID, pa.string()),
    (list[int], _item(pa.int64())),
    (typing.List[str], _item(pa.string())),
    (set[str], _item(pa.string())),
    (frozenset[int], _item(pa.int64())),
    (tuple[float, ...], _item(pa.float64())),
    (tuple[int, int], _item(pa.int64())),
    (collections.abc.Sequence[str], _item(pa.string())),
    (list[Optional[int]], _item(pa.int64(), nullable=True)),
    (list[list[str]], _item(_item(pa.string()))),
    (dict[str, float], pa.map_(pa.string(), pa.field("value", pa.float64(), nullable=False))),
    (typing.Mapping[str, list[int]], pa.map_(pa.string(), pa.field("value", _item(pa.int64()), nullable=False))),
    (Literal["a", "b"], DICT),
    (Literal[1, 2, 3], pa.int64()),
    (Literal[True], pa.bool_()),
    (Color, DICT),
    (Plain, DICT),
    (Level, pa.int64()),
    (Literal[Color.RED, Color.GREEN], DICT),
    (Annotated[int, Field(ge=0, description="count")], pa.int64()),
    (conint(ge=0, le=10), pa.int64()),
    (constr(pattern=r"^[A-Z]+$"), pa.string()),
    (PositiveInt, pa.int64()),
    (Point, _struct(x=pa.float64(), y=pa.float64())),
    (list[Point], _item(_struct(x=pa.float64(), y=pa.float64()))),
    (dict[str, Point], pa.map_(pa.string(), pa.field("value", _struct(x=pa.float64(), y=pa.float64()),
                                                     nullable=False))),
]


@pytest.mark.parametrize("tp,expected", MAPPING, ids=[repr(t) for t, _ in MAPPING])
def test_mapping_table(tp, expected):
    f = _field_type(tp)
    assert f.type == expected
    assert not f.nullable


@pytest.mark.parametrize("tp,expected", [
    (Optional[int], pa.int64()),
    (int | None, pa.int64()),
    (Union[None, str], pa.string()),
    (Optional[Literal["x", "y"]], DICT),
    (Literal["x", None], DICT),
    (Optional[Point], _struct(x=pa.float64(), y=pa.float64())),
    (Optional[list[Point]], _item(_struct(x=pa.float64(), y=pa.float64()))),
    (Annotated[Optional[dt.date], Field(description="d")], pa.date32()),
])
def test_optional_is_nullable(tp, expected):
    f = _field_type(tp)
    assert f.type == expected
    assert f.nullable


def test_nested_models_lists_of_models_and_defaults():
    class Line(BaseModel):
        sku: str
        price: float
        qty: int = 1                     # has a default, still never null
        note: str | None = None

    class Invoice(BaseModel):
        number: str
        lines: list[Line]
        ship_to: Point | None = None
        issued: dt.date

    t = arrow_type_for(Invoice)
    line = pa.struct([pa.field("sku", pa.string(), nullable=False), pa.field("price", pa.float64(), nullable=False),
                      pa.field("qty", pa.int64(), nullable=False), pa.field("note", pa.string())])
    assert t == pa.struct([
        pa.field("number", pa.string(), nullable=False),
        pa.field("lines", pa.list_(pa.field("item", line, nullable=False)), nullable=False),
        pa.field("ship_to", _struct(x=pa.float64(), y=pa.float64())),
        pa.field("issued", pa.date32(), nullable=False),
    ])


def test_non_optional_field_defaulting_to_none_is_nullable():
    class M(BaseModel):
        x: int = None  # type: ignore[assignment]

    assert arrow_type_for(M).field("x").nullable


def test_field_names_are_the_json_keys():
    class M(BaseModel):
        model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
        first_name: str
        sku: str = Field(alias="SKU")
        other: int = Field(validation_alias=AliasChoices("o", "oth"))
        shown: int = Field(serialization_alias="ignored_for_columns")

    assert arrow_type_for(M).names == ["firstName", "SKU", "o", "shown"]
    # The same keys Pydantic itself publishes for validation.
    assert list(M.model_json_schema(mode="validation")["properties"]) == ["firstName", "SKU", "o", "shown"]


def test_root_formats():
    assert arrow_type_for(Literal["pos", "neg"]) == DICT
    assert arrow_type_for(Color) == DICT
    assert arrow_type_for(Level) == pa.int64()
    assert arrow_type_for(["pos", "neg", "neutral"]) == DICT
    assert arrow_type_for(("a", "b")) == DICT
    assert arrow_type_for([1, 2, 3]) == pa.int64()
    assert arrow_type_for(list[Point]) == _item(_struct(x=pa.float64(), y=pa.float64()))


def test_dataclass_typeddict_and_rootmodel():
    @dataclasses.dataclass
    class D:
        a: int
        b: str | None = None

    class T(typing.TypedDict):
        a: int
        b: typing.NotRequired[str]

    class R(RootModel[list[Point]]):
        pass

    assert arrow_type_for(D) == pa.struct([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])
    assert arrow_type_for(T) == pa.struct([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])
    assert arrow_type_for(R) == _item(_struct(x=pa.float64(), y=pa.float64()))


# --- refusals ----------------------------------------------------------------------------------

class Weird:
    pass


@pytest.mark.parametrize("tp,type_text,reason", [
    (Any, "Any", "Any has no fixed shape"),
    (Union[int, str], "Union[int, str]", "union of several non-null types"),
    (int | str, "int | str", "union of several non-null types"),
    (Optional[Union[int, str]], "Union[int, str, NoneType]", "union"),
    (bytes, "bytes", "binary data"),
    (Weird, "Weird", "not a Pydantic model"),
    (list, "list", "element type is unknown"),
    (dict, "dict", "element type is unknown"),
    (dict[int, str], "dict[int, str]", "keys are always strings"),
    (tuple[int, str], "tuple[int, str]", "mixed element types"),
    (Literal["a", 1], "Literal['a', 1]", "not all strings"),
    (dt.timedelta, "timedelta", "durations"),
    (object, "object", "no fixed shape"),
])
def test_unmappable_field_raises_plan_error_with_path(tp, type_text, reason):
    row = create_model("Row", __config__=ConfigDict(arbitrary_types_allowed=True), value=(tp, ...))
    model = create_model("Report", items=(list[row], ...))
    with pytest.raises(PlanError) as info:
        arrow_type_for(model)
    msg = str(info.value)
    assert f"Cannot map field 'Report.items[].value' of type {type_text} to a column type" in msg
    assert reason in msg
    assert "Fix:" in msg


def test_documented_example_message():
    class Item(BaseModel):
        price: Union[int, str]

    class Invoice(BaseModel):
        items: list[Item]

    with pytest.raises(ValueError, match=r"Cannot map field 'Invoice\.items\[\]\.price' of type Union\[int, str\]"):
        arrow_type_for(Invoice)


def test_map_value_path():
    class M(BaseModel):
        scores: dict[str, Any]

    with pytest.raises(PlanError, match=r"'M\.scores\{\}'"):
        arrow_type_for(M)


def test_recursive_model_is_refused():
    class Node(BaseModel):
        name: str
        children: list["Node"] = []

    Node.model_rebuild()
    with pytest.raises(PlanError, match=r"'Node\.children\[\]'.*recursive"):
        arrow_type_for(Node)


def test_bad_choices_and_empty_model():
    with pytest.raises(PlanError, match="no choices"):
        arrow_type_for([])
    with pytest.raises(PlanError, match="repeat"):
        arrow_type_for(["a", "a"])

    class Empty(BaseModel):
        pass

    with pytest.raises(PlanError, match="no fields"):
        arrow_type_for(Empty)


def test_duplicate_json_keys_are_refused():
    class M(BaseModel):
        a: int = Field(alias="k")
        b: int = Field(alias="k")

    with pytest.raises(PlanError, match="JSON key"):
        arrow_type_for(M)


# --- JSON-schema dicts -------------------------------------------------------------------------

def test_json_schema_dict_mapping():
    schema = {
        "title": "Invoice",
        "type": "object",
        "properties": {
            "number": {"type": "string"},
            "count": {"type": "integer"},
            "total": {"type": "number"},
            "paid": {"type": "boolean"},
            "issued": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "date-time"},
            "status": {"enum": ["open", "paid"]},
            "kind": {"const": "invoice"},
            "level": {"type": "integer", "enum": [1, 2]},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "alt": {"type": ["number", "null"]},
            "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
            "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
            "maybe": {"type": "string"},
        },
        "required": ["number", "count", "total", "paid", "issued", "at", "status", "kind", "level", "note", "alt",
                     "lines", "extra"],
        "additionalProperties": False,
        "$defs": {"Line": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}},
    }
    t = arrow_type_for(schema)
    expect = {
        "number": (pa.string(), False), "count": (pa.int64(), False), "total": (pa.float64(), False),
        "paid": (pa.bool_(), False), "issued": (pa.date32(), False), "at": (pa.timestamp("us"), False),
        "status": (DICT, False), "kind": (DICT, False), "level": (pa.int64(), False), "note": (pa.string(), True),
        "alt": (pa.float64(), True),
        "lines": (_item(pa.struct([pa.field("sku", pa.string(), nullable=False)])), False),
        "extra": (pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False)), False),
        "maybe": (pa.string(), True),   # not required: may be absent, so nullable
    }
    assert t.names == list(expect)
    for name, (typ, nullable) in expect.items():
        assert t.field(name).type == typ, name
        assert t.field(name).nullable is nullable, name


def test_json_schema_dict_roots():
    assert arrow_type_for({"type": "string", "enum": ["a", "b"]}) == DICT
    assert arrow_type_for({"type": "array", "items": {"type": "integer"}}) == _item(pa.int64())
    # OpenAI's own {"name", "schema"} wrapper is accepted too.
    wrapped = {"name": "x", "strict": True, "schema": {"type": "object", "properties": {"a": {"type": "integer"}},
                                                       "required": ["a"]}}
    assert arrow_type_for(wrapped) == _struct(a=pa.int64())


@pytest.mark.parametrize("sub,reason", [
    ({}, "accepts any value"),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, "union of several non-null types"),
    ({"type": ["integer", "string"]}, "union of several non-null types"),
    ({"type": "object"}, "without properties"),
    ({"type": "array"}, "element type is unknown"),
    ({"type": "array", "prefixItems": [{"type": "integer"}]}, "prefixItems"),
    ({"$ref": "#/$defs/Missing"}, "points nowhere"),
    ({"$ref": "https://example.com/s.json"}, "only local references"),
    ({"allOf": [{"type": "integer"}, {"minimum": 1}]}, "allOf"),
    ({"type": "null"}, "always null"),
    ({"type": "object", "properties": 3}, "\"properties\" must map each field name"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"}, "\"required\" must be a list"),
])
def test_json_schema_dict_refusals_name_the_path(sub, reason):
    schema = {"title": "Doc", "type": "object",
              "properties": {"rows": {"type": "array", "items": {"type": "object", "properties": {"v": sub}}}}}
    with pytest.raises(PlanError) as info:
        arrow_type_for(schema)
    assert "Cannot map field 'Doc.rows[].v'" in str(info.value)
    assert reason in str(info.value)


def test_json_schema_recursive_ref_is_refused():
    schema = {"type": "object", "properties": {"node": {"$ref": "#/$defs/N"}},
              "$defs": {"N": {"type": "object",
                              "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/N"}}}}}}
    with pytest.raises(PlanError, match="recursive"):
        arrow_type_for(schema)


@pytest.mark.parametrize("bad", [42, "positive,negative", None, Point(x=1, y=2)])
def test_values_that_are_not_formats_are_refused(bad):
    with pytest.raises(PlanError, match="is not a format"):
        arrow_type_for(bad)


def test_unresolved_forward_reference_is_a_plan_error():
    class A(BaseModel):
        b: "Later"  # noqa: F821

    with pytest.raises(PlanError, match="unresolved type hints"):
        arrow_type_for(A)
