"""Long inputs: texts over a model's input limit are cut into chunks at token boundaries.

Tokens are counted exactly with tiktoken for OpenAI models, with the server's tokenizer where the
provider has one, else estimated at 4 characters each (with a safety share).

Example:
    >>> split_pieces([b"the", b" cat", b" sat"], 2)
    [('the cat', 2), (' sat', 1)]
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from inferframe.providers.tokens import count_text, encoder

# Exact chunking stays this many tokens under the limit: BOS/EOS the server adds, and a chunk's
# text may tokenize a token or two longer on its own than as a slice of the whole text.
_CHUNK_MARGIN = 8
# Without the model's tokenizer, tokens are estimated at 4 characters each, which runs low for code
# and most non-English text: estimated chunks aim at this share of the limit.
_ESTIMATE_SHARE = 0.75
# Tokenizer requests in flight at once: cheap for the server, but a batch of long texts must not
# open thousands of connections.
_TOKENIZE_CONCURRENCY = 16


def split_pieces(pieces: list[bytes], limit: int) -> list[tuple[str, int]]:
    """Cut a text given as its tokens' bytes into (chunk text, token count) of at most ``limit`` tokens.

    A cut never falls inside a UTF-8 character (a token may hold part of one).

    Example:
        >>> split_pieces([b"the", b" cat", b" sat"], 2)
        [('the cat', 2), (' sat', 1)]
    """
    chunks, start = [], 0
    while start < len(pieces):
        end = min(start + max(1, limit), len(pieces))
        while start + 1 < end < len(pieces) and pieces[end][:1] and pieces[end][0] & 0xC0 == 0x80:
            end -= 1
        chunks.append((b"".join(pieces[start:end]).decode("utf-8", errors="replace"), end - start))
        start = end
    return chunks


def split_estimated(text: str, limit: int) -> list[tuple[str, int]]:
    """Cut ``text`` into (chunk text, estimated tokens) of at most ``limit`` tokens by the 4-characters rule.

    Example:
        >>> split_estimated("abcdefghij", 2)
        [('abcd', 2), ('efgh', 2), ('ij', 1)]
    """
    step = max(1, (limit - 1) * 4)  # count_text's rule: len // 4 + 1
    return [(text[i:i + step], count_text(text[i:i + step], None)) for i in range(0, len(text), step)]


class Chunker:
    """Splits texts over a model's input limit into chunks, counting tokens as exactly as it can.

    Parameters:
        model: the model name (picks tiktoken's encoding for OpenAI models).
        limit: the most tokens one input may have (None: never split).
        tokenize: an async function giving a text's tokens as bytes (the local server's tokenizer).

    Example:
        >>> import asyncio
        >>> chunks = asyncio.run(Chunker("my-model", 100).split("word " * 200))
        >>> [n for _, n in chunks]
        [75, 75, 75, 29]
    """

    def __init__(self, model: str | None, limit: int | None,
                 tokenize: Callable[[str], Awaitable[list[bytes]]] | None = None) -> None:
        self.model = model
        self.limit = limit
        self.tokenize = tokenize
        self._tokenizing: asyncio.Semaphore | None = None

    async def split(self, text: str) -> list[tuple[str, int]]:
        """(chunk text, token count) for ``text``: one chunk when it fits (count then 0: it weighs nothing)."""
        limit = self.limit
        if limit is None:
            return [(text, 0)]
        exact = limit - _CHUNK_MARGIN if limit > 2 * _CHUNK_MARGIN else limit
        # Every token holds at least one byte: a text with fewer bytes than the limit fits.
        short = len(text) <= exact and len(text.encode()) <= exact
        enc = encoder(self.model) if self.model else None
        if enc is not None:
            if short:
                return [(text, 0)]
            ids = enc.encode(text, disallowed_special=())
            return [(text, 0)] if len(ids) <= exact else split_pieces(enc.decode_tokens_bytes(ids), exact)
        if self.tokenize is not None:
            if short:
                return [(text, 0)]
            if self._tokenizing is None:
                self._tokenizing = asyncio.Semaphore(_TOKENIZE_CONCURRENCY)
            try:
                async with self._tokenizing:
                    pieces = await self.tokenize(text)
            except Exception:  # noqa: BLE001 - the estimate below still splits the text
                pieces = None
            if pieces is not None and b"".join(pieces) == text.encode():
                return [(text, 0)] if len(pieces) <= exact else split_pieces(pieces, exact)
        target = max(1, int(limit * _ESTIMATE_SHARE))
        return [(text, 0)] if count_text(text, None) <= target else split_estimated(text, target)
