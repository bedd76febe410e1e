"""Validation of request inputs and extraction of their text (for answers, usage and rules).

Functions:
    chat_messages(messages) -> Extracted      (chat.completions ``messages``)
    responses_input(input, system) -> Extracted   (responses ``input`` and ``instructions``)
    prompt_parts(body) -> list   (the prompt in server order, for the prefix cache)

``Extracted`` has ``text`` (all text, for token counts and fail rules),
``user_text`` (the last user message's text) and ``extra_tokens`` (fixed costs
for images/files) and ``n_messages``.

Example:
    >>> e = chat_messages([{"role": "user", "content": "hi"}])
    >>> e.user_text, e.n_messages
    ('hi', 1)
"""

from __future__ import annotations

from hashlib import blake2b
from types import MappingProxyType
from typing import Any

from .errors import SimError, invalid_request
from .jsonio import dumps

__all__ = ["Extracted", "chat_messages", "prompt_parts", "responses_input", "type_name"]

_CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_IMAGE_TOKENS = MappingProxyType({"low": 85})
_IMAGE_TOKENS_DEFAULT = 765
_FILE_TOKENS = 256
_TEXT_PARTS = MappingProxyType({"text": "text", "input_text": "text", "output_text": "text", "summary_text": "text",
               "reasoning_text": "text", "refusal": "refusal"})


def type_name(v: Any) -> str:
    """JSON type name as used in the API's error messages."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _bad_type(param: str, expected: str, got: Any) -> SimError:
    return invalid_request(
        f"Invalid type for '{param}': expected {expected}, but got {type_name(got)} instead.",
        param=param,
        code="invalid_type",
    )


class Extracted:
    """Text pulled out of a request. Attributes: text, user_text, extra_tokens, n_messages."""

    __slots__ = ("text", "user_text", "extra_tokens", "n_messages")

    def __init__(self, text: str, user_text: str, extra_tokens: int, n_messages: int) -> None:
        self.text = text
        self.user_text = user_text
        self.extra_tokens = extra_tokens
        self.n_messages = n_messages


def chat_messages(messages: Any) -> Extracted:
    """Validate chat ``messages`` and extract their text (SimError 400 on bad shapes)."""
    if not isinstance(messages, list):
        raise _bad_type("messages", "an array", messages)
    if not messages:
        raise invalid_request(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            param="messages",
            code="empty_array",
        )
    texts: list[str] = []
    user_text = ""
    extra = 0
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise _bad_type(f"messages[{i}]", "an object", m)
        role = m.get("role")
        if role is None:
            raise invalid_request(
                f"Missing required parameter: 'messages[{i}].role'.",
                param=f"messages[{i}].role",
                code="missing_required_parameter",
            )
        if role not in _CHAT_ROLES:
            raise invalid_request(
                f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', "
                "'tool', and 'developer'.",
                param=f"messages[{i}].role",
                code="invalid_value",
            )
        content = m.get("content")
        if isinstance(content, str):
            t = content
        elif content is None:
            if role in ("user", "system", "developer", "tool") and "content" not in m:
                raise invalid_request(
                    f"Missing required parameter: 'messages[{i}].content'.",
                    param=f"messages[{i}].content",
                    code="missing_required_parameter",
                )
            t = ""
        elif isinstance(content, list):
            parts = []
            for j, p in enumerate(content):
                if not isinstance(p, dict):
                    raise _bad_type(f"messages[{i}].content[{j}]", "an object", p)
                ptype = p.get("type")
                if ptype == "text":
                    parts.append(p.get("text") or "")
                elif ptype == "image_url":
                    detail = (p.get("image_url") or {}).get("detail", "auto")
                    extra += _IMAGE_TOKENS.get(detail, _IMAGE_TOKENS_DEFAULT)
                elif ptype == "refusal":
                    parts.append(p.get("refusal") or "")
                elif ptype in ("input_audio", "file"):
                    extra += _FILE_TOKENS
                else:
                    raise invalid_request(
                        f"Invalid value: '{ptype}'. Supported values are: 'text', 'image_url', 'input_audio', "
                        "'refusal', and 'file'.",
                        param=f"messages[{i}].content[{j}].type",
                        code="invalid_value",
                    )
            t = "\n".join(parts)
        else:
            raise _bad_type(f"messages[{i}].content", "one of a string or array of objects", content)
        if m.get("tool_calls"):
            for tc in m["tool_calls"]:
                fn = tc.get("function") if isinstance(tc, dict) else None
                if isinstance(fn, dict):
                    t += str(fn.get("arguments", ""))
        texts.append(t)
        if role == "user":
            user_text = t
    return Extracted("\n".join(texts), user_text, extra, len(messages))


def _content_text(content: Any, param: str, acc: list[str]) -> tuple[str, int]:
    """Text and fixed extra tokens of a responses message ``content``."""
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        raise _bad_type(param, "one of a string or array of objects", content)
    parts = []
    extra = 0
    for j, p in enumerate(content):
        if not isinstance(p, dict):
            raise _bad_type(f"{param}[{j}]", "an object", p)
        ptype = p.get("type")
        if ptype in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
            parts.append(p.get("text") or "")
        elif ptype == "refusal":
            parts.append(p.get("refusal") or "")
        elif ptype == "input_image":
            extra += _IMAGE_TOKENS.get(p.get("detail", "auto"), _IMAGE_TOKENS_DEFAULT)
        elif ptype == "input_file":
            data = p.get("file_data")
            extra += len(data) * 3 // 16 if isinstance(data, str) else _FILE_TOKENS
        elif ptype == "input_audio":
            extra += _FILE_TOKENS
        else:
            raise invalid_request(
                f"Invalid value: '{ptype}'. Supported values are: 'input_text', 'input_image', 'output_text', "
                "'refusal', 'input_file', 'computer_screenshot', and 'summary_text'.",
                param=f"{param}[{j}].type",
                code="invalid_value",
            )
    return "\n".join(parts), extra


def responses_input(inp: Any, system: Any) -> Extracted:
    """Validate a responses ``input`` (string or item list) and extract its text; ``system``: the body's ``instructions``."""
    texts: list[str] = []
    if system is not None:
        if not isinstance(system, str):
            raise _bad_type("instructions", "a string", system)
        texts.append(system)
    if inp is None:
        return Extracted("\n".join(texts), "", 0, 0)
    if isinstance(inp, str):
        texts.append(inp)
        return Extracted("\n".join(texts), inp, 0, 1)
    if not isinstance(inp, list):
        raise _bad_type("input", "one of a string or array of input items", inp)
    user_text = ""
    extra = 0
    for i, item in enumerate(inp):
        if not isinstance(item, dict):
            raise _bad_type(f"input[{i}]", "an object", item)
        itype = item.get("type", "message")
        if itype == "message" or ("role" in item and itype not in ("function_call", "function_call_output")):
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise invalid_request(
                    f"Invalid value: '{role}'. Supported values are: 'assistant', 'system', 'developer', and 'user'.",
                    param=f"input[{i}].role",
                    code="invalid_value",
                )
            if "content" not in item:
                raise invalid_request(
                    f"Missing required parameter: 'input[{i}].content'.",
                    param=f"input[{i}].content",
                    code="missing_required_parameter",
                )
            t, x = _content_text(item["content"], f"input[{i}].content", texts)
            extra += x
            texts.append(t)
            if role == "user":
                user_text = t
        else:
            for key in ("output", "arguments", "text"):
                v = item.get(key)
                if isinstance(v, str):
                    texts.append(v)
    return Extracted("\n".join(texts), user_text, extra, len(inp))


