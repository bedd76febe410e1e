"""The tree one return format is parsed into (``Node``, ``Field``, ``Spec``) and the checks both parsers share.

``_spec.build_spec`` fills it from a Python annotation (``from_python``) or a JSON-schema dict
(``from_schema``); the Arrow type, the strict JSON schema and the validator are all read off it.

Example:
    >>> Node("enum", labels=("yes", "no")).labels
    ('yes', 'no')
    >>> check_choices(["a", "b"], "choices", "choices")
    ('a', 'b')
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from typing import Any

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
    labels: tuple = ()
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



def plan_error(path: str, type_text: str, reason: str, fix: str) -> PlanError:
    """The one message shape for unmappable types: what, where, why, and what to do instead."""
    return PlanError(f"Cannot map field '{path}' of type {type_text} to a column type: {reason}. Fix: {fix}.")


def safe_name(name: str) -> str:
    cleaned = _NAME_BAD.sub("_", name).strip("_")[:64]
    return cleaned or "response"


def is_annotation(x: Any) -> bool:
    return typing.get_origin(x) is not None


def type_name(tp: Any) -> str:
    if isinstance(tp, type) and typing.get_origin(tp) is None and not isinstance(tp, types.GenericAlias):
        return tp.__qualname__ if "<locals>" not in tp.__qualname__ else tp.__name__
    text = repr(tp)
    return text.replace("typing.", "").replace("typing_extensions.", "")


def strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def check_choices(labels: list, path: str, type_text: str) -> tuple:
    if not labels:
        raise plan_error(path, type_text, "there are no choices", "give at least one choice")
    values = [c.value if isinstance(c, enum.Enum) else c for c in labels]
    if len(set(map(repr, values))) != len(values):
        raise plan_error(path, type_text, f"the choices {values!r} repeat a value", "list each choice once")
    return tuple(values)


def choice_value_kind(values: tuple, path: str, type_text: str) -> str:
    kinds = {type(v) for v in values}
    if kinds == {str}:
        return "string"
    if kinds == {int}:
        return "integer"
    if kinds == {bool}:
        return "boolean"
    raise plan_error(path, type_text, f"its values {list(values)!r} are not all strings, all integers or all booleans",
                     "use choices of one type (strings are usual)")

