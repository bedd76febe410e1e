"""Validator / repair_message: parsing quirks, errors, labels, and the model -> schema -> Arrow round trip."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
import pickle
import uuid
from typing import Literal, Optional

import pyarrow as pa
import pytest
from pydantic import AwareDatetime, BaseModel, Field, field_validator

from inferframe.structured import Validator, arrow_type_for, json_schema_for, repair_message


class Status(str, enum.Enum):
    OPEN = "open"
    PAID = "paid"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Line(BaseModel):
    sku: str = Field(alias="SKU")
    price: float = Field(ge=0)
    qty: int = 1


class Address(BaseModel):
    city: str
    zip: Optional[str] = None


class Invoice(BaseModel):
    number: str
    issued: dt.date
    due: Optional[dt.datetime] = None
    stamped: AwareDatetime
    status: Status
    priority: Priority
    kind: Literal["invoice", "credit_note"]
    total: decimal.Decimal
    lines: list[Line]
    billing: Address
    shipping: Optional[Address] = None
    tags: set[str] = set()
    extras: dict[str, float] = {}
    ref: uuid.UUID

    @field_validator("number")
    @classmethod
    def _upper(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("number must not be blank")
        return v


def sample(schema: dict):
    """A valid JSON document for a strict schema (first enum value, first anyOf branch, one list item)."""
    if "anyOf" in schema:
        return sample(schema["anyOf"][0])
    if "enum" in schema:
        return schema["enum"][-1]
    t = schema["type"]
    if t == "object":
        return {k: sample(v) for k, v in schema["properties"].items()}
    if t == "array":
        return [sample(schema["items"])] * max(1, schema.get("minItems", 1))
    if t == "string":
        return {"date": "2024-03-05", "date-time": "2024-03-05T10:30:00+02:00", "time": "10:30:00",
                "uuid": "12345678-1234-5678-1234-567812345678"}.get(schema.get("format"), "text")
    if t == "integer":
        return schema.get("minimum", 3)
    if t == "number":
        return 2.5
    return True


ROUND_TRIP_FORMATS = [
    Invoice,
    Address,
    list[Line],
    Literal["pos", "neg"],
    Status,
    Priority,
    ["yes", "no", "maybe"],
    {"title": "Doc", "type": "object",
     "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string", "format": "date"}},
                    "c": {"anyOf": [{"$ref": "#/$defs/C"}, {"type": "null"}]}, "d": {"enum": ["x", "y"]},
                    "m": {"type": "object", "additionalProperties": {"type": "boolean"}}},
     "required": ["a", "b", "c", "d", "m"],
     "$defs": {"C": {"type": "object", "properties": {"t": {"type": "number"}}}}},
]


@pytest.mark.parametrize("fmt", ROUND_TRIP_FORMATS, ids=lambda f: getattr(f, "__name__", None) or str(f)[:30])
def test_round_trip_model_schema_json_validate_arrow(fmt):
    _, schema = json_schema_for(fmt)
    doc = sample(schema)
    value, error = Validator(fmt).validate(json.dumps(doc))
    assert error is None, error
    arr = pa.array([value, None], type=arrow_type_for(fmt))
    assert arr.type == arrow_type_for(fmt)
    assert arr[1].as_py() is None
    assert arr.to_pylist()[0] == _as_arrow_reads(arr.type, value)


def _as_arrow_reads(t: pa.DataType, v):
    """What Arrow gives back for a plain value (maps read back as lists of pairs)."""
    if v is None:
        return None
    if pa.types.is_struct(t):
        return {t.field(i).name: _as_arrow_reads(t.field(i).type, v[t.field(i).name]) for i in range(t.num_fields)}
    if pa.types.is_map(t):
        return [(k, _as_arrow_reads(t.item_type, x)) for k, x in v.items()]
    if pa.types.is_list(t):
        return [_as_arrow_reads(t.value_type, x) for x in v]
    if pa.types.is_timestamp(t) and t.tz:
        return v.astimezone(dt.timezone.utc)
    return v


def test_invoice_values_are_plain_python():
    doc = {
        "number": "A-1", "issued": "2024-03-05", "due": "2024-04-01T12:00:00+02:00",
        "stamped": "2024-03-05T08:00:00Z", "status": "PAID", "priority": 2, "kind": "invoice", "total": 12.25,
        "lines": [{"SKU": "p1", "price": "3.5", "qty": 2}], "billing": {"city": "Oslo"}, "shipping": None,
        "tags": ["b", "a", "b"], "extras": [{"key": "vat", "value": 0.25}],
        "ref": "12345678-1234-5678-1234-567812345678",
    }
    value, error = Validator(Invoice).validate(json.dumps(doc))
    assert error is None
    assert value == {
        "number": "A-1",
        "issued": dt.date(2024, 3, 5),
        "due": dt.datetime(2024, 4, 1, 10, 0),                      # aware -> UTC, naive column
        "stamped": dt.datetime(2024, 3, 5, 8, 0, tzinfo=dt.timezone.utc),
        "status": "paid",                                            # enum -> its value, case fixed
        "priority": 2,
        "kind": "invoice",
        "total": 12.25,                                              # Decimal -> float
        "lines": [{"SKU": "p1", "price": 3.5, "qty": 2}],            # JSON keys, lax number
        "billing": {"city": "Oslo", "zip": None},
        "shipping": None,
        "tags": ["a", "b"],                                          # set -> sorted list
        "extras": {"vat": 0.25},                                     # key/value pairs -> mapping
        "ref": "12345678-1234-5678-1234-567812345678",
    }
    arr = pa.array([value], type=arrow_type_for(Invoice))
    assert arr.to_pylist()[0]["extras"] == [("vat", 0.25)]


def test_map_as_plain_object_is_accepted_too():
    class M(BaseModel):
        scores: dict[str, int]

    assert Validator(M).validate('{"scores": {"a": 1}}') == ({"scores": {"a": 1}}, None)
    assert Validator(M).validate('{"scores": [{"key": "a", "value": 1}]}') == ({"scores": {"a": 1}}, None)


def test_explicit_null_for_defaulted_field_uses_default():
    assert Validator(Line).validate('{"SKU": "x", "price": 1, "qty": null}') == (
        {"SKU": "x", "price": 1.0, "qty": 1}, None)


# --- JSON quirks --------------------------------------------------------------------------------

GOOD = {"SKU": "x", "price": 1.5, "qty": 2}


@pytest.mark.parametrize("text", [
    json.dumps(GOOD),
    "  \n" + json.dumps(GOOD) + "\n\n",
    "```json\n" + json.dumps(GOOD, indent=2) + "\n```",
    "```\n" + json.dumps(GOOD) + "\n```",
    "Here is the result:\n```json\n" + json.dumps(GOOD) + "\n```\nLet me know!",
    "Sure! The answer is " + json.dumps(GOOD) + " as requested.",
    "Braces {like this} first, then " + json.dumps(GOOD),
    '<think>Maybe {"SKU": "wrong"}? No.</think>\n' + json.dumps(GOOD),
])
def test_json_quirks_are_accepted(text):
    assert Validator(Line).validate(text) == ({"SKU": "x", "price": 1.5, "qty": 2}, None)


def test_braces_inside_strings_do_not_confuse_extraction():
    value, error = Validator(Line).validate('Result: {"SKU": "a}{b", "price": 1}')
    assert error is None and value["SKU"] == "a}{b"


@pytest.mark.parametrize("text,expected", [
    ('{"SKU": "x" "price": 1}', "not valid JSON: Expecting ',' delimiter at char 12"),
    ('  {"SKU": "x",', "not valid JSON: Expecting property name enclosed in double quotes at char 14"),
    ('{"SKU": "x", "price": 1', "not valid JSON: Expecting ',' delimiter at char 23"),
    ("I cannot help with that.", "not valid JSON: no JSON object in the answer (it starts 'I cannot help with that.')"),
])
def test_invalid_json_errors(text, expected):
    assert Validator(Line).validate(text) == (None, expected)


@pytest.mark.parametrize("text", [None, "", "   \n", "<think>hmm</think>"])
def test_empty_answers(text):
    assert Validator(Line).validate(text) == (None, "empty answer")


def test_schema_errors_name_the_location():
    class Inv(BaseModel):
        items: list[Line]

    value, error = Validator(Inv).validate('{"items": [{"SKU": "a", "price": "cheap"}]}')
    assert value is None
    assert error == "schema: items.0.price: Input should be a valid number, unable to parse string as a number"

    _, error = Validator(Inv).validate('{"items": [{"price": 1}]}')
    assert error == "schema: items.0.SKU: Field required"

    _, error = Validator(Inv).validate('{"items": [{"SKU": 1, "price": -1, "qty": "x"}, {}]}')
    assert error.startswith("schema: items.0.SKU: Input should be a valid string; ")
    assert error.endswith("(+2 more)")


def test_model_validators_run():
    doc = {"number": "  ", "issued": "2024-01-01", "stamped": "2024-01-01T00:00:00Z", "status": "open",
           "priority": 1, "kind": "invoice", "total": 1, "lines": [], "billing": {"city": "x"},
           "ref": "12345678-1234-5678-1234-567812345678"}
    _, error = Validator(Invoice).validate(json.dumps(doc))
    assert error == "schema: number: Value error, number must not be blank"


def test_naive_datetime_must_be_aware_for_aware_fields():
    class M(BaseModel):
        at: AwareDatetime

    _, error = Validator(M).validate('{"at": "2024-01-01T00:00:00"}')
    assert error.startswith("schema: at: Input should have timezone info")


def test_non_object_root_accepts_wrapper_and_bare_value():
    v = Validator(list[int])
    assert v.validate("[1, 2]") == ([1, 2], None)
    assert v.validate('{"value": [1, 2]}') == ([1, 2], None)
    assert v.validate("```json\n[3]\n```") == ([3], None)


# --- labels -------------------------------------------------------------------------------------

CHOICES = ["positive", "negative", "neutral"]


@pytest.mark.parametrize("text,expected", [
    ("positive", "positive"),
    ("  Negative.\n", "negative"),
    ("NEUTRAL!", "neutral"),
    ('"positive"', "positive"),
    ("'negative'", "negative"),
    ("**neutral**", "neutral"),
    ("`positive`", "positive"),
    ("“negative”", "negative"),
    ('{"label": "Positive"}', "positive"),
    ('{"sentiment": "negative"}', "negative"),
    ("```json\n{\"label\": \"neutral\"}\n```", "neutral"),
    ("```\npositive\n```", "positive"),
    ("Sentiment: negative", "negative"),
    ('Answer: {"label": "neutral"}', "neutral"),
    ("```positive```", "positive"),
    ("<think>Could be negative... no.</think>\nPositive", "positive"),
])
def test_label_parsing(text, expected):
    for fmt in (CHOICES, Literal["positive", "negative", "neutral"]):
        assert Validator(fmt).validate(text) == (expected, None)


@pytest.mark.parametrize("text,got", [
    ("meh", "meh"),
    ("positive or negative", "positive or negative"),
    ('{"label": "great"}', "great"),
    ('{"a": 1, "b": 2}', '{"a": 1, "b": 2}'),
])
def test_label_errors(text, got):
    value, error = Validator(CHOICES).validate(text)
    assert value is None
    assert error == f"not one of the choices 'positive', 'negative', 'neutral': got {got!r}"


def test_label_case_only_when_unique():
    v = Validator(["A", "a", "B"])
    assert v.validate("A") == ("A", None)
    assert v.validate("a") == ("a", None)
    assert v.validate("b") == ("B", None)


def test_enum_and_int_labels():
    assert Validator(Status).validate("Paid") == ("paid", None)
    assert Validator(Priority).validate("2") == (2, None)
    assert Validator(Priority).validate('{"label": 1}') == (1, None)
    assert Validator(Priority).validate("3")[1].startswith("not one of the choices 1, 2")


def test_labels_fit_a_dictionary_column():
    v = Validator(CHOICES)
    values = [v.validate(t)[0] for t in ["Positive", "neutral.", "nonsense", "positive"]]
    arr = pa.array(values, type=arrow_type_for(CHOICES))
    assert arr.to_pylist() == ["positive", "neutral", None, "positive"]
    assert pa.types.is_dictionary(arr.type)


def test_nested_enum_case_is_fixed():
    class M(BaseModel):
        s: Status
        k: Literal["a", "b"]

    assert Validator(M).validate('{"s": "OPEN", "k": "B"}') == ({"s": "open", "k": "b"}, None)


# --- JSON-schema dicts --------------------------------------------------------------------------

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 0},
        "born": {"type": "string", "format": "date"},
        "role": {"enum": ["admin", "user"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                    "additionalProperties": False},
        "score": {"type": ["number", "null"]},
    },
    "required": ["name", "age", "role"],
    "additionalProperties": False,
}


def test_json_schema_dict_valid():
    v = Validator(PERSON)
    value, error = v.validate('{"name": "Ann", "age": 30.0, "born": "1990-02-03", "role": "Admin", '
                              '"tags": ["x"], "address": {"city": "Rome"}, "score": 1}')
    assert error is None
    assert value == {"name": "Ann", "age": 30, "born": dt.date(1990, 2, 3), "role": "admin", "tags": ["x"],
                     "address": {"city": "Rome"}, "score": 1.0}
    assert v.validate('{"name": "Bo", "age": 1, "role": "user"}')[0] == {
        "name": "Bo", "age": 1, "born": None, "role": "user", "tags": None, "address": None, "score": None}
    pa.array([value], type=arrow_type_for(PERSON))


@pytest.mark.parametrize("doc,error", [
    ({"age": 1, "role": "user"}, "name: Field required"),
    ({"name": "a", "age": "1", "role": "user"}, "age: Input should be a valid integer"),
    ({"name": "a", "age": True, "role": "user"}, "age: Input should be a valid integer"),
    ({"name": "a", "age": 1.5, "role": "user"}, "age: Input should be a valid integer, got a number with a "
                                               "fractional part"),
    ({"name": "a", "age": -1, "role": "user"}, "age: Input should be greater than or equal to 0"),
    ({"name": "a", "age": 1, "role": "root"}, "role: Input should be 'admin' or 'user'"),
    ({"name": "a", "age": 1, "role": "user", "x": 1}, "x: Extra inputs are not permitted"),
    ({"name": "a", "age": 1, "role": "user", "address": {}}, "address.city: Field required"),
    ({"name": "a", "age": 1, "role": "user", "address": {"city": "r", "zip": 1}},
     "address.zip: Extra inputs are not permitted"),
    ({"name": "a", "age": 1, "role": "user", "tags": ["a", 2]}, "tags.1: Input should be a valid string"),
    ({"name": "a", "age": 1, "role": "user", "tags": ["a", "b", "c"]}, "tags: List should have at most 2 items"),
    ({"name": "a", "age": 1, "role": "user", "born": "03/02/1990"}, "born: Input should be a valid date (YYYY-MM-DD)"),
    ({"name": "", "age": 1, "role": "user"}, "name: String should have at least 1 characters"),
    ({"name": "a", "age": 1, "role": None}, "role: Input should be 'admin' or 'user'"),
    ([1], "Input should be an object"),
])
def test_json_schema_dict_errors(doc, error):
    assert Validator(PERSON).validate(json.dumps(doc)) == (None, "schema: " + error)


def test_json_schema_dict_without_additional_properties_false_ignores_extras():
    v = Validator({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    assert v.validate('{"a": 1, "b": 2}') == ({"a": 1}, None)


# --- repair and pickling -----------------------------------------------------------------------

def test_repair_message_for_json():
    text = '{"SKU": "x" "price": 1}'
    _, error = Validator(Line).validate(text)
    msg = repair_message(text, error)
    assert error in msg
    assert text in msg
    assert "only the corrected JSON" in msg and "no Markdown code fences" in msg


def test_repair_message_truncates_long_answers():
    msg = repair_message("x" * 10_000, "not valid JSON: no JSON object in the answer")
    assert len(msg) < 4500 and "[... truncated]" in msg


def test_repair_message_for_labels():
    v = Validator(CHOICES)
    _, error = v.validate("meh")
    msg = v.repair_message("meh", error)
    assert "exactly one of these labels" in msg and "positive, negative, neutral" in msg
    assert "JSON" not in msg.split("labels")[1]


def test_validator_pickles():
    v = pickle.loads(pickle.dumps(Validator(Invoice)))
    assert v.arrow_type == arrow_type_for(Invoice)
    assert v.validate('{"SKU": 1}')[1] is not None
    assert pickle.loads(pickle.dumps(Validator(Line))).validate(json.dumps(GOOD))[1] is None
