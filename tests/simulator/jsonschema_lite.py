"""Schema validation for the tests: ``jsonschema`` when installed, else a small validator.

The fallback covers what schema_gen supports: type (list too), enum, const,
properties/required/additionalProperties, items/prefixItems/minItems/maxItems/
uniqueItems, anyOf/oneOf/allOf, $ref (local), string length/format-free,
number bounds/multipleOf.
"""

from __future__ import annotations

from typing import Any

try:  # pragma: no cover - environment dependent
    import jsonschema as _js
except ImportError:  # pragma: no cover
    _js = None

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def validate(instance: Any, schema: Any) -> None:
    """Raise AssertionError when ``instance`` does not conform to ``schema``."""
    if _js is not None:
        try:
            _js.validate(instance, schema)
        except _js.ValidationError as exc:  # pragma: no cover
            raise AssertionError(str(exc)) from None
        return
    _check(instance, schema, schema, "$")


def _resolve(root: Any, ref: str) -> Any:
    node = root
    for part in [p for p in ref[1:].split("/") if p]:
        node = node[part]
    return node


def _ok(instance: Any, schema: Any, root: Any) -> bool:
    try:
        _check(instance, schema, root, "$")
        return True
    except AssertionError:
        return False


def _check(v: Any, s: Any, root: Any, path: str) -> None:
    if s is True or s == {}:
        return
    assert isinstance(s, dict), f"{path}: bad schema {s!r}"
    if "$ref" in s:
        _check(v, _resolve(root, s["$ref"]), root, path)
    for sub in s.get("allOf", ()):
        _check(v, sub, root, path)
    if "anyOf" in s:
        assert any(_ok(v, sub, root) for sub in s["anyOf"]), f"{path}: matches no anyOf branch: {v!r}"
    if "oneOf" in s:
        n = sum(_ok(v, sub, root) for sub in s["oneOf"])
        assert n == 1, f"{path}: matches {n} oneOf branches: {v!r}"
    if "const" in s:
        assert v == s["const"], f"{path}: {v!r} != const {s['const']!r}"
    if "enum" in s:
        assert v in s["enum"], f"{path}: {v!r} not in enum {s['enum']!r}"
    t = s.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        assert any(_TYPES[x](v) for x in types), f"{path}: {v!r} is not of type {t}"
    if isinstance(v, dict):
        props = s.get("properties", {})
        for name in s.get("required", ()):
            assert name in v, f"{path}: missing required {name!r}"
        for name, sub in props.items():
            if name in v:
                _check(v[name], sub, root, f"{path}.{name}")
        extra = s.get("additionalProperties", True)
        for name in v:
            if name not in props:
                assert extra is not False, f"{path}: unexpected property {name!r}"
                if isinstance(extra, dict):
                    _check(v[name], extra, root, f"{path}.{name}")
    if isinstance(v, list):
        if "minItems" in s:
            assert len(v) >= s["minItems"], f"{path}: fewer than minItems"
        if "maxItems" in s:
            assert len(v) <= s["maxItems"], f"{path}: more than maxItems"
        prefix = s.get("prefixItems", [])
        for i, x in enumerate(v):
            sub = prefix[i] if i < len(prefix) else s.get("items", {})
            _check(x, sub, root, f"{path}[{i}]")
        if s.get("uniqueItems"):
            seen = []
            for x in v:
                assert x not in seen, f"{path}: duplicate item {x!r}"
                seen.append(x)
    if isinstance(v, str):
        if "minLength" in s:
            assert len(v) >= s["minLength"], f"{path}: shorter than minLength"
        if "maxLength" in s:
            assert len(v) <= s["maxLength"], f"{path}: longer than maxLength"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in s:
            assert v >= s["minimum"], f"{path}: {v} < minimum"
        if "maximum" in s:
            assert v <= s["maximum"], f"{path}: {v} > maximum"
        if "exclusiveMinimum" in s:
            assert v > s["exclusiveMinimum"], f"{path}: {v} <= exclusiveMinimum"
        if "exclusiveMaximum" in s:
            assert v < s["exclusiveMaximum"], f"{path}: {v} >= exclusiveMaximum"
        if s.get("multipleOf"):
            q = v / s["multipleOf"]
            assert abs(q - round(q)) < 1e-9, f"{path}: {v} not a multiple of {s['multipleOf']}"
