"""Dollar prices per million tokens for common hosted models; ``set_prices`` overrides them per session.

Prices as published by the providers in 2026 for standard (non-batch) use.
"""

from __future__ import annotations


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


def price_of(model: str | None, overrides: dict[str, tuple[float, float]] | None = None) -> tuple[float, float] | None:
    """Price for a model (``overrides`` first), matching dated snapshots (gpt-4o-2024-08-06) to their base name.

    Example:
        >>> price_of("gpt-4o-2024-08-06"), price_of("my-model", {"my-model": (0.5, 1.5)})
        ((2.5, 10.0), (0.5, 1.5))
    """
    if not model:
        return None
    table = {**_DEFAULT, **(overrides or {})}
    if model in table:
        return table[model]
    best = max((m for m in table if model.startswith(m + "-")), key=len, default=None)
    return table[best] if best else None


def cost_of(price: tuple[float, float] | None, input_tokens: int, output_tokens: int) -> float:
    """Dollars for these tokens at ``price`` (dollars per million input and output tokens); 0 without a price.

    Example:
        >>> cost_of((1.0, 2.0), 1_000_000, 500_000)
        2.0
    """
    if price is None:
        return 0.0
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
