"""JSON schemas as compact GBNF grammars for llama.cpp, and the most tokens such an answer needs.

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
    >>> answer_token_bound(schema)
    7
    >>> print(json_schema_to_gbnf({"type": "string", "maxLength": 20}).splitlines()[0])
    root ::= "\\"" char{1,20} "\\""
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

from inferframe.errors import PlanError

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
# Characters a free-text string without its own maxLength may have: room for a few sentences (~50
# words), while a looping string is closed after ~75 tokens instead of running to max_tokens.
DEFAULT_MAX_STRING_LENGTH = 300
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
        lo, hi = int(lo or 0), _max_length(s, self.max_string_length)
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


def _max_length(s: dict, default: int | None) -> int | None:
    hi = s.get("maxLength")
    return int(hi) if isinstance(hi, int) and not isinstance(hi, bool) and hi >= 0 else default


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


# Tokens a typical value takes in a compact answer, for the default max_tokens.
_STRING_TOKENS = 48
_LIST_ITEMS = 4
# A bounded string's tokens: English runs ~4 characters a token; 3 (and default_max_tokens' 1.5x)
# leaves room for odd text.
_CHARS_PER_TOKEN = 3


def answer_token_bound(schema: Any, root: dict | None = None, depth: int = 0,
                       max_string_length: int | None = DEFAULT_MAX_STRING_LENGTH) -> int:
    """About how many tokens a full compact answer of ``schema`` takes (lists of 4 items).

    A string bounded to ``n`` characters (its maxLength, else ``max_string_length``) counts ``n / 3``
    tokens, so that the grammar, not max_tokens, ends even a string written to its bound; an
    unbounded string counts 48.

    Example:
        >>> answer_token_bound({"type": "array", "items": {"type": "integer"}, "maxItems": 2})
        16
    """
    root = root if root is not None else schema
    if depth > 8 or not isinstance(schema, dict):
        return _STRING_TOKENS
    if "$ref" in schema:
        node: Any = root
        for part in schema["$ref"][2:].split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return answer_token_bound(node, root, depth + 1, max_string_length)
    if "enum" in schema or "const" in schema:
        values = schema.get("enum") or [schema.get("const")]
        return max(len(json.dumps(v)) // 2 + 2 for v in values)
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if alternatives:
        return max(answer_token_bound(a, root, depth + 1, max_string_length) for a in alternatives)
    kind = schema.get("type")
    if isinstance(kind, list):
        return max(answer_token_bound({**schema, "type": k}, root, depth + 1, max_string_length) for k in kind)
    if kind == "object":
        props = schema.get("properties") or {}
        return 2 + sum(len(k) // 3 + 3 + answer_token_bound(v, root, depth + 1, max_string_length) for k, v in props.items()) \
            if props else _STRING_TOKENS
    if kind == "array":
        items = schema.get("maxItems")
        n = _LIST_ITEMS if items is None else min(int(items), 2 * _LIST_ITEMS)
        return 2 + n * (1 + answer_token_bound(schema.get("items", {}), root, depth + 1, max_string_length))
    if kind == "string":
        hi = _max_length(schema, max_string_length)
        return _STRING_TOKENS if hi is None else 2 + -(-hi // _CHARS_PER_TOKEN)
    return {"integer": 6, "number": 10, "boolean": 2, "null": 2}.get(kind, _STRING_TOKENS)


# Under a user's max_tokens a free-text string is first cut down to this many characters; only then do
# lists lose items, then strings go below it: a note of a few words still says something.
FIT_MIN_CHARS = 16
_OPEN_LIST_ITEMS = 2 * _LIST_ITEMS  # a list without maxItems, where the budget holds that many


def fit_to_budget(schema: dict, max_tokens: int | None) -> dict:
    """A copy of ``schema`` whose full compact answer (``answer_token_bound``) fits in the user's ``max_tokens``.

    The grammar then lets the model close the JSON before the cap, instead of a free-text field
    running on until the answer is cut off (``finish_reason='length'``, the row lost). What is cut,
    in order: every free-text string (no enum, const or format) to the characters left over by the
    rest of the answer, down to ``FIT_MIN_CHARS``; then lists, down to one item; then strings
    below ``FIT_MIN_CHARS``; then lists down to their minItems (none at the least). A list without ``maxItems`` gets one: 8 items, or 4, or
    what fits. A nullable field may still be null. Nothing changes without ``max_tokens``.

    Parameters:
        schema: the JSON schema of the answer (as ``structured.json_schema_for(..., lengths=True)``).
        max_tokens: the user's output cap, or None.

    Raises:
        PlanError: even an answer with one-character strings and lists at their fewest items does not fit.

    Example:
        >>> s = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}
        >>> fit_to_budget(s, 30)["properties"]["note"]["maxLength"], answer_token_bound(fit_to_budget(s, 30)) <= 30
        (66, True)
        >>> fit_to_budget(s, None) is s
        True
    """
    if not max_tokens:
        return schema
    limit = int(max_tokens)

    def fits(open_items: int, all_items: int | None, chars: int | None) -> dict | None:
        fitted = _bounded(schema, open_items, all_items, chars)
        return fitted if answer_token_bound(fitted) <= limit else None

    for open_items in (_OPEN_LIST_ITEMS, _LIST_ITEMS):
        found = fits(open_items, None, None)
        if found is not None:
            return found
    found = _largest(lambda c: fits(_LIST_ITEMS, None, c), FIT_MIN_CHARS, DEFAULT_MAX_STRING_LENGTH)
    for items in range(_LIST_ITEMS, 0, -1):
        found = found or fits(items, items, FIT_MIN_CHARS)
    for items in (1, 0):  # an empty list (where its minItems allows) only where one item cannot fit
        found = found or _largest(lambda c, n=items: fits(n, n, c), 1, FIT_MIN_CHARS)
    if found is None:
        least = answer_token_bound(_bounded(schema, 0, 0, 1))
        raise PlanError(f"max_tokens={limit} cannot hold an answer of this return_format: even with one-character "
                        f"strings and lists at their fewest items it takes about {least} tokens. Raise max_tokens "
                        f"to at least {least}, or leave it out (the default fits the format).")
    return found


def _largest(make, lo: int, hi: int) -> dict | None:
    """``make(n)`` for the largest n in [lo, hi] where it is not None (it is None above some n), else None."""
    best = None
    while lo <= hi:
        mid = (lo + hi) // 2
        got = make(mid)
        if got is None:
            hi = mid - 1
        else:
            best, lo = got, mid + 1
    return best


def _bounded(s: Any, open_items: int, all_items: int | None, chars: int | None) -> Any:
    """``s`` with lists bounded (``open_items`` where it has no maxItems; ``all_items`` for every list) and
    free-text strings to at most ``chars`` characters (None: their own bound, else the default)."""
    if isinstance(s, list):
        return [_bounded(v, open_items, all_items, chars) for v in s]
    if not isinstance(s, dict):
        return s
    out = dict(s)
    for key in ("items", "anyOf", "oneOf"):
        if key in s:
            out[key] = _bounded(s[key], open_items, all_items, chars)
    for key in ("properties", "$defs"):
        if isinstance(s.get(key), dict):
            out[key] = {k: _bounded(v, open_items, all_items, chars) for k, v in s[key].items()}
    kind = s.get("type")
    if kind == "array":
        lo, hi = int(s.get("minItems") or 0), s.get("maxItems")
        hi = open_items if hi is None else hi
        out["maxItems"] = max(lo, min(hi, all_items if all_items is not None else hi))
    elif kind == "string" and not {"enum", "const", "format"} & set(s):
        own = _max_length(s, DEFAULT_MAX_STRING_LENGTH)
        lo = int(s.get("minLength") or 0)
        out["maxLength"] = max(lo, own if chars is None else min(own, chars))
    return out
