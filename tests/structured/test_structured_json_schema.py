"""json_schema_for / response_format_for: OpenAI strict-mode schemas and request fragments."""

from __future__ import annotations

import copy
import datetime as dt
import decimal
import enum
import json
from typing import Annotated, Generic, Literal, Optional, TypeVar

import pytest
from pydantic import BaseModel, Field, conint, constr

from inferframe.errors import PlanError
from inferframe.structured import ENDPOINTS, json_schema_for, response_format_for

# Keywords OpenAI documents for strict mode; anything else in a strict schema is a bug.
STRICT_KEYWORDS = {
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
    "description", "title", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minItems", "maxItems", "format",
}
OPENAI_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}


def assert_strict(schema: dict) -> None:
    """Check OpenAI's strict-mode rules on every node of ``schema``."""
    assert schema["type"] == "object" and "anyOf" not in schema, "root must be an object, not anyOf"
    json.dumps(schema)  # plain JSON only

    def walk(node, where):
        assert isinstance(node, dict), where
        unknown = set(node) - STRICT_KEYWORDS
        assert not unknown, f"{where}: unsupported keywords {unknown}"
        if "format" in node:
            assert node["format"] in OPENAI_FORMATS, where
        if node.get("type") == "object":
            assert node.get("additionalProperties") is False, f"{where}: additionalProperties must be false"
            assert node.get("required") == list(node["properties"]), f"{where}: every property must be required"
            for key, sub in node["properties"].items():
                walk(sub, f"{where}.{key}")
        if node.get("type") == "array":
            walk(node["items"], where + "[]")
        for i, option in enumerate(node.get("anyOf", [])):
            walk(option, f"{where}|{i}")

    walk(schema, "$")


class Status(str, enum.Enum):
    """Where the invoice stands."""

    OPEN = "open"
    PAID = "paid"


class Address(BaseModel):
    street: str
    city: str = Field(description="City name")


class Line(BaseModel):
    """One line of an invoice."""

    sku: str = Field(alias="SKU", description="Stock keeping unit", title="SKU code")
    price: Annotated[float, Field(ge=0, description="Unit price")]
    qty: conint(ge=1, le=1000) = 1
    code: constr(pattern=r"^[A-Z]{3}$", min_length=3, max_length=3) = "AAA"


class Invoice(BaseModel):
    """An invoice extracted from a document."""

    number: str = Field(description="Invoice number as printed")
    issued: dt.date
    due: Optional[dt.datetime] = None
    status: Status
    kind: Literal["invoice", "credit_note"]
    total: decimal.Decimal
    lines: list[Line] = Field(min_length=1, max_length=50)
    billing: Address
    shipping: Address | None = None
    tags: set[str] = set()
    extras: dict[str, float] = {}


def test_invoice_schema_is_strict():
    name, schema = json_schema_for(Invoice)
    assert name == "Invoice"
    assert_strict(schema)


def test_no_refs_left_and_shared_models_inlined_twice():
    _, schema = json_schema_for(Invoice)
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text and "definitions" not in text
    assert schema["properties"]["billing"]["properties"]["city"] == {"description": "City name", "type": "string"}
    assert schema["properties"]["shipping"]["anyOf"][0]["properties"]["city"]["type"] == "string"


def test_optional_fields_are_required_and_nullable():
    _, schema = json_schema_for(Invoice)
    assert "due" in schema["required"] and "shipping" in schema["required"]
    assert schema["properties"]["due"] == {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]}
    assert schema["properties"]["shipping"]["anyOf"][1] == {"type": "null"}


def test_descriptions_titles_enums_and_dates():
    _, schema = json_schema_for(Invoice)
    props = schema["properties"]
    assert schema["description"] == "An invoice extracted from a document."
    assert props["number"] == {"description": "Invoice number as printed", "type": "string"}
    assert props["issued"] == {"type": "string", "format": "date"}
    assert props["status"] == {"description": "Where the invoice stands.", "type": "string", "enum": ["open", "paid"]}
    assert props["kind"] == {"type": "string", "enum": ["invoice", "credit_note"]}
    assert props["total"] == {"type": "number"}
    line = props["lines"]["items"]
    assert line["description"] == "One line of an invoice."
    assert line["properties"]["SKU"] == {"title": "SKU code", "description": "Stock keeping unit", "type": "string"}
    assert line["properties"]["price"] == {"description": "Unit price", "type": "number", "minimum": 0}


