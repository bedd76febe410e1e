"""Count tokens before sending: tiktoken for OpenAI models, about 4 characters a token otherwise.

Example:
    >>> count_text("x" * 400, None)
    101
"""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=32)
def encoder(model: str):
    """tiktoken's encoding for an OpenAI model name, else None (offline machines fall back too)."""
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
    """Tokens of ``text`` for ``model``: exact for OpenAI models, estimated otherwise."""
    enc = encoder(model) if model else None
    if enc is not None:
        return len(enc.encode(text, disallowed_special=()))
    # About 4 characters per token for English text; good enough to pace a rate limit.
    return len(text) // 4 + 1
