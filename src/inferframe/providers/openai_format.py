"""The OpenAI wire format, shared by every OpenAI-compatible provider: request bodies, answers,
errors, rate-limit headers and Batch API lines.

Only providers import this module; the runtime sees the neutral records it produces.

Example:
    >>> body = request_body("chat", "m", [("Hi", "text", None)], "Be brief.", {}, {}, max_output_tokens=5)
    >>> body["messages"][0]["role"], body["max_tokens"]
    ('system', 5)
    >>> limit_hints({"x-ratelimit-limit-requests": "600", "x-ratelimit-remaining-requests": "599"}).requests_remaining
    599.0
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
from types import MappingProxyType
from typing import Any, Mapping

from inferframe.errors import ErrorKind, PlanError
from inferframe.providers.interface import MediaOptions, Outcome, Usage
# parse_reset is re-exported: callers read every part of the wire format from this module.
from inferframe.providers.openai_limits import limit_hints, parse_reset, retry_after  # noqa: F401
from inferframe.providers.tokens import count_text

# "chat_logprobs": chat completions read for the first token's top log-probabilities (label scoring);
# "completion": llama.cpp's native /completion (served at the root, not under /v1).
PATHS = MappingProxyType({"chat": "/chat/completions", "responses": "/responses", "embeddings": "/embeddings",
         "chat_logprobs": "/chat/completions", "completion": "/completion"})


# --- requests ------------------------------------------------------------------------------------


def request_body(endpoint: str, model: str | None, parts: list, system: str | None, options: dict,
                 format_fields: dict, media: MediaOptions | None = None, max_output_tokens: int | None = None) -> dict:
    """The JSON body of one request; ``parts`` are (value, kind, name) with kind text, image, file or messages.

    ``max_output_tokens`` (the call's cap, from its config) is spelled as the endpoint wants: ``max_tokens``
    on chat (among the sorted options), ``max_output_tokens`` on /responses (after them).

    Example:
        >>> request_body("responses", "m", [("Hi", "text", None)], None, {"temperature": 0}, {}, max_output_tokens=16)
        {'model': 'm', 'input': 'Hi', 'temperature': 0, 'max_output_tokens': 16}
    """
    opts = dict(options)
    extra = opts.pop("extra_body", None) or {}
    if endpoint == "embeddings":
        body = {"model": model, "input": "".join(str(v) for v, _, _ in parts), "encoding_format": "float", **opts}
        _merge(body, extra)
        return body
    if [k for _, k, _ in parts] == ["messages"]:
        messages = conversation(parts[0][0])
    else:
        messages = [{"role": "user", "content": content_parts(parts, endpoint, media or MediaOptions())}]
    if endpoint == "chat":
        if max_output_tokens is not None:
            opts = dict(sorted({**opts, "max_tokens": max_output_tokens}.items()))
        sys_msg = [{"role": "system", "content": system}] if system else []
        body = {"model": model, "messages": sys_msg + messages, **opts}
    else:
        if max_output_tokens is not None:
            opts["max_output_tokens"] = max_output_tokens
        simple = len(messages) == 1 and isinstance(messages[0]["content"], str)
        body = {"model": model, "input": messages[0]["content"] if simple else messages, **opts}
        if system:
            body["instructions"] = system
    if model is None:
        body.pop("model")
    _merge(body, dict(format_fields))
    _merge(body, extra)
    return body


def follow_up_body(endpoint: str, body: dict, answer: str, message: str) -> dict:
    """``body`` with the model's ``answer`` and a new user ``message`` appended to its conversation."""
    body = dict(body)
    if endpoint == "chat":
        body["messages"] = [*body["messages"], {"role": "assistant", "content": answer}, {"role": "user", "content": message}]
    else:
        first = body["input"]
        history = [{"role": "user", "content": first}] if isinstance(first, str) else list(first)
        body["input"] = [*history, {"role": "assistant", "content": answer}, {"role": "user", "content": message}]
    return body


def _merge(body: dict, extra: dict) -> None:
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(body.get(k), dict):
            _merge(body[k], v)
        else:
            body[k] = v


def content_parts(parts: list, api: str, media: MediaOptions) -> str | list[dict]:
    """The user message content for one row: a plain string when every part is text."""
    from inferframe.media import file_part, image_part, text_part

    if all(k == "text" for _, k, _ in parts):
        return "".join(str(v) for v, _, _ in parts)
    out = []
    for value, kind, name in parts:
        if kind == "text":
            out.append(text_part(str(value), api))
        elif kind == "image":
            if isinstance(value, bytes) and value[:8].lower().startswith((b"http://", b"https://", b"data:")):
                value = value.decode()  # image(col("url")): the URL itself goes to the model
            out.append(image_part(value, api, max_size=media.max_image_size, format=media.image_format,
                                  detail=media.image_detail))
        elif kind == "file":
            out.append(file_part(name or "file", value, api, pdf_mode=media.pdf_mode, max_size=media.max_image_size,
                                 format=media.image_format, detail=media.image_detail))
        else:
            raise PlanError("a conversation column must be the only input of prompt(); "
                            "pass it alone, e.g. prompt(col('messages')), with instructions in system_message=.")
    return out


def conversation(messages: list[dict]) -> list[dict]:
    """A column value of [{role, content}] as API messages (content kept as text)."""
    out = []
    for m in messages:
        if m is None or m.get("role") is None:
            continue
        out.append({"role": m["role"], "content": "" if m.get("content") is None else str(m["content"])})
    if not out:
        raise ValueError("the conversation is empty")
    return out


_MEDIA_KEYS = frozenset(("image_url", "file_data", "file_url"))


def _texts(body: Any):
    if isinstance(body, str):
        yield body
    elif isinstance(body, dict):
        for k, v in body.items():
            if k in _MEDIA_KEYS:
                continue
            yield from _texts(v)
    elif isinstance(body, list):
        for v in body:
            yield from _texts(v)


def _flat_texts(payload: Any) -> list[str] | None:
    """``_texts`` of a list of messages whose values are all strings (a text prompt's), without recursion; else None."""
    if type(payload) is not list:
        return None
    out: list[str] = []
    for m in payload:
        if type(m) is not dict:
            return None
        for k, v in m.items():
            if type(v) is not str:
                return None
            if k not in _MEDIA_KEYS:
                out.append(v)
    return out


def prompt_text(body: dict) -> str:
    r"""The prompt's text in the order the server reads it (instructions, then each message); images as their bytes' place.

    What a prompt cache can reuse is a prefix of this text, so rows are grouped by it. A media
    part stands in by a digest of its data, so two rows share a prefix through an image only when
    the image is the same, and its bytes are not counted as prompt tokens. The request keeps this
    text beside its body (``Request.prompt``): the token estimate, the prefix scheduler and the
    cost estimate read it there.

    Example:
        >>> prompt_text({"instructions": "Be brief.", "input": "Hi"})
        'Be brief.\x1eHi'
        >>> prompt_text({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]})
        'system\x1fS\x1euser\x1fQ'
    """
    out = []
    if body.get("instructions"):
        out.append(str(body["instructions"]))
    payload = body.get("messages")
    if payload is None:
        payload = body.get("input", body.get("prompt", ""))
    if isinstance(payload, str):
        out.append(payload)
    else:
        for m in payload:
            if isinstance(m, dict) and "role" in m:
                content = m.get("content")
                text = content if isinstance(content, str) else "\x1d".join(_parts_text(content))
                out.append(f"{m['role']}\x1f{text}")
            else:
                out.append("\x1d".join(_parts_text(m)))
    return "\x1e".join(out)


def _parts_text(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            if k in _MEDIA_KEYS:  # the same image gives the same stand-in
                yield "\x1c" + hashlib.blake2b(json.dumps(v, sort_keys=True).encode(), digest_size=10).hexdigest()
            else:
                yield from _parts_text(v)
    elif isinstance(value, list):
        for v in value:
            yield from _parts_text(v)


def estimate_tokens(body: dict, model: str | None) -> tuple[int, int]:
    """(input tokens, max output tokens) for a request body.

    Example:
        >>> estimate_tokens({"messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 7}, None)
        (106, 7)
    """
    payload = body.get("messages") or body.get("input") or body.get("prompt") or body.get("instructions") or ""
    text = "\n".join(_flat_texts(payload) or _texts(payload))
    if body.get("instructions"):
        text += "\n" + str(body["instructions"])
    inp = count_text(text, model) + 4
    out = (body.get("max_output_tokens") or body.get("max_completion_tokens") or body.get("max_tokens")
           or body.get("n_predict") or 0)
    return inp, int(out)


# --- answers -------------------------------------------------------------------------------------


def status_kind(status: int, code: str | None) -> ErrorKind:
    """The error kind of an HTTP status (and OpenAI's error code)."""
    if status == 429:
        return ErrorKind.QUOTA if code == "insufficient_quota" else ErrorKind.RATE_LIMIT
    if status in (401, 403):
        return ErrorKind.AUTH
    if status == 408:
        return ErrorKind.TIMEOUT
    if status == 404:
        return ErrorKind.NOT_FOUND
    if status >= 500 or status == 409:
        return ErrorKind.SERVER
    return ErrorKind.BAD_REQUEST


def error_message(body: Any, status: int) -> tuple[str, str | None]:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        return str(err.get("message") or err), err.get("code")
    if isinstance(body, dict) and "error" in body:
        return str(body["error"]), None
    return f"HTTP {status}", None


def cached_tokens(usage: dict, details: str, input_tokens: int, fallback: Any = None) -> int:
    """The part of ``input_tokens`` a prompt cache served: ``usage[details]["cached_tokens"]``, else ``fallback``.

    0 when the server says nothing; never more than the input (a server's odd count must not
    make the uncached part negative).

    Example:
        >>> cached_tokens({"prompt_tokens_details": {"cached_tokens": 1152}}, "prompt_tokens_details", 1300)
        1152
        >>> cached_tokens({"prompt_tokens_details": None}, "prompt_tokens_details", 1300), cached_tokens({}, "x", 10, 50)
        (0, 10)
    """
    details_value = usage.get(details)
    n = details_value.get("cached_tokens") if isinstance(details_value, dict) else None
    if n is None:
        n = fallback
    try:
        n = int(n or 0)
    except (TypeError, ValueError):
        return 0
    return max(0, min(n, input_tokens))


def parse_chat(body: dict) -> Outcome:
    """One /chat/completions answer as an Outcome: the text, finish reason and usage (cached tokens included).

    Example:
        >>> o = parse_chat({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
        ...                 "usage": {"prompt_tokens": 1300, "completion_tokens": 2, "total_tokens": 1302,
        ...                           "prompt_tokens_details": {"cached_tokens": 1152}}})
        >>> o.value, o.usage
        ('ok', Usage(input_tokens=1300, output_tokens=2, cached_tokens=1152))
    """
    usage = body.get("usage") or {}
    inp = usage.get("prompt_tokens") or 0
    # llama.cpp servers that predate prompt_tokens_details report the reused prefix only as timings.cache_n.
    timings = body.get("timings")
    u = Usage(inp, usage.get("completion_tokens") or 0,
              cached_tokens(usage, "prompt_tokens_details", inp,
                            timings.get("cache_n") if isinstance(timings, dict) else None))
    choice = body["choices"][0]
    msg = choice.get("message") or {}
    if msg.get("refusal"):
        return Outcome(usage=u, status=200, error_kind=ErrorKind.REFUSAL, message=f"The model refused: {msg['refusal']}")
    content = msg.get("content")
    if content is None and msg.get("tool_calls"):
        content = json.dumps(msg["tool_calls"])
    # An answer cut at max_tokens is still the answer the user asked for: its text is kept.
    return Outcome(value=content, usage=u, status=200, finish_reason=choice.get("finish_reason"))


def parse_responses(body: dict) -> Outcome:
    """One /responses answer as an Outcome: the text, finish reason and usage (cached tokens included).

    Example:
        >>> o = parse_responses({"status": "completed", "output": [{"type": "message", "content": [
        ...     {"type": "output_text", "text": "ok"}]}], "usage": {"input_tokens": 2048, "output_tokens": 3,
        ...     "input_tokens_details": {"cached_tokens": 1920}}})
        >>> o.value, o.usage.cached_tokens
        ('ok', 1920)
    """
    usage = body.get("usage") or {}
    inp = usage.get("input_tokens") or 0
    u = Usage(inp, usage.get("output_tokens") or 0, cached_tokens(usage, "input_tokens_details", inp))
    texts, refusal = [], None
    for item in body.get("output") or []:
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    texts.append(part.get("text") or "")
                elif part.get("type") == "refusal":
                    refusal = part.get("refusal")
        elif item.get("type") == "function_call":
            texts.append(json.dumps({"name": item.get("name"), "arguments": item.get("arguments")}))
    if refusal:
        return Outcome(usage=u, status=200, error_kind=ErrorKind.REFUSAL, message=f"The model refused: {refusal}")
    text = "".join(texts)
    if body.get("status") == "incomplete":
        reason = (body.get("incomplete_details") or {}).get("reason")
        if reason == "max_output_tokens":  # cut at the limit the user set: the text is kept
            return Outcome(value=text, usage=u, status=200, finish_reason="length")
        return Outcome(usage=u, status=200, error_kind=ErrorKind.LENGTH, raw=text,
                       message=f"The response is incomplete ({reason}).")
    return Outcome(value=text, usage=u, status=200, finish_reason="stop")


def parse_embeddings(body: dict) -> Outcome:
    """One vector per input, in input order: lists of floats, or float32 arrays for base64 answers."""
    usage = body.get("usage") or {}
    u = Usage(usage.get("prompt_tokens") or usage.get("total_tokens") or 0, 0)
    data = sorted(body["data"], key=lambda d: d.get("index", 0))
    return Outcome(value=[_vector(d["embedding"]) for d in data], usage=u, status=200)


def _vector(v: Any) -> Any:
    if not isinstance(v, str):
        return v
    import binascii

    import numpy as np

    try:
        return np.frombuffer(base64.b64decode(v, validate=True), dtype="<f4")
    except (binascii.Error, ValueError):
        # Reported by the caller as a malformed answer, which is retried like any other.
        raise TypeError("an embedding in base64 float32") from None


def parse_chat_logprobs(body: dict) -> Outcome:
    """A /chat/completions answer asked with ``logprobs``: the first token's top (token, logprob) pairs.

    Example:
        >>> o = parse_chat_logprobs({"choices": [{"message": {"content": "yes"}, "finish_reason": "length",
        ...     "logprobs": {"content": [{"token": "yes", "logprob": -0.1,
        ...                               "top_logprobs": [{"token": "yes", "logprob": -0.1}, {"token": "no", "logprob": -2.4}]}]}}]})
        >>> o.value
        [['yes', -0.1], ['no', -2.4]]
    """
    out = parse_chat(body)
    if out.ok:
        content = (body["choices"][0].get("logprobs") or {}).get("content") or []
        top = (content[0].get("top_logprobs") or [content[0]]) if content else []
        out.value = [[t["token"], float(t["logprob"])] for t in top]
    return out


def parse_completion(body: dict) -> Outcome:
    """A llama.cpp native /completion answer: each generated token's [id, logprob] (as asked, before sampling).

    Example:
        >>> o = parse_completion({"content": " yes", "completion_probabilities": [{"id": 9259, "token": " yes",
        ...     "logprob": -0.5}], "tokens_evaluated": 20, "tokens_predicted": 1, "timings": {"cache_n": 19}})
        >>> o.value, o.usage
        ([[9259, -0.5]], Usage(input_tokens=20, output_tokens=1, cached_tokens=19))
    """
    timings = body.get("timings") if isinstance(body.get("timings"), dict) else {}
    inp = int(body.get("tokens_evaluated") or 0)
    u = Usage(inp, int(body.get("tokens_predicted") or 0), min(inp, int(timings.get("cache_n") or 0)))
    tokens = [[int(t["id"]), float(t["logprob"])] for t in body["completion_probabilities"]]
    return Outcome(value=tokens, usage=u, status=200, finish_reason=body.get("stop_type"))


PARSERS = MappingProxyType({"chat": parse_chat, "responses": parse_responses, "embeddings": parse_embeddings,
           "chat_logprobs": parse_chat_logprobs, "completion": parse_completion})


# A server's way of saying the model cannot read this kind of input (llama.cpp without an mmproj,
# LM Studio, vLLM, OpenAI's text-only models): whatever the status, no retry can change it.
_UNSUPPORTED = re.compile(
    r"(image|vision|multimodal|multi-modal|audio|file)[^.]{0,60}(not supported|unsupported|only supported|"
    r"does not support|doesn't support)|(does not support|doesn't support|not supported|unsupported)"
    r"[^.]{0,40}(image|vision|multimodal|audio|file|input)|not a (multimodal|multi-modal|vision) model", re.IGNORECASE)


def unsupported_input(status: int, message: str) -> Outcome | None:
    """The Outcome for a server's "this model cannot read that input" answer, in inferframe's words; else None.

    Example:
        >>> out = unsupported_input(500, "HTTP 500: image input is not supported - hint: provide the mmproj")
        >>> out.error_kind.value, out.message.split(":")[0]
        ('unsupported', 'The model does not accept this input (images, audio or files)')
        >>> unsupported_input(500, "HTTP 500: out of memory") is None
        True
    """
    if not _UNSUPPORTED.search(message):
        return None
    return Outcome(status=status, error_kind=ErrorKind.UNSUPPORTED, raw=message[:2000],
                   message="The model does not accept this input (images, audio or files): send text only, or "
                           f"use a model that reads them. The server said: {message[:300]}")


def parse_answer(endpoint: str, status: int, body: Any, headers: Mapping[str, str] | None) -> Outcome:
    """One HTTP answer (already JSON-decoded) as an Outcome."""
    if status >= 400:
        msg, code = error_message(body, status)
        refused = unsupported_input(status, f"HTTP {status}: {msg}")
        if refused is not None:
            refused.limits = limit_hints(headers)
            return refused
        if status == 404:  # an unknown model (or a base_url without /v1): where to look, after the server's words
            msg += " (the models this key can use: GET /v1/models)"
        return Outcome(status=status, error_kind=status_kind(status, code), message=f"HTTP {status}: {msg}",
                       retry_after=retry_after(headers or {}), limits=limit_hints(headers))
    try:
        out = PARSERS[endpoint](body)
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        return Outcome(status=status, error_kind=ErrorKind.MALFORMED, limits=limit_hints(headers),
                       message=f"The server's answer lacks {e} for a {endpoint} response")
    out.limits = limit_hints(headers)
    # Two lookups per answer, read by traces only (gen_ai.response.id / .model): cheaper than keeping the body.
    out.response_id, out.response_model = body.get("id"), body.get("model")
    return out


# --- the Batch API -------------------------------------------------------------------------------


def batch_lines(endpoint: str, items: list[tuple[str, dict]]) -> list[bytes]:
    """One JSONL line per (custom id, body)."""
    return [json.dumps({"custom_id": k, "method": "POST", "url": "/v1" + PATHS[endpoint], "body": b}).encode() + b"\n"
            for k, b in items]


def parse_batch_line(endpoint: str, line: dict) -> tuple[str, Outcome]:
    """One line of a batch output or error file, as (custom id, Outcome)."""
    key = line["custom_id"]
    response, error = line.get("response"), line.get("error")
    if response is None:
        code = (error or {}).get("code") or "batch_error"
        kind = ErrorKind.TIMEOUT if code in ("batch_expired", "batch_cancelled") else ErrorKind.SERVER
        return key, Outcome(error_kind=kind, message=f"{code}: {(error or {}).get('message', '')}")
    status, body = response.get("status_code", 500), response.get("body") or {}
    if status >= 400:
        msg, code = error_message(body, status)
        return key, Outcome(status=status, error_kind=status_kind(status, code), message=f"HTTP {status}: {msg}")
    try:
        return key, PARSERS[endpoint](body)
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        return key, Outcome(status=status, error_kind=ErrorKind.MALFORMED, message=f"batch answer lacks {e}")
