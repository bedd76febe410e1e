"""JSON schemas as compact GBNF grammars for llama.cpp (the tokens such an answer needs: ``structured.answer_budget``).

Hand-written because llama.cpp's own converter (used when a request carries a JSON schema) lets
the model put up to 20 spaces or newlines between any two tokens and cannot be told not to: a small
base model then pads its answer with indentation until max_tokens. This grammar admits compact JSON
only (no whitespace outside strings), with the fields in the schema's order.

Every free-text string is bounded: to its ``maxLength`` (a field's ``max_length``), else to
``DEFAULT_MAX_STRING_LENGTH`` characters. A small model that falls into a loop inside a string
(a summary repeating one sentence) otherwise writes until max_tokens and the whole record is lost;
with the bound the grammar closes the string and the record goes on. A string also has at least one
character unless its ``minLength`` says otherwise (``min_length=0``): zero-shot, Gemma 3 270M closed
half of its summaries at once (``"summary":""``, 6 of 12 bundled reviews).

Example:
    >>> schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    >>> print(json_schema_to_gbnf(schema).splitlines()[0])
    root ::= "{" "\\"ok\\":" boolean "}"
    >>> print(json_schema_to_gbnf({"type": "string", "maxLength": 20}).splitlines()[0])
    root ::= "\\"" char{1,20} "\\""
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

from inferframe.errors import PlanError
from inferframe.structured.answer_budget import DEFAULT_MAX_STRING_LENGTH, max_length_of

_BASE = MappingProxyType({
    "boolean": '"true" | "false"',
    "null": '"null"',
    # Digits are bounded so that a model cannot spend its whole budget on one number.
    "integer": '"-"? ("0" | [1-9] [0-9]{0,15})',
    "number": '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?',
    "string": '"\\"" char* "\\""',
    "char": '[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "value": 'object | array | string | number | boolean | "null"',
    "object": '"{" (string ":" value ("," string ":" value)*)? "}"',
    "array": '"[" (value ("," value)*)? "]"',
})
_NEEDS = MappingProxyType({"string": ["char"], "value": ["object", "array", "string", "number", "boolean"],
          "object": ["string", "value"], "array": ["value"]})
_SMALL_RANGE = 64  # integer ranges up to this size become a list of their values
DEFAULT_MIN_STRING_LENGTH = 1  # an empty free-text answer is no answer; min_length=0 allows it


def _literal(text: str) -> str:
    """A GBNF literal matching exactly ``text``."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _json_literal(value: Any) -> str:
    return _literal(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


class _Grammar:
    def __init__(self, root: dict, max_string_length: int | None) -> None:
        self.root = root
        self.max_string_length = max_string_length
        self.rules: dict[str, str] = {}
        self.named: dict[str, str] = {}  # $ref -> rule name

    def base(self, name: str) -> str:
        if name not in self.rules:
            self.rules[name] = _BASE[name]
            for dep in _NEEDS.get(name, ()):
                self.base(dep)
        return name

    def rule(self, body: str) -> str:
        """A rule name for ``body`` (the body itself when it is already a rule's name)."""
        if body in self.rules:
            return body
        name = f"r{len(self.rules)}"
        self.rules[name] = body
        return name

    def ref(self, ref: str) -> str:
        if ref not in self.named:
            if not ref.startswith("#/"):
                raise PlanError(f"only local $refs are supported, got {ref!r}; put the definition under $defs "
                                "and refer to it as '#/$defs/<name>'.")
            node: Any = self.root
            for part in ref[2:].split("/"):
                node = node[part]
            name = self.named[ref] = f"r{len(self.rules)}"
            self.rules[name] = ""  # reserved: a recursive schema refers to itself by name
            self.rules[name] = self.expr(node)
        return self.named[ref]

    def expr(self, s: Any) -> str:
        """A GBNF expression for schema ``s``."""
        if s is True or not isinstance(s, dict) or not s:
            return self.base("value")
        if "$ref" in s:
            return self.ref(s["$ref"])
        if "const" in s:
            return _json_literal(s["const"])
        if "enum" in s:
            return " | ".join(_json_literal(v) for v in s["enum"])
        alternatives = s.get("anyOf") or s.get("oneOf")
        if alternatives:
            return " | ".join(f"({self.expr(a)})" for a in alternatives)
        kind = s.get("type")
        if isinstance(kind, list):
            return " | ".join(f"({self.expr({**s, 'type': k})})" for k in kind)
        if kind == "object":
            return self.object(s)
        if kind == "array":
            return self.array(s)
        if kind == "integer":
            lo, hi = s.get("minimum"), s.get("maximum")
            if isinstance(lo, int) and isinstance(hi, int) and 0 <= hi - lo <= _SMALL_RANGE:
                return " | ".join(_literal(str(v)) for v in range(lo, hi + 1))
        if kind == "string":
            return self.string(s)
        if kind in ("integer", "number", "boolean", "null"):
            return self.base(kind)
        return self.base("value")

    def string(self, s: dict) -> str:
        """A string of minLength (default 1) to maxLength characters (default: the bound; None: unbounded)."""
        lo = s.get("minLength", DEFAULT_MIN_STRING_LENGTH if self.max_string_length is not None else 0)
        lo, hi = int(lo or 0), max_length_of(s, self.max_string_length)
        if hi is None and not lo:
            return self.base("string")
        self.base("char")
        count = f"{{{lo},{'' if hi is None else max(hi, lo)}}}"
        return f'"\\"" char{count} "\\""'

    def object(self, s: dict) -> str:
        props = s.get("properties") or {}
        if not props:
            return self.base("object")
        parts = []
        for i, (key, sub) in enumerate(props.items()):
            head = ("," if i else "") + json.dumps(key, ensure_ascii=False) + ":"
            parts.append(f"{_literal(head)} {self.rule(self.expr(sub))}")
        return '"{" ' + " ".join(parts) + ' "}"'

    def array(self, s: dict) -> str:
        item = self.rule(self.expr(s.get("items", True)))
        lo, hi = int(s.get("minItems") or 0), s.get("maxItems")
        if hi is not None and hi <= 0:
            return '"[]"'
        more_lo = max(lo - 1, 0)
        more = f'("," {item}){{{more_lo},{"" if hi is None else hi - 1}}}'
        body = f"{item} {more}"
        return f'"[" {body} "]"' if lo >= 1 else f'"[" ({body})? "]"'


def json_schema_to_gbnf(schema: dict, max_string_length: int | None = DEFAULT_MAX_STRING_LENGTH) -> str:
    """A llama.cpp GBNF grammar admitting exactly the compact JSON documents of ``schema``.

    Supports objects (fields in order), arrays (with minItems/maxItems), strings (minLength/maxLength
    in characters), integers (small min/max ranges listed), numbers, booleans, null, enum, const,
    anyOf/oneOf, type lists and local $refs; anything else (e.g. a dict of any keys) is any JSON value.

    Parameters:
        schema: the JSON schema.
        max_string_length: the most characters of a string without its own maxLength (None: no bound,
            and no minimum of one character either: the grammar main sent; a string inside a
            free-form value is never bounded).
    """
    g = _Grammar(schema, max_string_length)
    root = g.expr(schema)
    lines = [f"root ::= {root}"] + [f"{name} ::= {body}" for name, body in g.rules.items()]
    return "\n".join(lines)
