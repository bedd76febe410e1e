"""Automatic prefix caching, as vLLM does it: an LRU of hashed token blocks.

A prompt's tokens are cut into full blocks of ``block_tokens``; each block's
key chains its parent's key (``hash((parent, block))``), so a key stands for
the whole prefix up to the end of its block.  A request is served from the
longest run of cached blocks from its start; after its prefill its own full
blocks are cached.  The cache holds at most ``capacity_tokens // block_tokens``
blocks and evicts the least recently used; a hit refreshes the blocks it used.

As in vLLM, the last prompt token is always computed (its logits start the
answer), so a prompt that is cached whole still reports at most the full
blocks of its first ``n - 1`` tokens.  A partial trailing block is never cached.

The cache is used from the server's event loop only; no method awaits, so
every lookup-and-insert is atomic with respect to other requests.

Example:
    >>> cache = PrefixCache(capacity_tokens=1024, block_tokens=16)
    >>> shared = list(range(100))                       # a 100-token shared prefix
    >>> cache.serve(shared + [1000, 1001])              # first request: nothing cached yet
    0
    >>> cache.serve(shared + [2000, 2001, 2002])        # 6 full blocks of the prefix are reused
    96
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable, Iterable, Sequence

from .tokens import TokenCounter

__all__ = ["PrefixCache", "prompt_blocks"]


def prompt_blocks(parts: Iterable, counter: TokenCounter, model: str = "",
                  block_tokens: int = 16) -> tuple[list[Hashable], int]:
    """The contents of a prompt's full token blocks, and its token count.

    A block is the tuple of its tokens, except that a block lying wholly inside
    one text of estimated tokens is that text's slice (one string instead of 16):
    the same tokens always give the same contents, since an estimated text's
    chunks are 4 characters but for its last one.  That keeps the work per
    request to a few operations per block rather than per token.

    Params:
        parts: ``prompts.prompt_parts`` output: ``str`` text, ``tuple`` one opaque token each.
        counter: the simulator's :class:`TokenCounter` (the tokens its usage counts).
        model: model id (selects the tiktoken encoding).
        block_tokens: tokens per block.

    Example:
        >>> prompt_blocks([("role", "user"), "abcdefgh" * 2], TokenCounter(), block_tokens=2)
        ([(('role', 'user'), 'abcd'), 'efghabcd', 'efgh'], 6)
    """
    bt = block_tokens
    chars = counter.chunk_chars(model)
    blocks: list[Hashable] = []
    buf: list = []  # tokens of the block being filled
    n = 0
    for p in parts:
        if not isinstance(p, str):
            buf.append(p)
            n += 1
        elif p:
            if chars is None:
                ids = counter.pieces(p, model)
                k = len(ids)

                def take(a: int, b: int, ids=ids) -> list:
                    return ids[a:b]

                def block(j: int, ids=ids) -> Hashable:
                    return tuple(ids[j:j + bt])
            else:
                k = len(p) // chars + 1

                def take(a: int, b: int, p=p) -> list:
                    return [p[c * chars:(c + 1) * chars] for c in range(a, b)]

                def block(j: int, p=p) -> Hashable:
                    return p[j * chars:(j + bt) * chars]
            j = 0
            if buf:
                j = min(bt - len(buf), k)
                buf += take(0, j)
                if len(buf) == bt:
                    blocks.append(tuple(buf))
                    buf = []
            if not buf:
                while k - j >= bt:
                    blocks.append(block(j))
                    j += bt
                buf = take(j, k)
            n += k
        if len(buf) == bt:
            blocks.append(tuple(buf))
            buf = []
    return blocks, n


class PrefixCache:
    """LRU cache of chained token-block hashes (see module docstring).

    Params:
        capacity_tokens: how many tokens the cache holds (rounded down to whole blocks).
        block_tokens: tokens per block (vLLM's default is 16).

    Example:
        >>> c = PrefixCache(capacity_tokens=32, block_tokens=16)   # room for 2 blocks
        >>> c.serve(list(range(40))), c.serve(list(range(40)))     # 2 full blocks, then both hit
        (0, 32)
        >>> c.snapshot()["blocks"], c.snapshot()["hit_tokens"]
        (2, 32)
    """

    def __init__(self, capacity_tokens: int, block_tokens: int = 16) -> None:
        if block_tokens < 1 or capacity_tokens < 0:
            raise ValueError("block_tokens must be >= 1 and capacity_tokens >= 0")
        self.block_tokens = block_tokens
        self.capacity_blocks = capacity_tokens // block_tokens
        self._lru: OrderedDict[int, None] = OrderedDict()  # oldest first
        self.clear()

    def clear(self) -> None:
        """Drop every cached block and zero the counters."""
        self._lru.clear()
        self.requests = 0
        self.hit_requests = 0
        self.hit_tokens = 0
        self.evicted_blocks = 0

    @staticmethod
    def block_hashes(blocks: Iterable[Hashable], namespace: str = "") -> list[int]:
        """Chained keys of block contents; ``namespace`` (the model) seeds the chain.

        Python's ``hash`` is enough: keys never leave this process, and a 64-bit
        collision among the blocks one simulator sees is vanishingly unlikely.
        """
        h = hash(("prefix", namespace))
        out = []
        for b in blocks:
            h = hash((h, b))
            out.append(h)
        return out

    def lookup(self, hashes: Sequence[int], limit: int | None = None) -> int:
        """Number of leading ``hashes`` (at most ``limit``) that are cached; refreshes them."""
        lru = self._lru
        n = 0
        for h in hashes[:limit] if limit is not None else hashes:
            if h not in lru:
                break
            n += 1
        self._refresh(hashes[:n])
        return n

    def insert(self, hashes: Sequence[int]) -> None:
        """Cache ``hashes`` (a prompt's blocks, in order) as most recently used; evict over capacity."""
        self._refresh(hashes)
        lru = self._lru
        over = len(lru) - self.capacity_blocks
        if over > 0:
            self.evicted_blocks += over
            for _ in range(over):
                lru.popitem(last=False)

    def _refresh(self, hashes: Sequence[int]) -> None:
        # Deepest block first, so the first block ends most recent: eviction then trims a
        # prefix from its tail (as vLLM's free queue does) instead of orphaning its children.
        lru = self._lru
        for h in reversed(hashes):
            lru[h] = None
            lru.move_to_end(h)

    def serve_blocks(self, blocks: Sequence[Hashable], n_tokens: int, namespace: str = "") -> int:
        """Cached tokens of a prompt given as :func:`prompt_blocks`, then cache its blocks (its prefill is done).

        Params:
            blocks: contents of the prompt's full blocks, in order.
            n_tokens: the prompt's token count (its last token is never served from the cache).
            namespace: cache partition, e.g. the model id (prefixes are never shared across it).
        """
        hashes = self.block_hashes(blocks, namespace)
        hit = self.lookup(hashes, (n_tokens - 1) // self.block_tokens)
        self.insert(hashes)
        self.requests += 1
        if hit:
            self.hit_requests += 1
            self.hit_tokens += hit * self.block_tokens
        return hit * self.block_tokens

    def serve(self, tokens: Sequence[Hashable], namespace: str = "") -> int:
        """Like :meth:`serve_blocks` for a plain token sequence (any hashable tokens)."""
        bt = self.block_tokens
        blocks = [tuple(tokens[i:i + bt]) for i in range(0, len(tokens) - bt + 1, bt)]
        return self.serve_blocks(blocks, len(tokens), namespace)

    def snapshot(self) -> dict:
        """Counters: blocks in use, capacity, requests served, requests and tokens hit, blocks evicted."""
        return {
            "block_tokens": self.block_tokens,
            "blocks": len(self._lru),
            "capacity_blocks": self.capacity_blocks,
            "requests": self.requests,
            "hit_requests": self.hit_requests,
            "hit_tokens": self.hit_tokens,
            "evicted_blocks": self.evicted_blocks,
        }
