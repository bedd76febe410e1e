"""How hard to push one provider and model, resolved when the plan is built and carried with it.

Example:
    >>> RuntimeConfig(rpm=600).cache_policy.reads
    True
"""

from __future__ import annotations

import dataclasses

from inferframe.runtime.cache import CachePolicy
from inferframe.runtime.retry import RetryPolicy


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """How hard to push one provider+model, and what the answers cost.

    Parameters:
        max_concurrency: most requests in flight for the whole job.
        initial_concurrency: where AIMD starts (None: max_concurrency).
        adaptive: let AIMD move the bound below max_concurrency.
        rpm / tpm: request and token budgets per minute (None: learn from the server's hints).
        retry: the retry policy.
        max_cost: stop sending once this many dollars were spent.
        max_tokens_budget: stop sending once this many tokens were used.
        on_error: "null" keeps failures as data; "raise" stops at the first one.
        cache_policy: how the response cache is used.
        cache_dir: where the response cache lives (resolved when the plan is built).
        prompt_version: a label of yours that is part of the cache key (bump it to re-ask).
        batch: answer through the provider's Batch API.
        batch_poll_interval: first wait between polls of a batch, in seconds.
        price: dollars per million (input, output) tokens (None: free or unknown).
    """

    max_concurrency: int = 64
    initial_concurrency: int | None = None
    adaptive: bool = True
    rpm: float | None = None
    tpm: float | None = None
    retry: RetryPolicy = RetryPolicy()
    max_cost: float | None = None
    max_tokens_budget: int | None = None
    on_error: str = "null"
    cache_policy: CachePolicy = CachePolicy.READ_WRITE
    cache_dir: str | None = None
    prompt_version: str | None = None
    batch: bool = False
    batch_poll_interval: float = 5.0
    price: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "cache_policy", CachePolicy(self.cache_policy))
