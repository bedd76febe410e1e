"""Token counting for usage numbers and truncation: a cheap estimate or tiktoken.

The estimate is ``len(text) // 4 + 1`` (0 for the empty string), which is also
what rate-limit costs use.  ``tokenizer='tiktoken'`` uses the model's encoding
(o200k_base, or cl100k_base for gpt-4/gpt-3.5/embedding models); when the
encoding files cannot be loaded (offline machine) it warns once and falls
back to the estimate.

``pieces`` gives the tokens themselves, deterministically (tiktoken ids, or
the estimate's 4-character chunks), as many as ``count`` says: what a prefix
cache hashes.  ``chunk_chars`` tells whether tokens are such fixed chunks, so
a caller can slice many at once instead of making one string per token.

Example:
    >>> c = TokenCounter("estimate")
    >>> c.count("hello world"), c.truncate("hello world", 1), c.count("hel")
    (3, 'hel', 1)
    >>> c.pieces("hello world")
    ['hell', 'o wo', 'rld']
"""

from __future__ import annotations

import logging
from typing import Optional

__all__ = ["TokenCounter", "estimate_tokens"]

log = logging.getLogger(__name__)


def estimate_tokens(text: str) -> int:
    """Cheap token estimate: ``len(text) // 4 + 1``, 0 for ''."""
    return len(text) // 4 + 1 if text else 0


_CHUNK = 4  # characters per estimated token
_ENCODINGS: dict[str, object] = {}
_FAILED: set[str] = set()


def _encoding_name(model: str) -> str:
    m = model or ""
    if m.startswith(("gpt-4-", "gpt-3.5")) or m == "gpt-4" or "embedding" in m:
        return "cl100k_base"
    return "o200k_base"


def _load_encoding(name: str) -> Optional[object]:
    if name in _ENCODINGS:
        return _ENCODINGS[name]
    if name in _FAILED:
        return None
    try:
        import tiktoken

        enc = tiktoken.get_encoding(name)
    except Exception as exc:  # offline, not installed, ...
        _FAILED.add(name)
        log.warning("tiktoken encoding %s unavailable (%s); using the len//4 estimate", name, exc)
        return None
    _ENCODINGS[name] = enc
    return enc


class TokenCounter:
    """Counts and truncates text in tokens.

    Params:
        kind: 'estimate' or 'tiktoken'.
    Methods:
        count(text, model='') -> int
        pieces(text, model='') -> list of ``count(text)`` tokens (ids or str chunks)
        chunk_chars(model='') -> 4 when tokens are the estimate's fixed chunks, else None
        truncate(text, max_tokens, model='') -> str whose count is <= max_tokens
    """

    __slots__ = ("kind",)

    def __init__(self, kind: str = "estimate") -> None:
        self.kind = kind

    def _enc(self, model: str):
        if self.kind != "tiktoken":
            return None
        return _load_encoding(_encoding_name(model))

    def count(self, text: str, model: str = "") -> int:
        """Number of tokens of ``text``."""
        if not text:
            return 0
        enc = self._enc(model) if self.kind == "tiktoken" else None
        if enc is None:
            return len(text) // 4 + 1
        return len(enc.encode(text, disallowed_special=()))  # type: ignore[attr-defined]

    def pieces(self, text: str, model: str = "") -> list:
        """The tokens of ``text``: tiktoken ids, or the estimate's 4-character chunks; ``len == count(text)``.

        Example:
            >>> TokenCounter().pieces("abcdefgh"), TokenCounter().pieces("")
            (['abcd', 'efgh', ''], [])
        """
        if not text:
            return []
        enc = self._enc(model) if self.kind == "tiktoken" else None
        if enc is None:
            # to len(text) inclusive: a trailing '' chunk stands for the estimate's "+1" token
            return [text[i:i + _CHUNK] for i in range(0, len(text) + 1, _CHUNK)]
        return enc.encode(text, disallowed_special=())  # type: ignore[attr-defined]

    def chunk_chars(self, model: str = "") -> Optional[int]:
        """Characters per token when tokens are the estimate's fixed chunks (see :meth:`pieces`); None for tiktoken.

        Example:
            >>> TokenCounter("estimate").chunk_chars()
            4
        """
        return _CHUNK if self._enc(model) is None else None

    def truncate(self, text: str, max_tokens: int, model: str = "") -> str:
        """Prefix of ``text`` that has at most ``max_tokens`` tokens."""
        if max_tokens <= 0:
            return ""
        enc = self._enc(model) if self.kind == "tiktoken" else None
        if enc is None:
            return text[: 4 * max_tokens - 1]
        ids = enc.encode(text, disallowed_special=())  # type: ignore[attr-defined]
        return text if len(ids) <= max_tokens else enc.decode(ids[:max_tokens])  # type: ignore[attr-defined]