def test_dropped_and_kept_keywords():
    _, strict = json_schema_for(Invoice)
    line = strict["properties"]["lines"]["items"]["properties"]
    assert line["qty"] == {"type": "integer", "minimum": 1, "maximum": 1000}          # kept, no default
    assert line["code"] == {"type": "string"}                                        # pattern/length dropped
    assert strict["properties"]["lines"]["minItems"] == 1
    assert strict["properties"]["lines"]["maxItems"] == 50
    assert strict["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}  # uniqueItems dropped
    assert "default" not in json.dumps(strict)

    _, loose = json_schema_for(Invoice, strict=False)
    code = loose["properties"]["lines"]["items"]["properties"]["code"]
    assert code == {"type": "string", "pattern": "^[A-Z]{3}$", "minLength": 3, "maxLength": 3}
    assert loose["properties"]["tags"]["uniqueItems"] is True


def test_dict_fields_become_key_value_lists_in_strict_mode():
    _, strict = json_schema_for(Invoice)
    extras = strict["properties"]["extras"]
    assert extras["type"] == "array"
    assert extras["items"]["properties"] == {"key": {"type": "string"}, "value": {"type": "number"}}
    _, loose = json_schema_for(Invoice, strict=False)
    assert loose["properties"]["extras"] == {"type": "object", "additionalProperties": {"type": "number"}}


def test_non_strict_required_lists_only_fields_without_defaults():
    _, loose = json_schema_for(Invoice, strict=False)
    assert loose["required"] == ["number", "issued", "status", "kind", "total", "lines", "billing"]
    assert loose["additionalProperties"] is False


def test_choices_are_wrapped_in_an_object():
    for fmt, name in [(Literal["pos", "neg"], "choice"), (["pos", "neg"], "choice"), (Status, "Status")]:
        got_name, schema = json_schema_for(fmt)
        assert got_name == name
        assert_strict(schema)
        assert schema["required"] == ["label"]
        assert schema["properties"]["label"]["enum"] in (["pos", "neg"], ["open", "paid"])


def test_non_object_roots_are_wrapped_under_value():
    name, schema = json_schema_for(list[Address])
    assert_strict(schema)
    assert name == "response"
    assert schema["properties"]["value"]["type"] == "array"


def test_names_follow_openai_rule():
    T = TypeVar("T")

    class Page(BaseModel, Generic[T]):
        items: list[T]

    name, schema = json_schema_for(Page[Address])
    assert name == "Page_Address"
    assert_strict(schema)

    Long = type("X" * 80, (BaseModel,), {"__annotations__": {"a": int}})
    assert json_schema_for(Long)[0] == "X" * 64
    assert json_schema_for({"title": "My schema!", "type": "object", "properties": {"a": {"type": "string"}}})[0] \
        == "My_schema"


def test_json_schema_dict_input_is_made_strict():
    schema = {
        "title": "Person",
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Full name", "default": "x", "minLength": 1},
            "age": {"type": "integer", "minimum": 0},
            "email": {"type": "string", "format": "email"},
            "site": {"type": "string", "format": "uri"},
            "home": {"$ref": "#/$defs/Address"},
            "pets": {"type": "array", "items": {"$ref": "#/$defs/Pet"}},
        },
        "required": ["name"],
        "$defs": {
            "Address": {"type": "object", "properties": {"city": {"type": "string"}}},
            "Pet": {"type": "object", "properties": {"kind": {"enum": ["cat", "dog"]}}, "required": ["kind"]},
        },
    }
    original = copy.deepcopy(schema)
    name, strict = json_schema_for(schema)
    assert schema == original  # input untouched
    assert name == "Person"
    assert_strict(strict)
    props = strict["properties"]
    assert props["name"] == {"description": "Full name", "type": "string"}
    assert props["age"] == {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]}   # was optional
    assert props["email"]["anyOf"][0] == {"type": "string", "format": "email"}
    assert props["site"]["anyOf"][0] == {"type": "string"}                                    # "uri" unsupported
    assert props["pets"]["anyOf"][0]["items"]["properties"]["kind"] == {"type": "string", "enum": ["cat", "dog"]}


def test_schema_is_fresh_each_call():
    _, a = json_schema_for(Invoice)
    a["properties"].clear()
    _, b = json_schema_for(Invoice)
    assert b["properties"]


# --- request fragments --------------------------------------------------------------------------

def test_response_format_fragments():
    name, schema = json_schema_for(Address)
    chat = response_format_for(name, schema, "chat")
    assert chat == {"response_format": {"type": "json_schema",
                                        "json_schema": {"name": "Address", "schema": schema, "strict": True}}}
    assert response_format_for(name, schema, "chat_completions") == chat
    assert response_format_for(name, schema, "responses") == {
        "text": {"format": {"type": "json_schema", "name": "Address", "schema": schema, "strict": True}}}
    assert response_format_for(name, schema, "vllm") == {"structured_outputs": {"json": schema}}
    assert set(ENDPOINTS) == {"chat", "responses", "vllm"}


def test_response_format_copies_the_schema():
    name, schema = json_schema_for(Address)
    frag = response_format_for(name, schema, "vllm")
    frag["structured_outputs"]["json"]["properties"].clear()
    assert schema["properties"]


@pytest.mark.parametrize("bad", ["", "has space", "x" * 65, "dots.not.ok", "ünï"])
def test_response_format_rejects_bad_names(bad):
    with pytest.raises(PlanError, match="not allowed"):
        response_format_for(bad, {"type": "object"}, "chat")


def test_response_format_rejects_unknown_endpoint():
    with pytest.raises(PlanError, match="Unknown endpoint"):
        response_format_for("ok", {"type": "object"}, "embeddings")