def prompt_parts(body: dict) -> list:
    """The prompt of a validated chat or responses body, in the order a server reads it.

    Instructions come first (as the system message a server makes of them), then
    each message or input item.  A ``str`` is text
    to tokenize; a ``tuple`` is one opaque token: ``('role', name)`` opens a
    message (as a chat template's role marker does) and ``('media', digest)``
    stands for an image / file / audio part, so two prompts share a prefix
    through a media part only when its content is the same.

    Params:
        body: a request body its endpoint's ``prepare`` accepted.

    Example:
        >>> prompt_parts({"instructions": "Be brief.", "input": "Hi"})
        [('role', 'system'), 'Be brief.', ('role', 'user'), 'Hi']
        >>> prompt_parts({"messages": [{"role": "user", "content": [{"type": "text", "text": "Q"}]}]})
        [('role', 'user'), 'Q']
    """
    out: list = []
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        out += (("role", "system"), instructions)
    payload = body["messages"] if "messages" in body else body.get("input")
    if isinstance(payload, str):
        out += (("role", "user"), payload)
        return out
    for item in payload or ():
        if not isinstance(item, dict):
            continue
        role = item.get("role")
        out.append(("role", str(role if role is not None else item.get("type"))))
        content = item.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            for p in content:
                key = _TEXT_PARTS.get(p.get("type")) if isinstance(p, dict) else None
                if key is not None:
                    out.append(p.get(key) or "")
                elif isinstance(p, dict):
                    out.append(("media", blake2b(dumps(p), digest_size=16).digest()))
        for tc in item.get("tool_calls") or ():
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(fn, dict):
                out.append(str(fn.get("arguments", "")))
        if role is None:  # responses function-call items and the like
            for key in ("output", "arguments", "text"):
                if isinstance(item.get(key), str):
                    out.append(item[key])
    return out
