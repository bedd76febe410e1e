"""Compact grammars from JSON schemas (no server needed; the local-model tests send them to llama.cpp)."""

import re
from typing import Literal, Optional

from pydantic import BaseModel, Field

from inferframe.providers.gbnf import answer_token_bound, json_schema_to_gbnf
from inferframe.structured import json_schema_for


class Tag(BaseModel):
    name: str
    weight: float


class Review(BaseModel):
    sentiment: Literal["positive", "negative"]
    tags: list[Tag] = Field(max_length=3)
    stars: int = Field(ge=1, le=5)
    note: Optional[str]


def grammar():
    return json_schema_to_gbnf(json_schema_for(Review)[1])


def test_the_grammar_admits_no_whitespace_between_tokens():
    g = grammar()
    rules = "\n".join(line for line in g.splitlines() if not line.startswith("char ::="))
    literals = re.findall(r'"((?:[^"\\]|\\.)*)"', rules)
    assert literals and not [lit for lit in literals if " " in lit or "\\n" in lit or "\\t" in lit]
    # Character classes: digits and hex, and one negated class for a string's characters (inside quotes).
    classes = re.findall(r"\[[^\]]*\]", g)
    negated = [c for c in classes if c.startswith("[^")]
    assert len(set(negated)) == 1 and all(line.startswith("char ::=") for line in g.splitlines() if "[^" in line)


def test_fields_come_in_the_schemas_order_and_small_ranges_are_listed():
    g = grammar()
    root = g.splitlines()[0]
    keys = re.findall(r'\\"(\w+)\\":', root)
    assert keys == ["sentiment", "tags", "stars", "note"]
    assert '"1" | "2" | "3" | "4" | "5"' in g
    assert '{0,2}' in g  # at most three tags: one, then up to two more


def test_recursive_refs_and_any_value_are_grammars_too():
    schema = {"$defs": {"Node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                                 "required": ["kids"]}}, "$ref": "#/$defs/Node"}
    g = json_schema_to_gbnf(schema)
    name = re.search(r"root ::= (r\d+)", g).group(1)
    assert re.search(rf"{name} ::= .*kids", g)
    assert "value ::=" in json_schema_to_gbnf({"type": "object", "additionalProperties": {"type": "integer"}})


def test_the_token_bound_grows_with_the_schema():
    small = answer_token_bound(json_schema_for(Literal["a", "b"])[1])
    big = answer_token_bound(json_schema_for(Review)[1])
    assert small < 20 < big < 400
