"""JSON schemas and request fragments that make the server enforce a structured return format.

``json_schema_for`` builds the schema from the same parsed tree as ``arrow_type_for``, so the server
is told to produce exactly the column's fields. In strict mode (the default) the schema follows
OpenAI's Structured Outputs rules for ``strict: true``:

* every object has ``"additionalProperties": false`` and lists **all** its properties in
  ``required``; a field that may be missing is instead nullable: ``anyOf: [X, {"type": "null"}]``;
* the root is an object, never ``anyOf``: a non-object return format (choices, a list, ...) is
  wrapped as ``{"label": X}`` (choices) or ``{"value": X}`` (anything else); the validator unwraps it;
* nested models are inlined, so no ``$ref`` / ``$defs`` remain (recursive models are refused earlier,
  as Arrow types cannot be recursive); llama.cpp grammars and vLLM handle inlined schemas best too;
* ``dict[str, X]`` is sent as ``{"type": "array", "items": {"key": str, "value": X}}``, because strict
  mode forbids free-form object keys; the validator turns the pairs back into a mapping;
* field ``description`` s and explicit ``title`` s are kept (model docstrings become the object's
  ``description``, the class name its ``title``); enums are ``{"type": ..., "enum": [...]}``;
  dates are ``{"type": "string", "format": "date"}`` (``date-time``, ``time`` and ``uuid`` likewise).

Keywords kept in strict mode (documented as supported by OpenAI): ``type``, ``properties``,
``required``, ``additionalProperties: false``, ``items``, ``enum``, ``anyOf``, ``description``,
``title``; ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``;
``minItems``, ``maxItems``; ``format`` when it is one of date-time, time, date, duration, email,
hostname, ipv4, ipv6, uuid.

Keywords dropped in strict mode: ``default``, ``examples``, ``pattern`` (a Python regex need not compile
in the server's regex dialect), ``minLength``, ``maxLength``, ``uniqueItems``, other ``format`` values,
``$ref``/``$defs`` (inlined), ``allOf``/``oneOf``/``not``/``if``-``then``-``else``,
``patternProperties``, ``propertyNames``, ``min/maxProperties``. Dropped constraints are still
enforced, because every answer goes through :class:`~inferframe.structured.Validator`. OpenAI
fine-tuned models reject even the numeric and array bounds; size limits (nesting depth, number of
properties, enum values) are left to the server to report.

With ``lengths=True`` a strict schema keeps ``minLength`` and ``maxLength``: for servers that enforce
them while generating (the local llama.cpp grammar bounds every free-text string by them).

With ``strict=False`` the schema is plain JSON Schema for servers without strict mode: only fields
without defaults are ``required``, ``dict[str, X]`` is ``{"type": "object", "additionalProperties": X}``,
and ``pattern``, ``minLength``, ``maxLength`` and ``uniqueItems`` are kept.

Example:
    >>> from pydantic import BaseModel, Field
    >>> class City(BaseModel):
    ...     name: str = Field(description="Official name")
    >>> name, schema = json_schema_for(City)
    >>> name, schema["required"], schema["additionalProperties"]
    ('City', ['name'], False)
"""

from __future__ import annotations

import copy
import re
from types import MappingProxyType
from typing import Any

from inferframe.errors import PlanError
from inferframe.structured._spec import OPENAI_STRING_FORMATS, Node, Spec, build_spec

__all__ = ["ENDPOINTS", "json_schema_for", "response_format_for", "schema_of_spec"]

ENDPOINTS = ("chat", "responses", "vllm")
_ENDPOINT_ALIASES = MappingProxyType({"chat": "chat", "chat_completions": "chat", "chat/completions": "chat",
                     "responses": "responses", "vllm": "vllm"})
_NAME_OK = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

_STRICT_KEEP = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                          "minItems", "maxItems", "format"})
_LENGTHS = frozenset({"minLength", "maxLength"})
_LOOSE_KEEP = _STRICT_KEEP | _LENGTHS | {"pattern", "uniqueItems"}
_FORMATS = MappingProxyType({"date": "date", "datetime": "date-time", "time": "time"})
_ENUM_JSON_TYPE = MappingProxyType({"string": "string", "integer": "integer", "boolean": "boolean"})


def json_schema_for(return_format: Any, *, strict: bool = True, lengths: bool = False) -> tuple[str, dict]:
    """A (name, JSON schema) pair that makes a server produce ``return_format``.

    Parameters:
        return_format: a Pydantic v2 model class, a JSON-schema dict, ``Literal[...]``, an ``Enum``
            subclass, a list of choices, or another annotation of supported types.
        strict: follow OpenAI's strict-mode rules (see the module docstring); False gives plain JSON
            Schema with optional fields left out of ``required``.
        lengths: keep strings' ``minLength``/``maxLength`` in strict mode too (for a grammar, not OpenAI).

    Returns:
        ``name`` matching ``^[a-zA-Z0-9_-]{1,64}$`` (the model's class name when it fits) and a fresh
        schema dict, safe to modify.

    Raises:
        PlanError: the format cannot be mapped to a column type.

    Example:
        >>> json_schema_for(["yes", "no"])[1]["properties"]["label"]
        {'type': 'string', 'enum': ['yes', 'no']}
    """
    return schema_of_spec(build_spec(return_format), strict=strict, lengths=lengths)


