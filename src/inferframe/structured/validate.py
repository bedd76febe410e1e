"""Check every model answer against its return format and turn it into a value ready for Arrow.

Server-side enforcement is not available everywhere (and not every keyword is enforced), so every
answer is validated here. Common model quirks are accepted before failing:

* surrounding whitespace, a ```` ```json ```` fenced block, text before the first ``{`` (the first
  complete JSON value is taken; text after it is ignored), a leading ``<think>...</think>`` block;
* the ``{"label": X}`` / ``{"value": X}`` wrapper that strict schemas use for non-object formats, or the
  bare value;
* ``dict[str, X]`` fields as the ``[{"key": ..., "value": ...}]`` list that strict schemas use, or as an
  object;
* for choices (``Literal``, ``Enum``, lists): the bare label, quoted, with trailing punctuation, in any
  letter case when that picks one choice, after a ``"Label:"`` prefix, or as a JSON string/object.

Pydantic models (and other annotations) are validated by Pydantic in its default lax mode, so the
model's own validators and constraints run. JSON-schema dicts are validated by a small built-in
checker: types, ``required``, ``enum``/``const``, ``additionalProperties: false``, nested objects and
arrays, numeric bounds, string length/``pattern``, array length and date formats.

Example:
    >>> from pydantic import BaseModel
    >>> class Item(BaseModel):
    ...     name: str
    ...     price: float
    >>> Validator(Item).validate('Sure! {"name": "pen", "price": 2}')
    ({'name': 'pen', 'price': 2.0}, None)
"""

from __future__ import annotations

import datetime
import enum
import json
import re
from typing import Any

import pydantic

from inferframe.structured._spec import Node, Spec, build_spec
from inferframe.structured.arrow_types import arrow_type_of_node
from inferframe.structured.json_schema import schema_of_spec
from inferframe.structured.schema_check import check_value, pairs_to_dict, to_column_datetime

__all__ = ["Validator", "repair_message"]

_THINK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\r?\n?(.*?)```", re.S)
_QUOTES = "\"'`*“”‘’«» \t\r\n"
_MAX_SCAN = 64          # JSON start positions tried; bounds the work on long, JSON-free answers
_MAX_ERRORS = 3
_ECHO_CHARS = 4000


class _NotJson(Exception):
    pass


class Validator:
    """Validates model answers for one return format.

    Parameters:
        return_format: a Pydantic v2 model class, a JSON-schema dict, ``Literal[...]``, an ``Enum``
            subclass, a list of choices, or another annotation of supported types.

    Attributes:
        arrow_type: the column type (``arrow_type_for(return_format)``).
        name: the schema name used in requests.

    Example:
        >>> v = Validator(["positive", "negative"])
        >>> v.validate("Positive.")
        ('positive', None)
        >>> v.validate("meh")[1]
        "not one of the choices 'positive', 'negative': got 'meh'"
    """

    def __init__(self, return_format: Any) -> None:
        self.return_format = return_format
        self.spec: Spec = build_spec(return_format)
        self.arrow_type = arrow_type_of_node(self.spec.root)
        self.name = self.spec.name
        self._adapter = None
        if self.spec.python_type is not None and not self.spec.is_label:
            self._adapter = pydantic.TypeAdapter(self.spec.python_type)

    def __reduce__(self):
        # TypeAdapters do not pickle; rebuilding from the format is cheap and exact.
        return (Validator, (self.return_format,))

    def __repr__(self) -> str:
        return f"Validator({self.spec.label})"

    def json_schema(self, *, strict: bool = True) -> tuple[str, dict]:
        """``json_schema_for(return_format, strict=strict)`` without parsing the format again."""
        return schema_of_spec(self.spec, strict=strict)

    def validate(self, text: str | None) -> tuple[Any, str | None]:
        """Parse and check one answer.

        Parameters:
            text: the model's answer (None or empty counts as a failure).

        Returns:
            ``(value, None)`` with a plain Python value for ``pa.array([...], type=self.arrow_type)``
            (dicts keyed by JSON keys, enum values, ``datetime.date`` / ``datetime.datetime``, lists), or
            ``(None, error)`` with a short message such as ``"not valid JSON: Expecting ',' delimiter at
            char 41"`` or ``"schema: items.0.price: Input should be a valid number"``.

        Example:
            >>> Validator({"type": "object", "properties": {"n": {"type": "integer"}}}).validate('{"n": "x"}')
            (None, 'schema: n: Input should be a valid integer')
        """
        if text is None or not str(text).strip():
            return None, "empty answer"
        # Reasoning models served locally often prepend a <think> block, which may itself hold braces.
        text = _THINK.sub("", str(text))
        if not text.strip():
            return None, "empty answer"
        if self.spec.is_label:
            return self._label(text)
        root = self.spec.root
        expect = "object" if root.kind in ("object", "map") and self.spec.wrapper_key is None else "any"
        try:
            data = extract_json(text, expect=expect)
        except _NotJson as e:
            return None, f"not valid JSON: {e}"
        key = self.spec.wrapper_key
        if key is not None and isinstance(data, dict) and set(data) == {key}:
            data = data[key]
        if self._adapter is not None:
            try:
                value = self._adapter.validate_python(_prepare(root, data))
            except pydantic.ValidationError as e:
                return None, "schema: " + _pydantic_message(e)
            return to_plain(root, value), None
        errors: list = []
        value = check_value(root, data, (), errors)
        if errors:
            return None, "schema: " + _join_errors(errors)
        return value, None

    def repair_message(self, text: str | None, error: str) -> str:
        """:func:`repair_message` that knows whether this format wants a label or JSON."""
        labels = self.spec.root.labels if self.spec.is_label else None
        return repair_message(text, error, labels=labels)

    # --- choices ---------------------------------------------------------------------------------
    def _label(self, text: str) -> tuple[Any, str | None]:
        root = self.spec.root
        s = _unfence(text.strip())
        tried: Any = s
        if s[:1] in "{[\"":
            found, tried = self._label_from_json(s)
        else:
            found = _match_choice(root, s)
            if found is _NO and ":" in s:
                found = _match_choice(root, s.rsplit(":", 1)[1])
            if found is _NO and "{" in s:
                found, _ = self._label_from_json(s)
        if found is not _NO:
            return found, None
        if root.nullable and str(tried).strip(_QUOTES).lower() in ("null", "none"):
            return None, None
        shown = _clean_label(str(tried))
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return None, f"not one of the choices {_choices_text(root.labels)}: got {shown!r}"

    def _label_from_json(self, s: str) -> tuple[Any, Any]:
        """(choice or _NO, what was tried) for an answer that holds JSON."""
        try:
            data = extract_json(s, expect="any")
        except _NotJson:
            return _NO, s
        if isinstance(data, dict):
            key = self.spec.wrapper_key
            if key in data:
                data = data[key]
            elif len(data) == 1:
                data = next(iter(data.values()))
        if isinstance(data, (dict, list)):
            return _NO, json.dumps(data)[:80]
        if data is None:
            return _NO, "null"
        return _match_choice(self.spec.root, data), data


