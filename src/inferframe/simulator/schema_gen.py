"""Deterministic JSON value generation from a JSON Schema (the subset Structured Outputs uses).

Supports: type (incl. lists such as ["string", "null"]), enum, const, properties
/ required / additionalProperties, items / prefixItems / minItems / maxItems /
uniqueItems, anyOf / oneOf / allOf, $ref into $defs / definitions (recursion
is cut off by depth), string minLength / maxLength / format (date-time, date,
time, email, uri, uuid, ipv4, ipv6, hostname, duration), number / integer
minimum / maximum / exclusiveMinimum / exclusiveMaximum / multipleOf, boolean, null.
Every property is generated (optional ones too, except deep in recursion).
Arrays get 1-2 items unless the bounds say otherwise.

Example (the same seed gives the same value):
    >>> generate({"type": "object", "properties": {"label": {"enum": ["pos", "neg"]},
    ...           "score": {"type": "number", "minimum": 0, "maximum": 1}},
    ...           "required": ["label", "score"]}, seed=3)
    {'label': 'pos', 'score': 0.59}
"""

from __future__ import annotations

import math
import random
import uuid
from typing import Any

__all__ = ["generate", "SchemaError"]

_WORDS = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
)
_MAX_DEPTH = 8


class SchemaError(ValueError):
    """The schema cannot be satisfied or uses an unresolvable $ref."""


def generate(schema: Any, seed: Any = 0) -> Any:
    """Generate a value that conforms to ``schema``; deterministic for a given ``seed``.

    Params:
        schema: a JSON Schema dict (or bool).
        seed: anything hashable by ``random.Random`` (int, str, bytes).
    """
    return _Gen(schema, random.Random(seed)).value(schema, 0)


