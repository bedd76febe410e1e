"""Request counters of the simulator (cheap to update, snapshot as a JSON-ready dict).

Counters: total requests, per endpoint, per HTTP status, 429s, faults injected
per kind, fail-rule hits, responses never sent, tokens, in-flight (current and
max), the input and prefix-cached tokens of the chat/responses requests that
reached the model (``cached_token_share`` = cached / input) with the
``prompt_cache_key`` values they carried, and per-request-hash counts (how often each distinct body was sent), so
a test can assert that no request was sent twice.

Example:
    >>> s = Stats()
    >>> s.request("chat.completions")
    >>> s.seen(b"h"), s.seen(b"h")  # how many requests with this body hash came before
    (0, 1)
    >>> s.snapshot()["duplicate_requests"], s.snapshot()["by_endpoint"]
    (1, {'chat.completions': 1})
    >>> s.prefilled(1200, 1024, cache_key="tenant-1")
    >>> s.snapshot()["cached_token_share"], s.snapshot()["distinct_prompt_cache_keys"]
    (0.8533, 1)
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["Stats"]


class Stats:
    """Mutable counters; only touched from the server's event loop thread."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Zero every counter (``in_flight`` keeps counting the requests still being served)."""
        self.started_at = time.time()
        self.total = 0
        self.by_endpoint: dict[str, int] = {}
        self.by_status: dict[str, int] = {}
        self.rate_limited = 0
        self.faults: dict[str, int] = {}
        self.rule_hits = 0
        self.no_response = 0
        self.in_flight = getattr(self, "in_flight", 0)
        self.max_in_flight = self.in_flight
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.input_tokens = 0
        self.cached_tokens = 0
        self.cache_keys: dict[str, int] = {}
        self.hash_counts: dict[bytes, int] = {}
        self.duplicates = 0

    def request(self, endpoint: str) -> None:
        """Count an arriving request for ``endpoint``."""
        self.total += 1
        self.by_endpoint[endpoint] = self.by_endpoint.get(endpoint, 0) + 1

    def status(self, status: int) -> None:
        """Count a response status."""
        key = str(status)
        self.by_status[key] = self.by_status.get(key, 0) + 1

    def fault(self, kind: str) -> None:
        """Count an injected fault of ``kind``."""
        self.faults[kind] = self.faults.get(kind, 0) + 1

    def prefilled(self, input_tokens: int, cached_tokens: int, cache_key: Any = None) -> None:
        """Count a prompt the model read: its tokens, the part the prefix cache served, its prompt_cache_key."""
        self.input_tokens += input_tokens
        self.cached_tokens += cached_tokens
        if isinstance(cache_key, str):
            self.cache_keys[cache_key] = self.cache_keys.get(cache_key, 0) + 1

    def seen(self, h: bytes) -> int:
        """Record one more request with body hash ``h``; return how many came before it."""
        prior = self.hash_counts.get(h, 0)
        self.hash_counts[h] = prior + 1
        if prior:
            self.duplicates += 1
        return prior

    def snapshot(self, include_hashes: bool = False) -> dict[str, Any]:
        """JSON-ready copy of the counters (``request_hashes`` only when asked: it can be big)."""
        counts = self.hash_counts
        out: dict[str, Any] = {
            "started_at": self.started_at,
            "uptime_s": round(time.time() - self.started_at, 3),
            "total_requests": self.total,
            "by_endpoint": dict(self.by_endpoint),
            "by_status": dict(self.by_status),
            "rate_limited": self.rate_limited,
            "faults": dict(self.faults),
            "faults_injected": sum(self.faults.values()),
            "rule_hits": self.rule_hits,
            "no_response": self.no_response,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "input_tokens": self.input_tokens,
            "cached_tokens": self.cached_tokens,
            "cached_token_share": round(self.cached_tokens / self.input_tokens, 4) if self.input_tokens else 0.0,
            "prompt_cache_key_requests": sum(self.cache_keys.values()),
            "distinct_prompt_cache_keys": len(self.cache_keys),
            "distinct_requests": len(counts),
            "duplicate_requests": self.duplicates,
            "max_requests_per_hash": max(counts.values(), default=0),
        }
        if include_hashes:
            out["request_hashes"] = {h.hex(): n for h, n in counts.items()}
        return out