def repair_message(text: str | None, error: str, *, labels: tuple | list | None = None) -> str:
    """The follow-up user message asking the model to fix an answer that failed validation.

    It quotes the error and (up to 4000 characters of) the previous answer, so it also works when
    the conversation history is not resent, and asks for JSON only (or only the label, for choices).

    Parameters:
        text: the answer that failed.
        error: the message :meth:`Validator.validate` returned.
        labels: the allowed labels, for choice formats; None for JSON formats.

    Example:
        >>> print(repair_message('{"a": 1', "not valid JSON: Expecting ',' delimiter at char 7"))
        ... # doctest: +NORMALIZE_WHITESPACE
        Your previous answer could not be used: not valid JSON: Expecting ',' delimiter at char 7.
        Previous answer:
        {"a": 1
        Reply again with only the corrected JSON that matches the required schema: no explanation,
        no Markdown code fences, no text before or after the JSON.
    """
    previous = (text or "").strip()
    if len(previous) > _ECHO_CHARS:
        previous = previous[:_ECHO_CHARS] + "\n[... truncated]"
    parts = [f"Your previous answer could not be used: {error.rstrip('.')}."]
    if previous:
        parts.append(f"Previous answer:\n{previous}")
    if labels:
        parts.append(f"Reply again with exactly one of these labels and nothing else: "
                     f"{', '.join(str(c) for c in labels)}.")
    else:
        parts.append("Reply again with only the corrected JSON that matches the required schema: no explanation,\n"
                     "no Markdown code fences, no text before or after the JSON.")
    return "\n\n".join(parts)


# --- JSON extraction ---------------------------------------------------------------------------

def extract_json(text: str, *, expect: str = "any") -> Any:
    """The first JSON value in ``text``, tolerating whitespace, code fences and leading prose.

    Parameters:
        text: the answer.
        expect: "object" to look only for ``{...}``; "any" for any JSON value (``{``, ``[`` or a scalar
            when the whole answer is one).

    Example:
        >>> extract_json('Here you go:\\n```json\\n{"a": [1, 2]}\\n```')
        {'a': [1, 2]}
    """
    s = text.strip()
    lead = len(text) - len(text.lstrip())
    try:
        return json.loads(s)
    except json.JSONDecodeError as e:
        whole_error = e
    for m in _FENCE.finditer(s):
        try:
            return json.loads(m.group(1).strip())
        except json.JSONDecodeError:
            continue
    openers = "{" if expect == "object" else "{["
    decoder = json.JSONDecoder()
    first_error = None
    tries = 0
    for i, ch in enumerate(s):
        if ch not in openers:
            continue
        try:
            return decoder.raw_decode(s, i)[0]
        except json.JSONDecodeError as e:
            first_error = first_error or e
        tries += 1
        if tries >= _MAX_SCAN:
            break
    err = first_error
    if err is None:
        if s[:1] in "[{\"" or s[:1].isdigit():
            err = whole_error
        else:
            start = s[:30] + ("..." if len(s) > 30 else "")
            raise _NotJson(f"no JSON {'object' if expect == 'object' else 'value'} in the answer (it starts {start!r})")
    raise _NotJson(f"{err.msg} at char {err.pos + lead}")


