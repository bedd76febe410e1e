"""JSON-schema dicts to a ``Node`` tree: local ``$ref`` s resolved, what has no column type refused.

Example:
    >>> schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    >>> [f.key for f in SchemaWalker(schema, "schema").walk(schema, "schema", ()).fields]
    ['n']
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

from inferframe.structured.nodes import Field, Node, check_choices, choice_value_kind, plan_error

_KEEP_STRING = ("minLength", "maxLength", "pattern", "format")
_KEEP_NUMBER = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_KEEP_ARRAY = ("minItems", "maxItems", "uniqueItems")
_TYPE_NAMES = frozenset({"string", "integer", "number", "boolean", "object", "array", "null"})
_ANY_REASON = "a schema without a type accepts any value, which has no fixed column type"
_ANY_FIX = "give it a \"type\" (string, integer, number, boolean, object or array)"


class SchemaWalker:
    """Turns a JSON-schema dict into Nodes, resolving local ``$ref`` s and refusing what has no column type."""

    def __init__(self, root: dict, label: str) -> None:
        self.root = root
        self.label = label
        self.refs: list[str] = []

    def _resolve(self, ref: str, path: str) -> dict:
        if not ref.startswith("#/"):
            raise plan_error(path, json.dumps({"$ref": ref}), "only local references ('#/$defs/...') can be resolved",
                             "inline the referenced schema or put it under $defs")
        target: Any = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise plan_error(path, json.dumps({"$ref": ref}), "the reference points nowhere",
                                 "add the referenced definition under $defs")
            target = target[part]
        if not isinstance(target, dict):
            raise plan_error(path, json.dumps({"$ref": ref}), "the reference does not point to a schema object",
                             "point it at a schema object")
        return target

    def walk(self, s: Any, path: str, _unused: tuple) -> Node:
        return self._walk(s, path)

    def _walk_ref(self, s: dict, path: str, text: str) -> Node:
        ref = s["$ref"]
        if ref in self.refs:
            raise plan_error(path, text, "the schema refers to itself, and Arrow types cannot be recursive",
                             "unroll the recursion to a fixed depth")
        self.refs.append(ref)
        try:
            target = self._resolve(ref, path)
            merged = {**target, **{k: v for k, v in s.items() if k != "$ref"}}
            return self._walk(merged, path)
        finally:
            self.refs.pop()

    def _walk(self, s: Any, path: str) -> Node:
        text = _short_json(s)
        if s is True or s == {} or not isinstance(s, dict):
            raise plan_error(path, text, _ANY_REASON, _ANY_FIX)
        if "$ref" in s:
            return self._walk_ref(s, path, text)
        description = s.get("description") if isinstance(s.get("description"), str) else None
        title = s.get("title") if isinstance(s.get("title"), str) else None

        def done(node: Node) -> Node:
            return dataclasses.replace(node, description=description or node.description, title=title or node.title)

        if "allOf" in s:
            parts = s["allOf"]
            if isinstance(parts, list) and len(parts) == 1:
                merged = {**{k: v for k, v in s.items() if k != "allOf"}, **parts[0]}
                return done(self._walk(merged, path))
            raise plan_error(path, text, "allOf with several parts is not supported",
                             "merge the parts into one schema")
        for key in ("anyOf", "oneOf"):
            if key in s:
                options = s[key]
                non_null = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
                if len(non_null) != 1:
                    raise plan_error(path, text, "a union of several non-null types has no single column type",
                                     "use one type, or anyOf [X, {\"type\": \"null\"}] for a value that may be missing")
                rest = {k: v for k, v in s.items() if k != key}
                node = self._walk({**rest, **non_null[0]}, path)
                return done(dataclasses.replace(node, nullable=node.nullable or len(non_null) < len(options)))
        return done(self._typed(s, path, text))

    def _typed(self, s: dict, path: str, text: str) -> Node:
        """The node for a schema by its type (or const/enum), before its description and title are set."""
        nullable = bool(s.get("nullable"))
        typ = s.get("type")
        if isinstance(typ, list):
            non_null = [t for t in typ if t != "null"]
            if len(non_null) != 1:
                raise plan_error(path, text, "a union of several non-null types has no single column type",
                                 "use one type, or [\"X\", \"null\"] for a value that may be missing")
            nullable = nullable or len(non_null) < len(typ)
            typ = non_null[0]
        if typ is not None and typ not in _TYPE_NAMES:
            raise plan_error(path, text, f"{typ!r} is not a JSON-schema type", "use string, integer, number, boolean, "
                             "object or array")
        if "const" in s or "enum" in s:
            values = [s["const"]] if "const" in s else list(s["enum"])
            if None in values:
                nullable = True
                values = [v for v in values if v is not None]
            labels = check_choices(values, path, text)
            kind = choice_value_kind(labels, path, text)
            if kind == "integer" and typ == "number":
                kind = "integer"
            return Node("enum", labels=labels, value_kind=kind, nullable=nullable)
        if typ is None:
            if "properties" in s:
                typ = "object"
            elif "items" in s:
                typ = "array"
            else:
                raise plan_error(path, text, _ANY_REASON, _ANY_FIX)
        if typ == "null":
            raise plan_error(path, text, "a field that is always null carries no data", "remove it")
        if typ == "object":
            return self._object(s, path, text, nullable)
        if typ == "array":
            if "prefixItems" in s or isinstance(s.get("items"), list):
                raise plan_error(path, text, "tuple-style arrays (prefixItems) mix element types",
                                 "use one \"items\" schema, or an object with named properties")
            if "items" not in s:
                raise plan_error(path, text, "the element type is unknown", "add an \"items\" schema")
            item = self._walk(s["items"], path + "[]")
            return Node("array", item=item, nullable=nullable, constraints=_kept(s, _KEEP_ARRAY))
        if typ == "string":
            fmt = s.get("format")
            kind = {"date": "date", "date-time": "datetime", "time": "time"}.get(fmt, "string")
            keep = _KEEP_STRING if kind == "string" else ()
            return Node(kind, nullable=nullable, constraints=_kept(s, keep))
        if typ in ("integer", "number"):
            return Node(typ, nullable=nullable, constraints=_kept(s, _KEEP_NUMBER))
        return Node("boolean", nullable=nullable)

    def _object(self, s: dict, path: str, text: str, nullable: bool) -> Node:
        props = s.get("properties") or {}
        if not isinstance(props, dict):
            raise plan_error(path, text, "\"properties\" must map each field name to its schema",
                             "write \"properties\": {\"name\": {\"type\": \"string\"}, ...}")
        if not isinstance(s.get("required") or [], list):
            raise plan_error(path, text, "\"required\" must be a list of field names", "write \"required\": [\"name\"]")
        extra = s.get("additionalProperties", True)
        if not props:
            if isinstance(extra, dict) and extra:
                return Node("map", item=self._walk(extra, path + "{}"), nullable=nullable)
            raise plan_error(path, text, "an object without properties has no fixed set of columns",
                             "list its \"properties\", or give \"additionalProperties\" a schema for a map")
        if isinstance(extra, dict) and extra:
            raise plan_error(path, text, "an object with both fixed properties and typed extra properties has no "
                             "single column type", "drop additionalProperties, or move the extras under one property")
        required = set(s.get("required") or ())
        fields = []
        for key, sub in props.items():
            node = self._walk(sub, f"{path}.{key}")
            is_required = key in required
            if not is_required:
                # An optional key may be absent; strict mode must list it, so it becomes "may be null".
                node = dataclasses.replace(node, nullable=True)
            fields.append(Field(key=key, attr=key, node=node, required=is_required,
                                nullable=node.nullable or not is_required))
        return Node("object", fields=tuple(fields), closed=extra is False, nullable=nullable, source="dict")


def _kept(s: dict, names: tuple) -> tuple:
    return tuple((k, copy.deepcopy(s[k])) for k in names if k in s)


def _short_json(s: Any) -> str:
    try:
        text = json.dumps(s, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(s)
    return text if len(text) <= 120 else text[:117] + "..."
