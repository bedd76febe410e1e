"""One normalized description of a return format, shared by the Arrow, JSON-schema and validation code.

Every accepted ``return_format`` (a Pydantic model, a JSON-schema dict, a ``Literal``, an ``Enum``, a
list of choices, or any other annotation built from supported types) is turned into a tree of
:class:`Node` once. Deriving the Arrow type, the strict JSON schema and the validator from the same
tree is what keeps the three in agreement: the column has exactly the fields the server is told to
produce, under the same names.

Example:
    >>> from typing import Literal
    >>> spec = build_spec(Literal["yes", "no"])
    >>> spec.root.kind, spec.root.labels
    ('enum', ('yes', 'no'))
"""

from __future__ import annotations

import typing
from typing import Any

from inferframe.errors import PlanError
from inferframe.structured.from_python import PyWalker
from inferframe.structured.from_schema import SchemaWalker
from inferframe.structured.nodes import (OPENAI_STRING_FORMATS, Field, Node, Spec, check_choices, is_annotation,
                                         safe_name, strip_annotated, type_name, choice_value_kind, plan_error)

__all__ = ["OPENAI_STRING_FORMATS", "Field", "Node", "Spec", "build_spec", "plan_error"]


def build_spec(return_format: Any) -> Spec:
    """Parse any accepted return format into a :class:`Spec`; raises PlanError when it cannot be mapped.

    Parameters:
        return_format: a Pydantic v2 model class, a JSON-schema dict, ``Literal[...]``, an ``Enum``
            subclass, a list/tuple of choices, or another annotation built from supported types.

    Example:
        >>> build_spec(["a", "b"]).root.labels
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
        root = SchemaWalker(schema, label).walk(schema, label, ())
        name = safe_name(title or "response")
        py = None
    elif isinstance(return_format, (list, tuple)) and not is_annotation(return_format):
        labels = check_choices(list(return_format), "choices", "choices")
        root = Node("enum", labels=labels, value_kind=choice_value_kind(labels, "choices", "choices"))
        name, label, py = "choice", "choices", typing.Literal[tuple(labels)]  # type: ignore[valid-type]
    else:
        if not (isinstance(return_format, type) or is_annotation(return_format)
                or type(return_format).__name__ == "TypeAliasType"):
            raise PlanError(
                f"return_format={return_format!r} ({type(return_format).__name__}) is not a format. Fix: pass a "
                "Pydantic model class, a JSON-schema dict, typing.Literal[...], an Enum subclass or a list of choices.")
        label = type_name(return_format)
        root = PyWalker(label).walk(return_format, label, ())
        py = return_format
        if isinstance(return_format, type):
            name = safe_name(return_format.__name__)
        elif typing.get_origin(strip_annotated(return_format)) is typing.Literal:
            name = "choice"
        else:
            name = "response"
    wrapper = None if root.kind == "object" and not root.nullable else ("label" if root.kind == "enum" else "value")
    return Spec(root=root, name=name, label=label, python_type=py, wrapper_key=wrapper)

