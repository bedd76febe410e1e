"""The built-in checker for JSON-schema-dict return formats: validates a parsed answer against its
``Node`` tree with JSON-schema semantics (types, ``required``, ``enum``/``const``, closed objects, numeric
bounds, string length and ``pattern``, array length, date formats; no coercion) and converts it to the
value its Arrow column holds. Pydantic formats are checked by Pydantic instead (``validate``)."""

from __future__ import annotations

import datetime
import re
from types import MappingProxyType
from typing import Any

from inferframe.structured._spec import Node

__all__ = ["check_value", "pairs_to_dict", "to_column_datetime"]

_NO = object()


def pairs_to_dict(data: Any) -> Any:
    """A ``[{"key": ..., "value": ...}]`` list (how strict schemas spell a map) as a dict; anything else as is."""
    if isinstance(data, list) and all(isinstance(x, dict) and "key" in x and set(x) <= {"key", "value"} for x in data):
        return {str(x["key"]): x.get("value") for x in data}
    return data


def to_column_datetime(node: Node, value: datetime.datetime) -> datetime.datetime:
    """``value`` as the datetime column of ``node`` holds it: UTC-aware when the column has a zone, else naive."""
    if value.tzinfo is None:
        return value.replace(tzinfo=datetime.timezone.utc) if node.tz else value
    utc = value.astimezone(datetime.timezone.utc)
    # A plain datetime column is naive; storing UTC keeps mixed-offset answers comparable.
    return utc if node.tz else utc.replace(tzinfo=None)


_EXPECT = MappingProxyType({"object": "an object", "array": "a list", "map": "an object", "string": "a valid string",
           "integer": "a valid integer", "number": "a valid number", "boolean": "a valid boolean",
           "date": "a valid date (YYYY-MM-DD)", "datetime": "a valid date-time (ISO 8601)",
           "time": "a valid time (HH:MM:SS)"})


def check_value(node: Node, value: Any, loc: tuple, errors: list) -> Any:
    """Validate ``value`` against ``node`` (JSON-schema semantics, no coercion) and convert it.

    Each failure is appended to ``errors`` as (location, message); the failing part converts to None.
    """
    if value is None:
        if node.nullable:
            return None
        return _fail(errors, loc, f"Input should be {_expected(node)}")
    kind = node.kind
    if kind == "object":
        return _check_object(node, value, loc, errors)
    if kind == "array":
        return _check_array(node, value, loc, errors)
    if kind == "map":
        value = pairs_to_dict(value)
        if not isinstance(value, dict):
            return _fail(errors, loc, "Input should be an object")
        return {k: check_value(node.item, v, loc + (k,), errors) for k, v in value.items()}
    if kind == "enum":
        found = value if _same_kind(node, value) and value in node.labels else _NO
        if found is _NO and node.value_kind == "string" and isinstance(value, str):
            folded = [c for c in node.labels if c.casefold() == value.strip().casefold()]
            found = folded[0] if len(folded) == 1 else _NO
        if found is _NO:
            return _fail(errors, loc, f"Input should be {_or_list(node.labels)}")
        return found
    if kind == "boolean":
        return value if isinstance(value, bool) else _fail(errors, loc, "Input should be a valid boolean")
    if kind in ("integer", "number"):
        return _check_number(node, value, loc, errors)
    if not isinstance(value, str):
        return _fail(errors, loc, f"Input should be {_expected(node)}")
    if kind == "string":
        return _check_string(node.keywords, value, loc, errors)
    try:
        if kind == "date":
            return datetime.date.fromisoformat(value)
        if kind == "datetime":
            return to_column_datetime(node, datetime.datetime.fromisoformat(value))
        parsed = datetime.time.fromisoformat(value)
        return parsed.replace(tzinfo=None)
    except ValueError:
        return _fail(errors, loc, f"Input should be {_expected(node)}")


def _check_object(node: Node, value: Any, loc: tuple, errors: list) -> Any:
    if not isinstance(value, dict):
        return _fail(errors, loc, "Input should be an object")
    out = {}
    for f in node.fields:
        if f.key not in value:
            if f.required:
                _fail(errors, loc + (f.key,), "Field required")
            out[f.key] = None
            continue
        out[f.key] = check_value(f.node, value[f.key], loc + (f.key,), errors)
    if node.closed:
        known = {f.key for f in node.fields}
        for k in value:
            if k not in known:
                _fail(errors, loc + (k,), "Extra inputs are not permitted")
    return out


def _check_array(node: Node, value: Any, loc: tuple, errors: list) -> Any:
    kw = node.keywords
    if not isinstance(value, list):
        return _fail(errors, loc, "Input should be a list")
    if "minItems" in kw and len(value) < kw["minItems"]:
        _fail(errors, loc, f"List should have at least {kw['minItems']} items")
    if "maxItems" in kw and len(value) > kw["maxItems"]:
        _fail(errors, loc, f"List should have at most {kw['maxItems']} items")
    return [check_value(node.item, x, loc + (i,), errors) for i, x in enumerate(value)]


def _check_number(node: Node, value: Any, loc: tuple, errors: list) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _fail(errors, loc, f"Input should be {_expected(node)}")
    if node.kind == "integer":
        if isinstance(value, float) and not value.is_integer():
            return _fail(errors, loc, "Input should be a valid integer, got a number with a fractional part")
        value = int(value)
    else:
        value = float(value)
    _check_bounds(value, node.keywords, loc, errors)
    return value


def _check_string(kw: dict, value: str, loc: tuple, errors: list) -> str:
    if "minLength" in kw and len(value) < kw["minLength"]:
        _fail(errors, loc, f"String should have at least {kw['minLength']} characters")
    if "maxLength" in kw and len(value) > kw["maxLength"]:
        _fail(errors, loc, f"String should have at most {kw['maxLength']} characters")
    if "pattern" in kw:
        try:
            ok = re.search(kw["pattern"], value) is not None
        except re.error:
            ok = True   # a pattern Python cannot compile is the schema's problem, not the answer's
        if not ok:
            _fail(errors, loc, f"String should match pattern '{kw['pattern']}'")
    return value


def _check_bounds(value: float, kw: dict, loc: tuple, errors: list) -> None:
    tests = (("minimum", lambda b: value >= b, "greater than or equal to"),
             ("maximum", lambda b: value <= b, "less than or equal to"),
             ("exclusiveMinimum", lambda b: value > b, "greater than"),
             ("exclusiveMaximum", lambda b: value < b, "less than"))
    for key, ok, words in tests:
        if key in kw and not ok(kw[key]):
            _fail(errors, loc, f"Input should be {words} {kw[key]}")
    step = kw.get("multipleOf")
    if step and abs(value / step - round(value / step)) > 1e-9:
        _fail(errors, loc, f"Input should be a multiple of {step}")


def _same_kind(node: Node, value: Any) -> bool:
    if node.value_kind == "boolean":
        return isinstance(value, bool)
    if node.value_kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str)


def _expected(node: Node) -> str:
    if node.kind == "enum":
        return _or_list(node.labels)
    return _EXPECT[node.kind]


def _or_list(labels: tuple) -> str:
    shown = [repr(c) for c in labels[:12]]
    if len(labels) > 12:
        shown.append(f"... ({len(labels)} in all)")
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _fail(errors: list, loc: tuple, msg: str) -> None:
    errors.append((loc, msg))
    return None
