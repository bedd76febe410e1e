"""One normalized description of a return format, shared by the Arrow, JSON-schema and validation code.

Every accepted ``return_format`` (a Pydantic model, a JSON-schema dict, a ``Literal``, an ``Enum``, a
list of choices, or any other annotation built from supported types) is turned into a tree of
:class:`Node` once. Deriving the Arrow type, the strict JSON schema and the validator from the same
tree is what keeps the three in agreement: the column has exactly the fields the server is told to
produce, under the same names.

Example:
    >>> from typing import Literal
    >>> spec = build_spec(Literal["yes", "no"])
    >>> spec.root.kind, spec.root.choices
    ('enum', ('yes', 'no'))
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import datetime
import decimal
import enum
import inspect
import json
import re
import types
from types import MappingProxyType
import typing
import uuid
from typing import Any

import pydantic

from inferframe.errors import PlanError

# JSON "format" values OpenAI's strict mode documents as supported for strings.
OPENAI_STRING_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6",
                                   "uuid"})

_NAME_BAD = re.compile(r"[^a-zA-Z0-9_-]+")


@dataclasses.dataclass(frozen=True, eq=False)
class Field:
    """One property of an object node.

    Parameters:
        key: the JSON key the model writes, which is also the Arrow field name.
        attr: where the validated value lives: an attribute name (models, dataclasses) or a dict key.
        node: the field's type.
        required: whether plain JSON schema would list it in ``required`` (strict mode lists all).
        nullable: whether the column may hold null here (Optional type, or a key that may be absent).
    """

    key: str
    attr: str
    node: "Node"
    required: bool
    nullable: bool


@dataclasses.dataclass(frozen=True, eq=False)
class Node:
    """One type in a return format.

    ``kind`` is one of object, array, map, string, integer, number, boolean, date, datetime, time, enum.
    ``constraints`` holds JSON-schema validation keywords (``minimum``, ``pattern``, ...); which of them
    reach the server is decided in json_schema.py. ``source`` says how a validated value is read:
    "model"/"dataclass" (attributes), "dict" (keys), "" for non-objects; ``root_model`` marks a
    Pydantic RootModel whose validated instance must be unwrapped (``.root``) first.
    """

    kind: str
    nullable: bool = False
    description: str | None = None
    title: str | None = None
    constraints: tuple = ()
    fields: tuple = ()
    closed: bool = True
    item: "Node | None" = None
    choices: tuple = ()
    value_kind: str = ""
    tz: str | None = None
    source: str = ""
    decimal: bool = False
    root_model: bool = False

    @property
    def keywords(self) -> dict:
        return dict(self.constraints)


@dataclasses.dataclass(frozen=True, eq=False)
class Spec:
    """A parsed return format: its tree, how to name it, and how to validate it.

    Parameters:
        root: the tree.
        name: a name matching OpenAI's ``^[a-zA-Z0-9_-]{1,64}$``.
        label: the model's own name for error messages ("Invoice", "schema", ...).
        python_type: the annotation to validate with Pydantic, or None for JSON-schema dicts.
        wrapper_key: for a root that is not an object, the key it is wrapped under in the JSON schema
            ("label" for choices, "value" otherwise); None for object roots.
    """

    root: Node
    name: str
    label: str
    python_type: Any
    wrapper_key: str | None

    @property
    def is_label(self) -> bool:
        return self.root.kind == "enum"


def build_spec(return_format: Any) -> Spec:
    """Parse any accepted return format into a :class:`Spec`; raises PlanError when it cannot be mapped.

    Parameters:
        return_format: a Pydantic v2 model class, a JSON-schema dict, ``Literal[...]``, an ``Enum``
            subclass, a list/tuple of choices, or another annotation built from supported types.

    Example:
        >>> build_spec(["a", "b"]).root.choices
        ('a', 'b')
        >>> spec = build_spec(["a", "b"]); build_spec(spec) is spec   # parsed once: a Spec is taken as it is
        True
    """
    if isinstance(return_format, Spec):
        return return_format
    if isinstance(return_format, dict):
        schema = return_format
        # Accept OpenAI's own {"name", "schema", "strict"} wrapper too.
        if isinstance(schema.get("schema"), dict) and "type" not in schema and "properties" not in schema:
            schema = schema["schema"]
        title = schema.get("title") if isinstance(schema.get("title"), str) else None
        label = title or "schema"
        root = _SchemaWalker(schema, label).walk(schema, label, ())
        name = _safe_name(title or "response")
        py = None
    elif isinstance(return_format, (list, tuple)) and not _is_annotation(return_format):
        choices = _check_choices(list(return_format), "choices", "choices")
        root = Node("enum", choices=choices, value_kind=_value_kind(choices, "choices", "choices"))
        name, label, py = "choice", "choices", typing.Literal[tuple(choices)]  # type: ignore[valid-type]
    else:
        if not (isinstance(return_format, type) or _is_annotation(return_format)
                or type(return_format).__name__ == "TypeAliasType"):
            raise PlanError(
                f"return_format={return_format!r} ({type(return_format).__name__}) is not a format. Fix: pass a "
                "Pydantic model class, a JSON-schema dict, typing.Literal[...], an Enum subclass or a list of choices.")
        label = _type_name(return_format)
        root = _PyWalker(label).walk(return_format, label, ())
        py = return_format
        if isinstance(return_format, type):
            name = _safe_name(return_format.__name__)
        elif typing.get_origin(_strip_annotated(return_format)) is typing.Literal:
            name = "choice"
        else:
            name = "response"
    wrapper = None if root.kind == "object" and not root.nullable else ("label" if root.kind == "enum" else "value")
    return Spec(root=root, name=name, label=label, python_type=py, wrapper_key=wrapper)


def plan_error(path: str, type_text: str, reason: str, fix: str) -> PlanError:
    """The one message shape for unmappable types: what, where, why, and what to do instead."""
    return PlanError(f"Cannot map field '{path}' of type {type_text} to a column type: {reason}. Fix: {fix}.")


def _safe_name(name: str) -> str:
    cleaned = _NAME_BAD.sub("_", name).strip("_")[:64]
    return cleaned or "response"


def _is_annotation(x: Any) -> bool:
    return typing.get_origin(x) is not None


def _type_name(tp: Any) -> str:
    if isinstance(tp, type) and typing.get_origin(tp) is None and not isinstance(tp, types.GenericAlias):
        return tp.__qualname__ if "<locals>" not in tp.__qualname__ else tp.__name__
    text = repr(tp)
    return text.replace("typing.", "").replace("typing_extensions.", "")


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _check_choices(choices: list, path: str, type_text: str) -> tuple:
    if not choices:
        raise plan_error(path, type_text, "there are no choices", "give at least one choice")
    values = [c.value if isinstance(c, enum.Enum) else c for c in choices]
    if len(set(map(repr, values))) != len(values):
        raise plan_error(path, type_text, f"the choices {values!r} repeat a value", "list each choice once")
    return tuple(values)


def _value_kind(values: tuple, path: str, type_text: str) -> str:
    kinds = {type(v) for v in values}
    if kinds == {str}:
        return "string"
    if kinds == {int}:
        return "integer"
    if kinds == {bool}:
        return "boolean"
    raise plan_error(path, type_text, f"its values {list(values)!r} are not all strings, all integers or all booleans",
                     "use choices of one type (strings are usual)")


def _doc(cls: type) -> str | None:
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or not doc.strip():
        return None
    doc = inspect.cleandoc(doc)
    # dataclasses invent "Name(a: int, ...)" and Enum an "An enumeration." docstring; neither helps a model.
    if doc.startswith(cls.__name__ + "(") or doc == "An enumeration.":
        return None
    return doc


# --- constraints -----------------------------------------------------------------------------------

_NUMERIC = MappingProxyType({"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum",
            "multiple_of": "multipleOf"})
_STRING = MappingProxyType({"min_length": "minLength", "max_length": "maxLength", "pattern": "pattern"})
_ARRAY = MappingProxyType({"min_length": "minItems", "max_length": "maxItems"})


def _collect_meta(meta: list) -> tuple[dict, str | None, str | None]:
    """Constraint values, description and title found in Annotated / FieldInfo metadata."""
    found: dict = {}
    description = title = None
    for m in meta:
        if m is None:
            continue
        if isinstance(m, pydantic.fields.FieldInfo):
            description = m.description or description
            title = m.title or title
            inner, _, _ = _collect_meta(list(m.metadata))
            found.update(inner)
            continue
        for attr in ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "pattern"):
            value = getattr(m, attr, None)
            if value is not None and not callable(value):
                found[attr] = value.pattern if isinstance(value, re.Pattern) else value
    return found, description, title


def _apply_meta(node: Node, found: dict) -> Node:
    if not found:
        return node
    if node.kind in ("integer", "number"):
        table = _NUMERIC
    elif node.kind == "string":
        table = _STRING
    elif node.kind == "array":
        table = _ARRAY
    else:
        return node
    extra = {table[k]: v for k, v in found.items() if k in table}
    if not extra:
        return node
    merged = dict(node.constraints)
    merged.update(extra)
    return dataclasses.replace(node, constraints=tuple(merged.items()))


# --- Python annotations --------------------------------------------------------------------------

_SCALARS: MappingProxyType[Any, Node] = MappingProxyType({
    str: Node("string"),
    int: Node("integer"),
    float: Node("number"),
    bool: Node("boolean"),
    decimal.Decimal: Node("number", decimal=True),
    datetime.date: Node("date"),
    datetime.datetime: Node("datetime"),
    datetime.time: Node("time"),
    uuid.UUID: Node("string", constraints=(("format", "uuid"),)),
    pydantic.AwareDatetime: Node("datetime", tz="UTC"),
    pydantic.NaiveDatetime: Node("datetime"),
    pydantic.PastDatetime: Node("datetime"),
    pydantic.FutureDatetime: Node("datetime"),
    pydantic.PastDate: Node("date"),
    pydantic.FutureDate: Node("date"),
})

_SET_ORIGINS = frozenset({set, frozenset, collections.abc.Set, collections.abc.MutableSet})
_SEQUENCE_ORIGINS = frozenset({list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Collection,
                     collections.abc.Iterable} | _SET_ORIGINS)
_MAPPING_ORIGINS = frozenset({dict, collections.abc.Mapping, collections.abc.MutableMapping})

_UNSUPPORTED_REASONS = MappingProxyType({
    bytes: ("binary data cannot be written as JSON text", "use str (for example base64 text) and decode it later"),
    bytearray: ("binary data cannot be written as JSON text", "use str (for example base64 text) and decode it later"),
    datetime.timedelta: ("durations have no agreed JSON form", "use a number of seconds (float) or an ISO 8601 str"),
    object: ("object has no fixed shape", "give the field a concrete type such as str, int or a nested model"),
    type(None): ("a field that is always null carries no data", "remove it, or use Optional[X]"),
})


class _PyWalker:
    """Turns Python annotations into Nodes; one instance per return format, so recursion is caught."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.stack: list[type] = []

    def walk(self, tp: Any, path: str, meta: tuple) -> Node:
        found, description, title = _collect_meta(list(meta))
        node = self._walk(tp, path, found)
        if description or title:
            node = dataclasses.replace(node, description=description or node.description, title=title or node.title)
        return node

    def _walk(self, tp: Any, path: str, found: dict) -> Node:
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        type_text = _type_name(tp)

        if origin is typing.Annotated:
            inner_found, description, title = _collect_meta(list(tp.__metadata__))
            node = self._walk(args[0], path, {**inner_found, **found})
            if description or title:
                node = dataclasses.replace(node, description=description or node.description,
                                           title=title or node.title)
            return node
        if origin in (typing.Required, typing.NotRequired, typing.ClassVar) or getattr(tp, "__supertype__", None):
            return self._walk(args[0] if args else tp.__supertype__, path, found)
        if hasattr(tp, "__value__") and type(tp).__name__ == "TypeAliasType":
            return self._walk(tp.__value__, path, found)
        if origin in (typing.Union, types.UnionType):
            non_null = [a for a in args if a is not type(None)]
            if len(non_null) != 1:
                raise plan_error(path, type_text, "a union of several non-null types has no single column type",
                                 "use one type, or Optional[X] when the value may be missing")
            return dataclasses.replace(self._walk(non_null[0], path, found), nullable=True)
        if origin is typing.Literal:
            values = list(args)
            nullable = None in values
            values = [v for v in values if v is not None]
            choices = _check_choices(values, path, type_text)
            return Node("enum", choices=choices, value_kind=_value_kind(choices, path, type_text), nullable=nullable)
        if tp is typing.Any:
            raise plan_error(path, type_text, "Any has no fixed shape",
                             "give the field a concrete type such as str, int, float or a nested model")
        if isinstance(tp, typing.TypeVar):
            raise plan_error(path, type_text, "an unbound type variable has no fixed shape",
                             "parametrize the generic model, e.g. Page[Item]")
        if origin in _SEQUENCE_ORIGINS:
            if not args:
                raise plan_error(path, type_text, "the element type is unknown", "annotate it, e.g. list[str]")
            item = self._walk(args[0], path + "[]", {})
            node = Node("array", item=item)
            if origin in _SET_ORIGINS:
                node = dataclasses.replace(node, constraints=(("uniqueItems", True),))
            return _apply_meta(node, found)
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return _apply_meta(Node("array", item=self._walk(args[0], path + "[]", {})), found)
            if args and len(set(args)) == 1:
                node = Node("array", item=self._walk(args[0], path + "[]", {}),
                            constraints=(("minItems", len(args)), ("maxItems", len(args))))
                return node
            raise plan_error(path, type_text, "a tuple of mixed element types has no single list type",
                             "use a nested model with named fields, or tuple[X, ...]")
        if origin in _MAPPING_ORIGINS:
            if len(args) != 2:
                raise plan_error(path, type_text, "the key and value types are unknown",
                                 "annotate it, e.g. dict[str, int]")
            if _strip_annotated(args[0]) is not str:
                raise plan_error(path, type_text, "JSON object keys are always strings",
                                 "use dict[str, X]")
            return Node("map", item=self._walk(args[1], path + "{}", {}))
        if tp in (list, set, frozenset, tuple, dict):
            raise plan_error(path, type_text, "the element type is unknown",
                             "annotate it, e.g. list[str] or dict[str, int]")
        if tp in _SCALARS:
            return _apply_meta(_SCALARS[tp], found)
        if tp in _UNSUPPORTED_REASONS:
            reason, fix = _UNSUPPORTED_REASONS[tp]
            raise plan_error(path, type_text, reason, fix)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            members = list(tp)
            choices = _check_choices([m.value for m in members], path, type_text)
            return Node("enum", choices=choices, value_kind=_value_kind(choices, path, type_text), description=_doc(tp))
        if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
            return self._model(tp, path)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self._dataclass(tp, path)
        if typing.is_typeddict(tp):
            return self._typeddict(tp, path)
        if isinstance(tp, type) and issubclass(tp, str) and not issubclass(tp, enum.Enum):
            return _apply_meta(Node("string"), found)
        raise plan_error(path, type_text,
                         "it is not a Pydantic model, dataclass, TypedDict, Enum, Literal or a JSON scalar type",
                         "use a BaseModel subclass or a supported type (str, int, float, bool, date, datetime, "
                         "list[X], dict[str, X], Optional[X])")

    def _enter(self, cls: type, path: str) -> None:
        if cls in self.stack:
            raise plan_error(path, _type_name(cls), "the model refers to itself, and Arrow types cannot be recursive",
                             "unroll the recursion to a fixed depth with separate models")
        self.stack.append(cls)

    def _object(self, cls: type, fields: list, source: str, path_prefix: str) -> Node:
        keys = [f.key for f in fields]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise plan_error(path_prefix, _type_name(cls), f"several fields are written under the JSON key(s) {dupes}",
                             "give each field its own alias")
        if not fields:
            raise plan_error(path_prefix, _type_name(cls), "it has no fields, and Arrow structs need at least one",
                             "add a field")
        return Node("object", fields=tuple(fields), source=source, title=cls.__name__, description=_doc(cls))

    def _model(self, cls: type, path: str) -> Node:
        if not cls.__pydantic_complete__:
            try:
                cls.model_rebuild()
            except Exception as e:  # noqa: BLE001 - pydantic raises several kinds for unresolved names
                first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise PlanError(f"The model {cls.__name__} has unresolved type hints ({first_line}). Fix: define the "
                                f"referenced types first, then call {cls.__name__}.model_rebuild().") from e
        if issubclass(cls, pydantic.RootModel):
            info = cls.model_fields["root"]
            self._enter(cls, path)
            try:
                node = self.walk(info.annotation, path, tuple(info.metadata) + (info,))
            finally:
                self.stack.pop()
            return dataclasses.replace(node, root_model=True)
        self._enter(cls, path)
        try:
            fields = []
            for name, info in cls.model_fields.items():
                key = _json_key(name, info)
                node = self.walk(info.annotation, f"{path}.{key}", tuple(info.metadata) + (info,))
                required = info.is_required()
                null_default = not required and info.default_factory is None and info.default is None
                fields.append(Field(key=key, attr=name, node=node, required=required,
                                    nullable=node.nullable or null_default))
            return self._object(cls, fields, "model", path)
        finally:
            self.stack.pop()

    def _dataclass(self, cls: type, path: str) -> Node:
        self._enter(cls, path)
        try:
            fields = []
            pyd_fields = getattr(cls, "__pydantic_fields__", None)
            hints = typing.get_type_hints(cls, include_extras=True)
            for f in dataclasses.fields(cls):
                info = pyd_fields.get(f.name) if pyd_fields else None
                if info is not None:
                    key = _json_key(f.name, info)
                    node = self.walk(info.annotation, f"{path}.{key}", tuple(info.metadata) + (info,))
                    required = info.is_required()
                    default = info.default
                else:
                    key = f.name
                    node = self.walk(hints[f.name], f"{path}.{key}", ())
                    required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                    default = None if f.default is dataclasses.MISSING else f.default
                null_default = not required and default is None
                fields.append(Field(key=key, attr=f.name, node=node, required=required,
                                    nullable=node.nullable or null_default))
            return self._object(cls, fields, "dataclass", path)
        finally:
            self.stack.pop()

    def _typeddict(self, cls: type, path: str) -> Node:
        self._enter(cls, path)
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
            required_keys = getattr(cls, "__required_keys__", frozenset(hints))
            fields = []
            for name, hint in hints.items():
                node = self.walk(hint, f"{path}.{name}", ())
                required = name in required_keys
                # With postponed annotations Python cannot see NotRequired when building __required_keys__.
                marker = typing.get_origin(_strip_annotated(hint))
                if marker is typing.NotRequired:
                    required = False
                elif marker is typing.Required:
                    required = True
                fields.append(Field(key=name, attr=name, node=node, required=required,
                                    nullable=node.nullable or not required))
            return self._object(cls, fields, "dict", path)
        finally:
            self.stack.pop()


