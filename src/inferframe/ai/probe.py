"""The vector size of an embedding model nobody listed: one probe request at plan time, cached like any row.

Example:
    >>> # probe_dimensions(config)  -> 640 for the local gemma-3-270m, from one request embedding "probe"
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from inferframe.ai.config import AICallConfig
from inferframe.ai.requests import build_body
from inferframe.errors import PlanError
from inferframe.providers.interface import Request
from inferframe.runtime.cache import CachePolicy, cache_key, open_cache
from inferframe.session import cache_url_of


# (provider identity, cache key of the probe request) -> vector size; one probe per process
_PROBED: dict[tuple[str, str], int] = {}


def probe_dimensions(config: AICallConfig) -> int:
    """The vector size of ``config``'s model, from one request embedding "probe" (cached like any row).

    Raises PlanError naming the server and the fix (pass dimensions=N) when the request fails.

    Example:
        >>> # probe_dimensions(config)  -> 640 for the local gemma-3-270m
    """
    body = build_body(config, ["probe"])

    async def probe() -> tuple[Any, str]:
        provider = config.provider.connect()
        try:
            identity = provider.cache_identity
            key = cache_key(identity, "embeddings", body, config.runtime.prompt_version)
            size = _PROBED.get((identity, key))
            if size is not None:
                return size, provider.service
            policy = config.runtime.cache_policy
            cache = None if policy == CachePolicy.OFF else open_cache(config.runtime.cache_dir, cache_url_of(config.runtime.cache_store))
            hit = cache.get(key) if cache is not None and policy.reads else None
            if hit is not None:
                outcome_value = hit[0]
            else:
                outcome = await provider.send(Request("embeddings", body, 0))
                if not outcome.ok:
                    return outcome.message, provider.service
                outcome_value = outcome.value
                if cache is not None and policy.writes:
                    cache.put(key, [list(map(float, outcome_value[0]))], outcome.usage.input_tokens if outcome.usage else 0, 0)
            size = len(outcome_value[0])
            _PROBED[(identity, key)] = size
            return size, provider.service
        finally:
            await provider.aclose()

    what = f"embed_text() needs the vector size of {config.model!r} before the run"
    try:
        # Planning may happen inside a running event loop (notebooks): the probe gets a loop of its own.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer, service = pool.submit(asyncio.run, probe()).result()
    except Exception as e:  # the server could not be started or reached
        raise PlanError(f"{what}, and the probe request failed: {type(e).__name__}: {e}. "
                        "Pass dimensions=N (the model's vector size) to plan without it.") from e
    if isinstance(answer, str) or not answer:
        raise PlanError(f"{what}, and the probe request to {service} failed: {answer or 'an empty vector'}. "
                        "Check the model name, or pass dimensions=N (the model's vector size) to plan without it.")
    return answer
