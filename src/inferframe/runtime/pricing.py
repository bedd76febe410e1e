"""Dollar prices per million tokens for common hosted models; ``set_prices`` overrides them per session.

Prices as published by the providers in 2026 for standard (non-batch) use. A price is
``(input, output)`` or ``(input, output, cached_input)``: the third is what a prompt-cache hit
costs per million input tokens (OpenAI bills the cached part of a prompt at a tenth of the input
rate on GPT-5 models, a quarter on GPT-4.1 and o4-mini, half on GPT-4o). Without it cached
tokens cost the input rate.

Example:
    >>> price_of("gpt-5-mini")
    (0.25, 2.0, 0.025)
    >>> round(cost_of(price_of("gpt-5-mini"), 10_000, 100, cached_tokens=8_192), 6)
    0.000857
    >>> cacheable_tokens("openai", 1500), cacheable_tokens("openai", 1000), cacheable_tokens("local", 1000)
    (1408, 0, 1000)
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Union

from inferframe.errors import PlanError

# (input, output) or (input, output, cached input) dollars per million tokens.
Price = Union[tuple[float, float], tuple[float, float, float]]

# model -> (input, output, cached input) $ per 1M tokens; embeddings have no prompt cache.
_DEFAULT: MappingProxyType[str, Price] = MappingProxyType({
    "gpt-5": (1.25, 10.0, 0.125),
    "gpt-5.1": (1.25, 10.0, 0.125),
    "gpt-5-mini": (0.25, 2.0, 0.025),
    "gpt-5-nano": (0.05, 0.40, 0.005),
    "gpt-4.1": (2.0, 8.0, 0.50),
    "gpt-4.1-mini": (0.40, 1.60, 0.10),
    "gpt-4.1-nano": (0.10, 0.40, 0.025),
    "gpt-4o": (2.50, 10.0, 1.25),
    "gpt-4o-mini": (0.15, 0.60, 0.075),
    "o3": (2.0, 8.0, 0.50),
    "o4-mini": (1.10, 4.40, 0.275),
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
})


# model -> the most tokens one answer may have (reasoning tokens included), as OpenAI's model pages give them.
# A budget reserves this for a request that sets no max_tokens: the server may answer that long.
_MAX_OUTPUT: MappingProxyType[str, int] = MappingProxyType({
    "gpt-5": 128_000, "gpt-5.1": 128_000, "gpt-5-mini": 128_000, "gpt-5-nano": 128_000,
    "gpt-4.1": 32_768, "gpt-4.1-mini": 32_768, "gpt-4.1-nano": 32_768,
    "gpt-4o": 16_384, "gpt-4o-mini": 16_384, "o3": 100_000, "o4-mini": 100_000,
})
# A model not listed: the largest limit above. A priced model of your own with a smaller limit: set max_tokens.
DEFAULT_MAX_OUTPUT = 128_000


def max_output_of(model: str | None) -> int:
    """The most output tokens one answer of ``model`` may have: its documented limit, else ``DEFAULT_MAX_OUTPUT``.

    Example:
        >>> max_output_of("gpt-4o-2024-08-06"), max_output_of("gpt-5-mini"), max_output_of("my-model")
        (16384, 128000, 128000)
    """
    if model in _MAX_OUTPUT:
        return _MAX_OUTPUT[model]
    best = max((m for m in _MAX_OUTPUT if (model or "").startswith(m + "-")), key=len, default=None)
    return _MAX_OUTPUT[best] if best else DEFAULT_MAX_OUTPUT


def check_price(value: Any, where: str = "price") -> Price:
    """A price as a tuple of floats: ``(input, output)`` or ``(input, output, cached_input)`` dollars per 1M tokens.

    Parameters:
        value: the price as given (a tuple or list of 2 or 3 numbers, each >= 0).
        where: how the message names the value (e.g. ``"set_prices(): my-model"``).

    Example:
        >>> check_price([1, 2]), check_price((1.25, 10, 0.125))
        ((1.0, 2.0), (1.25, 10.0, 0.125))
        >>> check_price((1.0,), "set_prices(): m")
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: set_prices(): m: a price is (input, output) or (input, output, cached_input) dollars per million tokens, each >= 0; got (1.0,).
    """
    ok = isinstance(value, (tuple, list)) and len(value) in (2, 3)
    if ok:
        try:
            floats = tuple(float(v) for v in value)
        except (TypeError, ValueError):
            ok = False
        else:
            ok = all(v >= 0 for v in floats) and not any(isinstance(v, bool) for v in value)
    if not ok:
        raise PlanError(f"{where}: a price is (input, output) or (input, output, cached_input) dollars per million "
                        f"tokens, each >= 0; got {value!r}.")
    return floats  # type: ignore[return-value]


def price_of(model: str | None, overrides: dict[str, Price] | None = None) -> Price | None:
    """Price for a model (``overrides`` first), matching dated snapshots (gpt-4o-2024-08-06) to their base name.

    Example:
        >>> price_of("gpt-4o-2024-08-06"), price_of("my-model", {"my-model": (0.5, 1.5)})
        ((2.5, 10.0, 1.25), (0.5, 1.5))
    """
    if not model:
        return None
    table = {**_DEFAULT, **(overrides or {})}
    if model in table:
        return table[model]
    best = max((m for m in table if model.startswith(m + "-")), key=len, default=None)
    return table[best] if best else None


def cached_rate(price: Price | None) -> float | None:
    """Dollars per million cached input tokens: the price's third figure, else its input rate (None: no price).

    Example:
        >>> cached_rate((1.25, 10.0, 0.125)), cached_rate((0.5, 1.5)), cached_rate(None)
        (0.125, 0.5, None)
    """
    if price is None:
        return None
    return price[2] if len(price) > 2 else price[0]


def cost_of(price: Price | None, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float:
    """Dollars for these tokens at ``price``; 0 without a price.

    ``cached_tokens`` is the part of ``input_tokens`` a prompt cache served: it costs the cached
    rate, the rest of the input the input rate.

    Example:
        >>> cost_of((1.0, 2.0), 1_000_000, 500_000)
        2.0
        >>> cost_of((1.0, 2.0, 0.1), 1_000_000, 500_000, cached_tokens=600_000)   # 0.4 + 0.06 + 1.0
        1.46
    """
    if price is None:
        return 0.0
    if cached_tokens <= 0:  # the usual answer: every row pays this (issue 36)
        total = input_tokens * price[0] + output_tokens * price[1]
    else:
        cached = min(cached_tokens, input_tokens)
        total = (input_tokens - cached) * price[0] + cached * cached_rate(price) + output_tokens * price[1]
    # Rounded to 12 places, which keeps hand-worked figures exact (1.46, not 1.4600000000000002), by way of a
    # multiply and an int: round(x, 12) goes through a decimal string and cost most of this function.
    return int(total * 1_000_000 + (0.5 if total >= 0 else -0.5)) / 1e12


def cache_saving(price: Price | None, cached_tokens: int) -> float:
    """Dollars that ``cached_tokens`` saved against paying the full input rate for them; 0 without a price.

    Example:
        >>> cache_saving((1.25, 10.0, 0.125), 1_000_000), cache_saving((0.5, 1.5), 1_000_000)
        (1.125, 0.0)
    """
    if price is None or cached_tokens <= 0:
        return 0.0
    return round(cached_tokens * (price[0] - cached_rate(price)) / 1_000_000, 12)


# provider -> (fewest shared prompt tokens a cache hit needs, the step cached tokens come in), where
# the provider documents it: OpenAI caches prompts of 1,024 tokens or more, hits in 128-token steps.
# Others (llama.cpp slots, vLLM/SGLang prefix caches) are taken to reuse any shared prefix.
PROMPT_CACHE_RULES: MappingProxyType[str, tuple[int, int]] = MappingProxyType({"openai": (1024, 128)})


def cacheable_tokens(provider: str | None, shared_tokens: int) -> int:
    """How many of ``shared_tokens`` (a prompt's start that an earlier prompt had) the provider's prompt cache serves.

    Example:
        >>> [cacheable_tokens("openai", n) for n in (1023, 1024, 1151, 1152)]
        [0, 1024, 1024, 1152]
    """
    minimum, step = PROMPT_CACHE_RULES.get(provider or "", (1, 1))
    if shared_tokens < minimum:
        return 0
    return minimum + (shared_tokens - minimum) // step * step