def _json_key(name: str, info: pydantic.fields.FieldInfo) -> str:
    """The key the model must write: the (first) validation alias, else the alias, else the field name."""
    va = info.validation_alias
    if isinstance(va, str):
        return va
    if isinstance(va, pydantic.AliasChoices) and va.choices and isinstance(va.choices[0], str):
        return va.choices[0]
    if isinstance(info.alias, str):
        return info.alias
    return name


# --- JSON-schema dicts -----------------------------------------------------------------------------

_KEEP_STRING = ("minLength", "maxLength", "pattern", "format")
_KEEP_NUMBER = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_KEEP_ARRAY = ("minItems", "maxItems", "uniqueItems")
_TYPE_NAMES = frozenset({"string", "integer", "number", "boolean", "object", "array", "null"})
_ANY_REASON = "a schema without a type accepts any value, which has no fixed column type"
_ANY_FIX = "give it a \"type\" (string, integer, number, boolean, object or array)"


class _SchemaWalker:
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

    def _walk(self, s: Any, path: str) -> Node:
        text = _short_json(s)
        if s is True or s == {} or not isinstance(s, dict):
            raise plan_error(path, text, _ANY_REASON, _ANY_FIX)
        if "$ref" in s:
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
            choices = _check_choices(values, path, text)
            kind = _value_kind(choices, path, text)
            if kind == "integer" and typ == "number":
                kind = "integer"
            return done(Node("enum", choices=choices, value_kind=kind, nullable=nullable))
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
            return done(self._object(s, path, text, nullable))
        if typ == "array":
            if "prefixItems" in s or isinstance(s.get("items"), list):
                raise plan_error(path, text, "tuple-style arrays (prefixItems) mix element types",
                                 "use one \"items\" schema, or an object with named properties")
            if "items" not in s:
                raise plan_error(path, text, "the element type is unknown", "add an \"items\" schema")
            item = self._walk(s["items"], path + "[]")
            return done(Node("array", item=item, nullable=nullable, constraints=_kept(s, _KEEP_ARRAY)))
        if typ == "string":
            fmt = s.get("format")
            kind = {"date": "date", "date-time": "datetime", "time": "time"}.get(fmt, "string")
            keep = _KEEP_STRING if kind == "string" else ()
            return done(Node(kind, nullable=nullable, constraints=_kept(s, keep)))
        if typ in ("integer", "number"):
            return done(Node(typ, nullable=nullable, constraints=_kept(s, _KEEP_NUMBER)))
        return done(Node("boolean", nullable=nullable))

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
