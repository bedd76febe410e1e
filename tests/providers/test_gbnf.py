"""Compact grammars from JSON schemas (no server needed; the local-model tests send them to llama.cpp)."""

import json
import re
from typing import Literal, Optional

from pydantic import BaseModel, Field

from inferframe.providers.gbnf import json_schema_to_gbnf
from inferframe.structured.answer_budget import DEFAULT_MAX_STRING_LENGTH, answer_token_bound
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
    assert small < 20 < big < 700


class Rated(BaseModel):
    rating: int = Field(ge=1, le=5)
    summary: str
    title: str = Field(max_length=40)
    verdict: Literal["watch", "skip"]


def test_free_text_strings_are_bounded_and_a_fields_max_length_wins():
    g = json_schema_to_gbnf(json_schema_for(Rated, lengths=True)[1])
    assert f"char{{1,{DEFAULT_MAX_STRING_LENGTH}}}" in g  # summary: the default bound, and not empty
    assert "char{1,40}" in g  # title: its own max_length
    assert "char*" not in g  # no unbounded string left
    # None switches the bound off (the old grammar); the strict schema for OpenAI keeps no lengths.
    assert "char{" not in json_schema_to_gbnf(json_schema_for(Rated)[1], max_string_length=None)
    assert "maxLength" not in json.dumps(json_schema_for(Rated)[1])


def test_min_length_and_a_string_in_a_list_are_bounded_too():
    g = json_schema_to_gbnf({"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 9}})
    assert "char{2,9}" in g
    assert f"char{{1,{DEFAULT_MAX_STRING_LENGTH}}}" in json_schema_to_gbnf({"type": "array", "items": {"type": "string"}})
    # min_length=0 lets a field be empty (the default asks for at least one character).
    assert "char{0,5}" in json_schema_to_gbnf({"type": "string", "minLength": 0, "maxLength": 5})


def test_the_default_max_tokens_leaves_room_for_a_string_written_to_its_bound():
    from inferframe.providers.local import LocalProvider

    schema = json_schema_for(Rated, lengths=True)[1]
    # Three characters a token at worst: the grammar, not max_tokens, ends a string at its bound.
    assert LocalProvider.default_max_tokens(schema) >= (DEFAULT_MAX_STRING_LENGTH + 40) // 3
    shorter = json_schema_for(Rated, lengths=True)[1]
    shorter["properties"]["summary"]["maxLength"] = 60
    assert LocalProvider.default_max_tokens(shorter) < LocalProvider.default_max_tokens(schema)
