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
from inferframe.runtime.prefix import shared_prefix_chars
from inferframe.runtime.pricing import cache_saving, cacheable_tokens, cost_of


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
    for v in values:
        if v is None:
            return None
    if kinds is None:
        parts = [(v, "text", None) for v in values]
    else:
        parts = list(zip(values, kinds, names or [None] * len(values)))
    return (cls or c.provider.wire_format()).request_body(c.endpoint, c.model, parts, c.system_message,
                                                            dict(c.options), dict(c.format_request), c.media)


class BodyTemplate:
    """Bodies of text rows from one body built around a placeholder: only the containers holding the text are copied.

    Building every row's body through the provider's wire format cost about 10 us a row
    (py-spy of bench/prompt_throughput.py); text rows differ only in one string.

    Parameters:
        body: a body holding ``slot`` as one whole string value, exactly once.
        slot: the placeholder.

    Example:
        >>> t = BodyTemplate({"model": "m", "messages": [{"role": "user", "content": "@"}], "n": 1}, "@")
        >>> t.fill("hi")
        {'model': 'm', 'messages': [{'role': 'user', 'content': 'hi'}], 'n': 1}
        >>> t.fill("a")["messages"] is t.fill("b")["messages"]
        False
    """

    def __init__(self, body: dict, slot: str) -> None:
        found: list[tuple] = []

        def walk(node, path: tuple) -> None:
            items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
            for k, v in items:
                if isinstance(v, str):
                    if slot in v:
                        found.append(path + (k,) if v == slot else None)
                else:
                    walk(v, path + (k,))

        walk(body, ())
        if len(found) != 1 or found[0] is None:
            raise ValueError("the body must hold the slot once, as a whole string")
        self.body, self.path = body, found[0]

    def fill(self, text: str) -> dict:
        """The body with ``text`` where the slot was."""
        return self._fill(self.body, 0, text)

    def _fill(self, node, depth: int, text: str):
        key = self.path[depth]
        copy = dict(node) if isinstance(node, dict) else list(node)
        copy[key] = text if depth == len(self.path) - 1 else self._fill(node[key], depth + 1, text)
        return copy


class EstimatedRequest(Request):
    """A Request whose token estimate is made the first time ``est_tokens`` is read.

    Only a request that is sent needs its estimate (the rate limiter reserves it); a rerun
    answers most rows from the cache and so never pays for estimating them.

    Example:
        >>> from inferframe.providers.openai import OpenAIProvider
        >>> r = EstimatedRequest("chat", {"messages": [{"role": "user", "content": "x" * 40}], "max_tokens": 5},
        ...                      OpenAIProvider, None)
        >>> r.est_tokens, Request("chat", r.body, 21) == r
        (21, True)
    """

    def __init__(self, endpoint: str, body: dict, cls: type[Provider] | None = None, model: str | None = None, *,
                 est_tokens: int | None = None) -> None:
        # Frozen, as Request: fields are set once, here (one per row of every batch: kept cheap).
        self.__dict__.update(endpoint=endpoint, body=body, _estimator=(cls, model), _est=est_tokens)

    @property
    def est_tokens(self) -> int:  # type: ignore[override]
        est = self._est
        if est is None:
            cls, model = self._estimator
            inp, out = cls.estimate_tokens(self.body, model)
            est = inp + out
            object.__setattr__(self, "_est", est)
        return est

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return (self.endpoint, self.body, self.est_tokens) == (other.endpoint, other.body, other.est_tokens)

    __hash__ = None  # type: ignore[assignment]  # a body is a dict, as for Request

    def __reduce__(self):
        return (Request, (self.endpoint, self.body, self.est_tokens))  # a plain Request in another process


def build_request(c: AICallConfig, values: list, kinds: list[str] | None = None, names: list | None = None,
                  cls: type[Provider] | None = None) -> Request | None:
    """The request for one row (None when an input is null); its token estimate is made when first read."""
    cls = cls or c.provider.wire_format()
    body = build_body(c, values, kinds, names, cls)
    if body is None:
        return None
    return EstimatedRequest(c.endpoint, body, cls, c.model)


