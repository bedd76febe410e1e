"""How many tokens a compact JSON answer of a schema takes, and a schema cut down to fit a token budget.

These are facts about the answers a ``return_format`` admits, not about any server: the default
``max_tokens`` of a structured call is read from ``answer_token_bound``, and under a user's
``max_tokens`` a provider that enforces string lengths (a grammar) is sent the schema
``fit_to_budget`` makes, so the model can close the JSON before the cap. The grammar itself belongs
to the provider that speaks it (``providers/gbnf.py``, llama.cpp's GBNF).

Every free-text string counts as bounded: to its ``maxLength``, else to ``DEFAULT_MAX_STRING_LENGTH``
characters (the bound a grammar gives it).

Example:
    >>> answer_token_bound({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})
    7
"""

from __future__ import annotations

import json
from typing import Any

from inferframe.errors import PlanError

# Characters a free-text string without its own maxLength may have: room for a few sentences (~50
# words), while a looping string is closed after ~75 tokens instead of running to max_tokens.
DEFAULT_MAX_STRING_LENGTH = 300


def max_length_of(s: dict, default: int | None) -> int | None:
    """A string schema's ``maxLength`` where it is a non-negative integer, else ``default``.

    Example:
        >>> max_length_of({"maxLength": 5}, 300), max_length_of({}, 300)
        (5, 300)
    """
    hi = s.get("maxLength")
    return int(hi) if isinstance(hi, int) and not isinstance(hi, bool) and hi >= 0 else default


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
        hi = max_length_of(schema, max_string_length)
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
        own = max_length_of(s, DEFAULT_MAX_STRING_LENGTH)
        lo = int(s.get("minLength") or 0)
        out["maxLength"] = max(lo, own if chars is None else min(own, chars))
    return out