class _Gen:
    def __init__(self, root: Any, rng: random.Random) -> None:
        self.root = root
        self.rng = rng

    # -- helpers -------------------------------------------------------------

    def resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            raise SchemaError(f"only local $ref are supported, got {ref!r}")
        node = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit():
                node = node[int(part)]
            else:
                raise SchemaError(f"unresolvable $ref {ref!r}")
        return node

    def _has_ref(self, s: Any) -> bool:
        return isinstance(s, dict) and ("$ref" in s or any(self._has_ref(v) for v in s.get("anyOf", ())))

    def _merge(self, schema: dict) -> dict:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for sub in schema["allOf"]:
            if isinstance(sub, dict) and "$ref" in sub:
                sub = self.resolve(sub["$ref"])
            if not isinstance(sub, dict):
                continue
            if "allOf" in sub:
                sub = self._merge(sub)
            for k, v in sub.items():
                if k == "properties":
                    merged["properties"] = {**merged.get("properties", {}), **v}
                elif k == "required":
                    merged["required"] = list(dict.fromkeys([*merged.get("required", []), *v]))
                else:
                    merged.setdefault(k, v)
        return merged

    # -- generation ------------------------------------------------------------

    def value(self, schema: Any, depth: int) -> Any:
        if schema is True or schema == {}:
            return self.word()
        if not isinstance(schema, dict):
            raise SchemaError(f"cannot generate from schema {schema!r}")
        if "$ref" in schema:
            target = self.resolve(schema["$ref"])
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            if rest and isinstance(target, dict):
                target = {**target, **rest}
            return self.value(target, depth + 1)
        if "allOf" in schema:
            return self.value(self._merge(schema), depth)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            if not schema["enum"]:
                raise SchemaError("empty enum")
            return self.rng.choice(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = schema[key]
                if not options:
                    raise SchemaError(f"empty {key}")
                if depth >= _MAX_DEPTH:
                    flat = [o for o in options if not self._has_ref(o)]
                    options = flat or options
                return self.value(self.rng.choice(options), depth + 1)
        t = schema.get("type")
        if isinstance(t, list):
            non_null = [x for x in t if x != "null"]
            t = self.rng.choice(non_null) if non_null else "null"
        if t is None:
            if "properties" in schema or "required" in schema:
                t = "object"
            elif "items" in schema or "prefixItems" in schema:
                t = "array"
            else:
                t = "string"
        meth = getattr(self, "gen_" + t, None)
        if meth is None:
            raise SchemaError(f"unsupported type {t!r}")
        return meth(schema, depth)

    def word(self) -> str:
        return self.rng.choice(_WORDS)

    def gen_null(self, schema: dict, depth: int) -> None:
        return None

    def gen_boolean(self, schema: dict, depth: int) -> bool:
        return self.rng.random() < 0.5

    def gen_object(self, schema: dict, depth: int) -> dict:
        props = schema.get("properties") or {}
        required = schema.get("required") or []
        out: dict[str, Any] = {}
        deep = depth >= _MAX_DEPTH
        for name, sub in props.items():
            if deep and name not in required:
                continue
            out[name] = self.value(sub, depth + 1)
        for name in required:
            if name not in out:
                extra = schema.get("additionalProperties")
                out[name] = self.value(extra if isinstance(extra, dict) else {}, depth + 1)
        return out

    def gen_array(self, schema: dict, depth: int) -> list:
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", {})
        lo = int(schema.get("minItems", 0))
        hi = schema.get("maxItems")
        n = lo if depth >= _MAX_DEPTH else max(lo, self.rng.randint(1, 2))
        if hi is not None:
            n = min(n, int(hi))
        n = max(n, min(len(prefix), int(hi) if hi is not None else len(prefix)))
        out: list = []
        unique = schema.get("uniqueItems", False)
        for i in range(n):
            sub = prefix[i] if i < len(prefix) else (items if isinstance(items, dict) or items is True else {})
            v = self.value(sub, depth + 1)
            if unique:
                tries = 0
                while v in out and tries < 20:
                    v = self.value(sub, depth + 1)
                    tries += 1
                if v in out:
                    if isinstance(v, str):
                        v = f"{v}-{i}"
                    elif i >= lo:
                        break
            out.append(v)
        return out

    def gen_string(self, schema: dict, depth: int) -> str:
        rng = self.rng
        fmt = schema.get("format")
        if fmt == "date-time":
            s = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z"
        elif fmt == "date":
            s = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        elif fmt == "time":
            s = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        elif fmt == "email":
            s = f"{self.word()}@example.com"
        elif fmt in ("uri", "url"):
            s = f"https://example.com/{self.word()}"
        elif fmt == "uuid":
            s = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        elif fmt == "ipv4":
            s = ".".join(str(rng.randint(1, 254)) for _ in range(4))
        elif fmt == "ipv6":
            s = ":".join(f"{rng.getrandbits(16):x}" for _ in range(8))
        elif fmt == "hostname":
            s = f"{self.word()}.example.com"
        elif fmt == "duration":
            s = f"P{rng.randint(1, 9)}D"
        else:
            s = " ".join(self.word() for _ in range(rng.randint(1, 3)))
        lo = int(schema.get("minLength", 0))
        hi = schema.get("maxLength")
        while len(s) < lo:
            s += " " + self.word()
        if len(s) < lo:
            s = s.ljust(lo, "x")
        if hi is not None and len(s) > int(hi):
            s = s[: int(hi)]
        return s

    def _bounds(self, schema: dict, default_lo: float, default_hi: float, step: float):
        lo = hi = None
        if "minimum" in schema:
            lo = schema["minimum"]
        if "exclusiveMinimum" in schema:
            x = schema["exclusiveMinimum"] + step
            lo = x if lo is None else max(lo, x)
        if "maximum" in schema:
            hi = schema["maximum"]
        if "exclusiveMaximum" in schema:
            x = schema["exclusiveMaximum"] - step
            hi = x if hi is None else min(hi, x)
        span = default_hi - default_lo
        if lo is None and hi is None:
            lo, hi = default_lo, default_hi
        elif lo is None:
            lo = min(default_lo, hi - span)
        elif hi is None:
            hi = lo + span if lo > default_lo else max(default_hi, lo)
        if hi < lo:
            raise SchemaError("numeric bounds cannot be satisfied")
        return lo, hi

    def gen_integer(self, schema: dict, depth: int) -> int:

        lo, hi = self._bounds(schema, 0, 100, 1)
        lo_i, hi_i = math.ceil(lo), math.floor(hi)
        m = schema.get("multipleOf")
        if m:
            k_lo, k_hi = math.ceil(lo_i / m), math.floor(hi_i / m)
            if k_hi < k_lo:
                raise SchemaError("multipleOf cannot be satisfied")
            return int(self.rng.randint(int(k_lo), int(k_hi)) * m)
        if hi_i < lo_i:
            raise SchemaError("integer bounds cannot be satisfied")
        return self.rng.randint(lo_i, hi_i)

    def gen_number(self, schema: dict, depth: int) -> float:

        lo, hi = self._bounds(schema, 0.0, 1.0, 1e-6)
        m = schema.get("multipleOf")
        if m:
            k_lo, k_hi = math.ceil(lo / m), math.floor(hi / m)
            if k_hi < k_lo:
                raise SchemaError("multipleOf cannot be satisfied")
            return self.rng.randint(int(k_lo), int(k_hi)) * m
        v = round(lo + (hi - lo) * self.rng.random(), 2)
        if v < lo or v > hi:
            v = lo + (hi - lo) / 2
        return float(v)
