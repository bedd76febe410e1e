"""Python annotations (Pydantic models, dataclasses, TypedDicts, Literal, Enum, containers) to a ``Node`` tree.

Example:
    >>> PyWalker("list[int]").walk(list[int], "list[int]", ()).item.kind
    'integer'
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import decimal
import enum
import inspect
import re
import types
import typing
import uuid
from types import MappingProxyType
from typing import Any

import pydantic

from inferframe.errors import PlanError
from inferframe.structured.nodes import (Field, Node, check_choices, strip_annotated, type_name, choice_value_kind,
                                         plan_error)


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


class PyWalker:
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
        type_text = type_name(tp)

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
            labels = check_choices(values, path, type_text)
            return Node("enum", labels=labels, value_kind=choice_value_kind(labels, path, type_text), nullable=nullable)
        if tp is typing.Any:
            raise plan_error(path, type_text, "Any has no fixed shape",
                             "give the field a concrete type such as str, int, float or a nested model")
        if isinstance(tp, typing.TypeVar):
            raise plan_error(path, type_text, "an unbound type variable has no fixed shape",
                             "parametrize the generic model, e.g. Page[Item]")
        if origin in _SEQUENCE_ORIGINS or origin is tuple or origin in _MAPPING_ORIGINS:
            return self._container(origin, args, path, type_text, found)
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
            labels = check_choices([m.value for m in members], path, type_text)
            return Node("enum", labels=labels, value_kind=choice_value_kind(labels, path, type_text), description=_doc(tp))
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
            raise plan_error(path, type_name(cls), "the model refers to itself, and Arrow types cannot be recursive",
                             "unroll the recursion to a fixed depth with separate models")
        self.stack.append(cls)

    def _object(self, cls: type, fields: list, source: str, path_prefix: str) -> Node:
        keys = [f.key for f in fields]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise plan_error(path_prefix, type_name(cls), f"several fields are written under the JSON key(s) {dupes}",
                             "give each field its own alias")
        if not fields:
            raise plan_error(path_prefix, type_name(cls), "it has no fields, and Arrow structs need at least one",
                             "add a field")
        return Node("object", fields=tuple(fields), source=source, title=cls.__name__, description=_doc(cls))

    def _container(self, origin: Any, args: tuple, path: str, type_text: str, found: dict) -> Node:
        """A list, set, tuple or mapping annotation as an array or map node."""
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
        if len(args) != 2:
            raise plan_error(path, type_text, "the key and value types are unknown",
                             "annotate it, e.g. dict[str, int]")
        if strip_annotated(args[0]) is not str:
            raise plan_error(path, type_text, "JSON object keys are always strings",
                             "use dict[str, X]")
        return Node("map", item=self._walk(args[1], path + "{}", {}))

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
                marker = typing.get_origin(strip_annotated(hint))
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


