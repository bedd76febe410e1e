"""Dollar prices per million tokens for common hosted models; users can override them.

Prices as published by the providers in 2026 for standard (non-batch) use.
"""

from __future__ import annotations

import threading

# model -> (input $ per 1M tokens, output $ per 1M tokens)
_DEFAULT: dict[str, tuple[float, float]] = {
    "gpt-5": (1.25, 10.0),
    "gpt-5.1": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.0),
    "gpt-4o-mini": (0.15, 0.60),
    "o3": (2.0, 8.0),
    "o4-mini": (1.10, 4.40),
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
}
_PRICES = dict(_DEFAULT)
_LOCK = threading.Lock()


def set_prices(prices: dict[str, tuple[float, float]]) -> None:
    """Set or override prices: ``{"my-model": (input_per_1M, output_per_1M)}``.

    Example:
        >>> set_prices({"my-model": (0.5, 1.5)})
        >>> price_of("my-model")
        (0.5, 1.5)
    """
    with _LOCK:
        for model, (inp, out) in prices.items():
            if inp < 0 or out < 0:
                raise ValueError(f"prices must be >= 0, got {model}: {(inp, out)}")
            _PRICES[model] = (float(inp), float(out))


def price_of(model: str | None) -> tuple[float, float] | None:
    """Price for a model, matching dated snapshots (gpt-4o-2024-08-06) to their base name."""
    if not model:
        return None
    with _LOCK:
        if model in _PRICES:
            return _PRICES[model]
        best = max((m for m in _PRICES if model.startswith(m + "-")), key=len, default=None)
        return _PRICES[best] if best else None


def cost_of(model: str | None, input_tokens: int, output_tokens: int, local: bool = False) -> float:
    if local:
        return 0.0
    p = price_of(model)
    if p is None:
        return 0.0
    return (input_tokens * p[0] + output_tokens * p[1]) / 1_000_000
