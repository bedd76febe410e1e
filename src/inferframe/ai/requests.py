"""Turn one row's inputs into a request through the provider's own wire format, and estimate a call.

Each input column has a kind decided by its Arrow type: text (strings), image (image or binary
columns: encoded bytes), file (file columns: a path or URL read at run time), or messages (a list
of {role, content} structs: a whole conversation). Images are encoded once per row; retries reuse
the built body.

Example:
    >>> from inferframe.providers.spec import ProviderSpec
    >>> from inferframe.runtime.config import RuntimeConfig
    >>> from inferframe.ai.config import AICallConfig
    >>> c = AICallConfig("chat", ProviderSpec("openai"), "gpt-5-mini", "Be brief.", (("max_tokens", 5),), RuntimeConfig(), 1, "p")
    >>> build_request(c, ["Hi"]).body["messages"][1]
    {'role': 'user', 'content': 'Hi'}
"""

from __future__ import annotations

import pyarrow as pa

from inferframe.ai.config import AICallConfig
from inferframe.datatype import DataType
from inferframe.providers.interface import Provider, Request
from inferframe.providers.registry import capabilities, provider_class


def column_kind(t: pa.DataType) -> str:
    """text, image, file or messages: how a column's values become message parts."""
    dt = DataType(t)
    if dt.is_file():
        return "file"
    if dt.is_image() or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "image"
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type):
        names = {t.value_type.field(i).name for i in range(t.value_type.num_fields)}
        if {"role", "content"} <= names:
            return "messages"
    return "text"


def build_body(c: AICallConfig, values: list, kinds: list[str] | None = None, names: list | None = None,
               cls: type[Provider] | None = None) -> dict | None:
    """The wire body for one row (None when an input is null); ``cls`` is the provider class when known."""
    if any(v is None for v in values):
        return None
    kinds = kinds or ["text"] * len(values)
    names = names or [None] * len(values)
    return (cls or provider_class(c.provider)).request_body(c.endpoint, c.model, list(zip(values, kinds, names)),
                                                            c.system_message, dict(c.options), dict(c.format_request),
                                                            c.media)


def build_request(c: AICallConfig, values: list, kinds: list[str] | None = None, names: list | None = None,
                  cls: type[Provider] | None = None) -> Request | None:
    """The request for one row with its token estimate (None when an input is null)."""
    cls = cls or provider_class(c.provider)
    body = build_body(c, values, kinds, names, cls)
    if body is None:
        return None
    inp, out = cls.estimate_tokens(body, c.model)
    return Request(c.endpoint, body, inp + out)


def estimate_call(config: AICallConfig, rows: list[tuple]) -> dict:
    """Rows, input tokens, maximum output tokens and dollars for one AI call, before sending anything.

    Example:
        >>> from inferframe.providers.spec import ProviderSpec
        >>> from inferframe.runtime.config import RuntimeConfig
        >>> c = AICallConfig("chat", ProviderSpec("openai"), "m", None, (("max_tokens", 10),), RuntimeConfig(price=(1.0, 2.0)), 1, "p")
        >>> estimate_call(c, [("x" * 40,)])["max_output_tokens"]
        10
    """
    cls = provider_class(config.provider)
    n = inp = out = 0
    for parts in rows:
        try:
            body = build_body(config, list(parts))
        except (ValueError, TypeError):
            continue
        if body is None:
            continue
        i, o = cls.estimate_tokens(body, config.model)
        n, inp, out = n + 1, inp + i, out + o
    price = config.runtime.price
    free = capabilities(config.provider).local
    cost = 0.0 if free else (inp * price[0] + out * price[1]) / 1_000_000 if price is not None else None
    return {
        "call": config.label, "provider": config.provider.name, "model": config.model, "rows": n,
        "input_tokens": inp, "max_output_tokens": out if out else None, "cost_usd": cost,
    }
