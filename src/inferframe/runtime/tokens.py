"""Estimate tokens before sending: tiktoken for OpenAI models, a cheap rule otherwise."""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=32)
def _encoder(model: str):
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        return tiktoken.encoding_for_model(model)
    except KeyError:
        if model.startswith(("gpt-", "o1", "o3", "o4", "text-embedding")):
            try:
                return tiktoken.get_encoding("o200k_base")
            except Exception:
                return None
        return None
    except Exception:  # encodings are downloaded on first use; offline machines fall back
        return None


def count_text(text: str, model: str | None) -> int:
    enc = _encoder(model) if model else None
    if enc is not None:
        return len(enc.encode(text, disallowed_special=()))
    # About 4 characters per token for English text; good enough to pace a rate limit.
    return len(text) // 4 + 1


def _texts(body: Any):
    if isinstance(body, str):
        yield body
    elif isinstance(body, dict):
        for k, v in body.items():
            if k in ("image_url", "file_data", "file_url"):
                continue
            yield from _texts(v)
    elif isinstance(body, list):
        for v in body:
            yield from _texts(v)


def estimate_request(body: dict, model: str | None) -> tuple[int, int]:
    """(input tokens, max output tokens) for a request body."""
    payload = body.get("messages") or body.get("input") or body.get("instructions") or ""
    text = "\n".join(_texts(payload))
    if body.get("instructions"):
        text += "\n" + str(body["instructions"])
    inp = count_text(text, model) + 4
    out = body.get("max_output_tokens") or body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return inp, int(out)