def _unfence(s: str) -> str:
    m = _FENCE.search(s)
    return (m.group(1).strip() or s) if m else s


# --- choices -----------------------------------------------------------------------------------

_NO = object()


def _clean_label(s: str) -> str:
    t = s.strip(_QUOTES).rstrip(".!?,;:").strip(_QUOTES)
    return t


def _match_choice(node: Node, raw: Any) -> Any:
    """The choice ``raw`` names, or _NO."""
    labels = node.labels
    if node.value_kind == "string":
        if not isinstance(raw, str):
            return _NO
        t = _clean_label(raw)
        if t in labels:
            return t
        folded = [c for c in labels if c.casefold() == t.casefold()]
        return folded[0] if len(folded) == 1 else _NO
    if node.value_kind == "integer":
        if isinstance(raw, bool):
            return _NO
        if isinstance(raw, str):
            try:
                raw = int(_clean_label(raw))
            except ValueError:
                return _NO
        return raw if isinstance(raw, int) and raw in labels else _NO
    if isinstance(raw, str):
        raw = {"true": True, "false": False}.get(_clean_label(raw).lower(), raw)
    return raw if isinstance(raw, bool) and raw in labels else _NO


def _choices_text(labels: tuple) -> str:
    shown = ", ".join(repr(c) for c in labels[:12])
    return shown + (f", ... ({len(labels)} in all)" if len(labels) > 12 else "")


# --- Pydantic path -----------------------------------------------------------------------------

def _prepare(node: Node, data: Any) -> Any:
    """Undo strict-schema encodings and fix harmless quirks before Pydantic sees the data."""
    if data is None:
        return None
    kind = node.kind
    if kind == "object" and isinstance(data, dict):
        out = dict(data)
        for f in node.fields:
            if f.key not in out:
                continue
            value = out[f.key]
            if value is None and not f.node.nullable and not f.required:
                # An explicit null for a field with a default: let the default apply.
                del out[f.key]
            else:
                out[f.key] = _prepare(f.node, value)
        return out
    if kind == "array" and isinstance(data, list):
        return [_prepare(node.item, x) for x in data]
    if kind == "map":
        pairs = pairs_to_dict(data)
        if isinstance(pairs, dict):
            return {k: _prepare(node.item, v) for k, v in pairs.items()}
        return data
    if kind == "enum" and node.value_kind == "string" and isinstance(data, str) and data not in node.labels:
        folded = [c for c in node.labels if c.casefold() == data.strip().casefold()]
        return folded[0] if len(folded) == 1 else data
    return data


def to_plain(node: Node, value: Any) -> Any:
    """A validated Python value (model instance, enum member, ...) as plain data for ``pa.array``."""
    if value is None:
        return None
    if node.root_model and isinstance(value, pydantic.RootModel):
        value = value.root
        if value is None:
            return None
    kind = node.kind
    if kind == "object":
        if node.source == "dict":
            return {f.key: to_plain(f.node, value.get(f.attr)) for f in node.fields}
        return {f.key: to_plain(f.node, getattr(value, f.attr, None)) for f in node.fields}
    if kind == "array":
        items = list(value)
        if isinstance(value, (set, frozenset)):
            try:
                items = sorted(items)   # sets have no order; sorting keeps runs reproducible
            except TypeError:
                pass
        return [to_plain(node.item, x) for x in items]
    if kind == "map":
        return {str(k): to_plain(node.item, v) for k, v in value.items()}
    if kind == "enum":
        return value.value if isinstance(value, enum.Enum) else value
    if kind == "number":
        return float(value)
    if kind == "integer":
        return int(value)
    if kind == "string":
        return value if type(value) is str else str(value)
    if kind == "datetime":
        return to_column_datetime(node, value)
    if kind == "date" and isinstance(value, datetime.datetime):
        return value.date()
    if kind == "time" and isinstance(value, datetime.time) and value.tzinfo is not None:
        return value.replace(tzinfo=None)
    return value


def _pydantic_message(e: pydantic.ValidationError) -> str:
    errors = [(tuple(err.get("loc", ())), err.get("msg", "invalid")) for err in e.errors(include_url=False)]
    return _join_errors(errors)


def _join_errors(errors: list) -> str:
    parts = []
    for loc, msg in errors[:_MAX_ERRORS]:
        where = ".".join(str(p) for p in loc)
        parts.append(f"{where}: {msg}" if where else msg)
    text = "; ".join(parts)
    if len(errors) > _MAX_ERRORS:
        text += f" (+{len(errors) - _MAX_ERRORS} more)"
    return text
