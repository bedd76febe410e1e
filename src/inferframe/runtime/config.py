"""How hard to push one provider and model, resolved when the plan is built and carried with it.

Example:
    >>> RuntimeConfig(rpm=600).cache_policy.reads
    True
"""

from __future__ import annotations

import dataclasses

from inferframe.runtime.cache import CachePolicy
from inferframe.runtime.retry import RetryPolicy


# The ceiling on requests in flight when the user sets none: twice what Little's law asks for at
# 30,000 RPM and 1 s latency (500), rounded up to a power of two.
DEFAULT_MAX_CONCURRENCY = 1024
# Rows pending for prefix ordering: enough for many groups of a few hundred rows; a few MB of prompts.
DEFAULT_PREFIX_WINDOW = 4096
# The bound while the limits are unknown: what a server that says nothing about its limits gets.
DEFAULT_BASE_CONCURRENCY = 64


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """How hard to push one provider+model, and what the answers cost.

    Parameters:
        max_concurrency: the hard ceiling on requests in flight for the whole job. Below it the
            bound is sized from the rate limit, once known, and the measured latency (see
            runtime.concurrency); the default ceiling, ``DEFAULT_MAX_CONCURRENCY``, lets a
            30,000 RPM limit at 1 s latency be reached with twice the headroom.
        base_concurrency: the bound while no rate limit is known, and the least it is sized to
            (None: ``min(DEFAULT_BASE_CONCURRENCY, max_concurrency)``).
        initial_concurrency: where AIMD starts (None: the bound).
        adaptive: let AIMD move the bound and size it from the limits (False: fixed).
        rpm / tpm: request and token budgets per minute (None: learn from the server's hints).
        retry: the retry policy.
        max_cost: stop sending once this many dollars were spent.
        max_tokens_budget: stop sending once this many tokens were used.
        on_error: "null" keeps failures as data; "raise" stops at the first one.
        stop_on_recurring: a refusal that recurs on every row (the same 4xx message on the first rows: an
            unknown model, an invalid parameter) stops the job (the breaker); False when ``on_error="null"``
            was given, which keeps every such row as data.
        cache_policy: how the response cache is used.
        cache_dir: where the response cache lives (resolved when the plan is built).
        cache_store: the secret handle of a PostgreSQL store's URL (``secrets.put_store``), which then
            holds the answers instead of the SQLite file in ``cache_dir``; None: the file.
        prompt_version: a label of yours that is part of the cache key (bump it to re-ask).
        batch: answer through the provider's Batch API.
        batch_poll_interval: first wait between polls of a batch, in seconds.
        price: dollars per million (input, output) tokens (None: free or unknown).
        prefix_order: send rows that share a prompt prefix together, on one server slot where
            the server has slots, so its prompt cache serves them (see runtime.scheduler); the
            output order never changes.
        prefix_window: rows kept pending for that ordering (memory grows with it).
    """

    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    base_concurrency: int | None = None
    initial_concurrency: int | None = None
    adaptive: bool = True
    rpm: float | None = None
    tpm: float | None = None
    retry: RetryPolicy = RetryPolicy()
    max_cost: float | None = None
    max_tokens_budget: int | None = None
    on_error: str = "null"
    stop_on_recurring: bool = True
    cache_policy: CachePolicy = CachePolicy.READ_WRITE
    cache_dir: str | None = None
    cache_store: str | None = None
    prompt_version: str | None = None
    batch: bool = False
    batch_poll_interval: float = 5.0
    price: tuple[float, float] | None = None
    prefix_order: bool = True
    prefix_window: int = DEFAULT_PREFIX_WINDOW

    def __post_init__(self) -> None:
        object.__setattr__(self, "cache_policy", CachePolicy(self.cache_policy))

    @property
    def concurrency_base(self) -> int:
        """The in-flight bound while no rate limit is known (never above the ceiling).

        Example:
            >>> RuntimeConfig().concurrency_base, RuntimeConfig(max_concurrency=8).concurrency_base
            (64, 8)
        """
        return min(self.base_concurrency or DEFAULT_BASE_CONCURRENCY, self.max_concurrency)