def estimate_call(config: AICallConfig, rows: list[tuple]) -> dict:
    """Rows, input tokens, maximum output tokens and dollars for one AI call, before sending anything.

    Also what the provider's prompt cache could serve when rows that share the start of their
    prompt go out together (``cached_tokens``, see ``estimate_cached_tokens``) and the dollars that
    would save at the model's cached-input rate (``cache_saving_usd``; None for an unknown price).
    ``cost_usd`` is the price without any cache hit.

    Example:
        >>> from inferframe.providers.spec import ProviderSpec
        >>> from inferframe.runtime.config import RuntimeConfig
        >>> c = AICallConfig("chat", ProviderSpec("openai"), "m", None, (("max_tokens", 10),), RuntimeConfig(price=(1.0, 2.0)), 1, "p")
        >>> estimate_call(c, [("x" * 40,)])["max_output_tokens"]
        10
        >>> c = AICallConfig("chat", ProviderSpec("openai"), "m", "Rules: " + "be kind. " * 900, (("max_tokens", 10),),
        ...                  RuntimeConfig(price=(1.0, 2.0, 0.1)), 1, "p")
        >>> est = estimate_call(c, [(f"question {i}",) for i in range(10)])
        >>> est["cached_tokens"], round(est["cache_saving_usd"], 6)
        (17280, 0.015552)
    """
    cls = config.provider.wire_format()
    n = inp = out = 0
    texts: list[str] = []
    tokens: list[int] = []
    for parts in rows:
        try:
            body = build_body(config, list(parts))
        except (ValueError, TypeError):
            continue
        if body is None:
            continue
        i, o = cls.estimate_tokens(body, config.model)
        n, inp, out = n + 1, inp + i, out + o
        if config.endpoint != "embeddings":  # embeddings have no prompt cache
            texts.append(cls.prompt_text(config.endpoint, body) or "")
            tokens.append(i)
    cached = sum(estimate_cached_tokens(texts, tokens, config.provider.name))
    price = config.runtime.price
    free = config.provider.capabilities().local
    cost = 0.0 if free else cost_of(price, inp, out) if price is not None else None
    saving = 0.0 if free else cache_saving(price, cached) if price is not None else None
    return {
        "call": config.label, "provider": config.provider.name, "model": config.model, "rows": n,
        "input_tokens": inp, "max_output_tokens": out if out else None, "cost_usd": cost,
        "cached_tokens": cached, "cache_saving_usd": saving,
    }


def estimate_cached_tokens(texts: list[str], tokens: list[int], provider: str | None = None) -> list[int]:
    """Per prompt, the input tokens a prompt cache could serve when prompts that share a start go out together.

    The characters each prompt shares with the one before it in sorted order
    (``runtime.prefix.shared_prefix_chars``) become tokens in proportion to the prompt's estimated
    tokens; the provider's rule (``runtime.pricing.cacheable_tokens``: OpenAI caches from 1,024
    shared tokens, in steps of 128) says how many of those a hit serves.

    Parameters:
        texts: each prompt's text in the order the server reads it (``openai_format.prompt_text``).
        tokens: each prompt's estimated input tokens.
        provider: the provider's registered name (its caching rule), None: any shared prefix counts.

    Example:
        >>> long = "Shared instructions. " * 400   # 8,400 characters
        >>> estimate_cached_tokens([long + "a?", long + "b?", "unrelated"], [2100, 2100, 5], "openai")
        [0, 2048, 0]
    """
    shared = shared_prefix_chars(texts)
    out = []
    for text, n, chars in zip(texts, tokens, shared):
        # The sort puts identical prompts side by side: a whole repeat is at most the prompt's tokens.
        out.append(cacheable_tokens(provider, n * chars // len(text)) if chars and text else 0)
    return out
