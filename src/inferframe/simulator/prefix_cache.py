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
    >>> prompt_tokens(["Be brief.", ("role", "user"), "Hi"], TokenCounter())
    ['Be b', 'rief', '.', ('role', 'user'), 'Hi']
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable, Sequence

from .tokens import TokenCounter

__all__ = ["PrefixCache", "prompt_tokens"]


def prompt_tokens(parts: Iterable, counter: TokenCounter, model: str = "") -> list:
    """Token sequence of ``prompts.prompt_parts`` output: text is tokenized, tuples are one token each.

    Params:
        parts: ``str`` text and ``tuple`` opaque tokens, in prompt order.
        counter: the simulator's :class:`TokenCounter` (the same tokens its usage counts).
        model: model id (selects the tiktoken encoding).

    Example:
        >>> prompt_tokens([("role", "system"), "abcdef"], TokenCounter())
        [('role', 'system'), 'abcd', 'ef']
    """
    out: list = []
    for p in parts:
        if isinstance(p, str):
            out += counter.pieces(p, model)
        else:
            out.append(p)
    return out


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

    def block_hashes(self, tokens: Sequence, namespace: str = "") -> list[int]:
        """Chained keys of the full blocks of ``tokens``; ``namespace`` (the model) seeds the chain.

        Python's ``hash`` is enough: keys never leave this process, and a 64-bit
        collision among the blocks one simulator sees is vanishingly unlikely.
        """
        bt = self.block_tokens
        h = hash(("prefix", namespace))
        out = []
        for i in range(0, len(tokens) - bt + 1, bt):
            h = hash((h, tuple(tokens[i:i + bt])))
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

    def serve(self, tokens: Sequence, namespace: str = "") -> int:
        """Cached tokens of a prompt, then cache its full blocks (its prefill is done).

        Params:
            tokens: the prompt's tokens (any hashable items).
            namespace: cache partition, e.g. the model id (prefixes are never shared across it).
        """
        hashes = self.block_hashes(tokens, namespace)
        # the last prompt token is always recomputed, so only blocks within the first n-1 can hit
        hit = self.lookup(hashes, (len(tokens) - 1) // self.block_tokens)
        self.insert(hashes)
        self.requests += 1
        if hit:
            self.hit_requests += 1
            self.hit_tokens += hit * self.block_tokens
        return hit * self.block_tokens

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