def schema_of_spec(spec: Spec, *, strict: bool = True, lengths: bool = False) -> tuple[str, dict]:
    """``json_schema_for`` for an already parsed :class:`Spec`."""
    keep = _LOOSE_KEEP if not strict else _STRICT_KEEP | _LENGTHS if lengths else _STRICT_KEEP
    schema = _emit(spec.root, strict, keep)
    if spec.wrapper_key is not None:
        schema = {
            "type": "object",
            "properties": {spec.wrapper_key: schema},
            "required": [spec.wrapper_key],
            "additionalProperties": False,
        }
    return spec.name, schema


def response_format_for(name: str, schema: dict, endpoint: str) -> dict:
    """The request-body fragment that asks ``endpoint`` to enforce ``schema``; merge it into the body.

    Parameters:
        name: the schema's name; must match ``^[a-zA-Z0-9_-]{1,64}$`` (OpenAI's rule).
        schema: a schema from :func:`json_schema_for`.
        endpoint: ``"chat"`` (``/chat/completions``; ``"chat_completions"`` is accepted too),
            ``"responses"`` (OpenAI Responses API) or ``"vllm"``: vLLM's own ``structured_outputs``
            extra-body field (vLLM >= 0.10; older releases called it ``guided_json``, which is not
            sent; vLLM's OpenAI-compatible server also accepts the ``"chat"`` fragment).

    Example:
        >>> response_format_for("City", {"type": "object"}, "responses")["text"]["format"]["type"]
        'json_schema'
    """
    if not isinstance(name, str) or not _NAME_OK.match(name):
        raise PlanError(f"The schema name {name!r} is not allowed: names must match ^[a-zA-Z0-9_-]{{1,64}}$ "
                        "(letters, digits, '_' and '-', at most 64). Fix: rename it, or use the name "
                        "json_schema_for returns.")
    kind = _ENDPOINT_ALIASES.get(endpoint) if isinstance(endpoint, str) else None
    if kind is None:
        raise PlanError(f"Unknown endpoint {endpoint!r} for structured outputs. Fix: use one of {list(ENDPOINTS)}.")
    schema = copy.deepcopy(schema)
    if kind == "chat":
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": name, "schema": schema, "strict": True}}}
    if kind == "responses":
        return {"text": {"format": {"type": "json_schema", "name": name, "schema": schema, "strict": True}}}
    return {"structured_outputs": {"json": schema}}


def _emit(node: Node, strict: bool, keep: frozenset) -> dict:
    """``keep``: the constraint keywords kept."""
    body = _emit_body(node, strict, keep)
    annotations = {}
    if node.title:
        annotations["title"] = node.title
    if node.description:
        annotations["description"] = node.description
    if node.nullable:
        # Annotations go on the outer anyOf so the model reads them before choosing a branch.
        return {**annotations, "anyOf": [body, {"type": "null"}]}
    return {**annotations, **body}


def _emit_body(node: Node, strict: bool, keep: frozenset) -> dict:
    kind = node.kind
    if kind == "object":
        props = {f.key: _emit(f.node, strict, keep) for f in node.fields}
        required = [f.key for f in node.fields] if strict else [f.key for f in node.fields if f.required]
        out: dict = {"type": "object", "properties": props}
        if required or strict:
            out["required"] = required
        out["additionalProperties"] = False
        return out
    if kind == "array":
        return {"type": "array", "items": _emit(node.item, strict, keep), **_keywords(node, keep)}
    if kind == "map":
        value = _emit(node.item, strict, keep)
        if not strict:
            return {"type": "object", "additionalProperties": value}
        return {
            "type": "array",
            "description": "Key/value entries of a mapping, one object per key.",
            "items": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "value": value},
                "required": ["key", "value"],
                "additionalProperties": False,
            },
        }
    if kind == "enum":
        return {"type": _ENUM_JSON_TYPE[node.value_kind], "enum": list(node.labels)}
    if kind in _FORMATS:
        return {"type": "string", "format": _FORMATS[kind]}
    return {"type": kind, **_keywords(node, keep)}


def _keywords(node: Node, keep: frozenset) -> dict:
    out = {}
    for key, value in node.constraints:
        if key not in keep:
            continue
        if key == "format" and value not in OPENAI_STRING_FORMATS:
            continue
        out[key] = value
    return out
