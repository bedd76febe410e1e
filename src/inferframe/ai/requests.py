"""Turn one row's inputs into a request through the provider's own wire format, and estimate a call.

Each input column has a kind decided by its Arrow type: text (strings), image (image or binary
columns: encoded bytes), file (file columns: a path or URL read at run time), or messages (a list
of {role, content} structs: a whole conversation). Images are encoded once per row; retries reuse
the built body.

Example:
    >>> from inferframe.providers.spec import ProviderSpec
    >>> from inferframe.runtime.config import RuntimeConfig
    >>> from inferframe.ai.config import AICallConfig
    >>> c = AICallConfig("chat", ProviderSpec("openai"), "gpt-5-mini", "Be brief.", (), RuntimeConfig(), 1, "p",
    ...                  max_output_tokens=5)
    >>> build_request(c, ["Hi"]).body["messages"][1]
    {'role': 'user', 'content': 'Hi'}
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from inferframe.ai.config import AICallConfig
from inferframe.datatype import DataType
from inferframe.providers.interface import Request, RequestFormat, supports
from inferframe.providers.tokens import count_text
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
               cls: Any = None) -> dict | None:
    """The wire body for one row (None when an input is null); ``cls`` is the provider class when known."""
    for v in values:
        if v is None:
            return None
    if kinds is None:
        parts = [(v, "text", None) for v in values]
    else:
        parts = list(zip(values, kinds, names or [None] * len(values)))
    # The cap is passed only when set: a wire format of a plugin that takes none still builds every other body.
    cap = {} if c.max_output_tokens is None else {"max_output_tokens": c.max_output_tokens}
    return (cls or c.provider.wire_format()).request_body(c.endpoint, c.model, parts, c.system_message,
                                                            dict(c.options), dict(c.format_request), c.media, **cap)


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


def prompt_of(wire: Any, endpoint: str, body: dict) -> str | None:
    """The prompt of ``body`` as the server reads it (the wire format's ``prompt_text``): asked once per request, here."""
    return wire.prompt_text(endpoint, body) if supports(wire, RequestFormat) else None


class EstimatedRequest(Request):
    """A Request whose token estimate is made the first time ``est_tokens`` is read, from its prompt and bound.

    Only a request that is sent needs its estimate (the rate limiter reserves it); a rerun
    answers most rows from the cache and so never pays for estimating them. The estimate reads
    the request's own ``prompt`` and ``max_output_tokens``, never the body.

    Example:
        >>> r = EstimatedRequest("chat", {"messages": [{"role": "user", "content": "x" * 40}], "max_tokens": 5},
        ...                      "user\x1f" + "x" * 40, 5)
        >>> r.est_tokens, Request("chat", r.body, 21, r.prompt, 5) == r
        (21, True)
    """

    def __init__(self, endpoint: str, body: dict, prompt: str | None = None, max_output_tokens: int | None = None,
                 model: str | None = None, *, est_tokens: int | None = None, part_of_refused: bool = False) -> None:
        # Frozen, as Request: fields are set once, here (one per row of every batch: kept cheap).
        self.__dict__.update(endpoint=endpoint, body=body, prompt=prompt, max_output_tokens=max_output_tokens,
                             _model=model, _est=est_tokens, part_of_refused=part_of_refused)

    @property
    def est_tokens(self) -> int:  # type: ignore[override]
        est = self._est
        if est is None:
            est = (count_text(self.prompt, self._model) + 4 if self.prompt else 4) + (self.max_output_tokens or 0)
            object.__setattr__(self, "_est", est)
        return est

    def _fields(self) -> tuple:
        return self.endpoint, self.body, self.est_tokens, self.prompt, self.max_output_tokens, self.part_of_refused

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return self._fields() == (other.endpoint, other.body, other.est_tokens, other.prompt, other.max_output_tokens,
                                  other.part_of_refused)

    __hash__ = None  # type: ignore[assignment]  # a body is a dict, as for Request

    def __reduce__(self):
        return (Request, self._fields())  # a plain Request in another process


class TextRequests:
    """Requests of text rows from one body and one prompt built around a placeholder (see ``BodyTemplate``).

    The prompt text of a row is the template's, split at the placeholder, around the row's text:
    neither the body nor the prompt is built again per row.

    Parameters:
        c: the call.
        wire: its wire format.
        slot: the placeholder (a string no row holds).

    Example:
        >>> from inferframe.providers.spec import ProviderSpec
        >>> from inferframe.runtime.config import RuntimeConfig
        >>> c = AICallConfig("chat", ProviderSpec("lm_studio"), "m", "Be brief.", (), RuntimeConfig(), 1, "p",
        ...                  max_output_tokens=5)
        >>> t = TextRequests(c, c.provider.wire_format(), "{slot}")
        >>> r = t.request("Hi")
        >>> r.prompt == build_request(c, ["Hi"]).prompt, r.max_output_tokens, r.body["messages"][1]["content"]
        (True, 5, 'Hi')
    """

    def __init__(self, c: AICallConfig, wire: Any, slot: str) -> None:
        body = build_body(c, [slot], ["text"], None, wire)
        self.bodies = BodyTemplate(body, slot)
        prompt = prompt_of(wire, c.endpoint, body)
        self._around = prompt.split(slot) if prompt is not None and prompt.count(slot) == 1 else None
        self._wire, self._endpoint, self._model, self._bound = wire, c.endpoint, c.model, c.output_bound

    def fill(self, text: str) -> dict:
        """The body of a row of ``text``."""
        return self.bodies.fill(text)

    def request(self, text: str) -> EstimatedRequest:
        """The request of a row of ``text``, its prompt beside its body."""
        body = self.bodies.fill(text)
        around = self._around
        prompt = around[0] + text + around[1] if around is not None else prompt_of(self._wire, self._endpoint, body)
        return EstimatedRequest(self._endpoint, body, prompt, self._bound, self._model)


def build_request(c: AICallConfig, values: list, kinds: list[str] | None = None, names: list | None = None,
                  cls: Any = None) -> Request | None:
    """The request for one row (None when an input is null): the body, and beside it its prompt and output bound.

    The prompt text is asked of the wire format once, here; its token estimate is made when first read.
    """
    cls = cls or c.provider.wire_format()
    body = build_body(c, values, kinds, names, cls)
    if body is None:
        return None
    return EstimatedRequest(c.endpoint, body, prompt_of(cls, c.endpoint, body), c.output_bound, c.model)


def estimate_call(config: AICallConfig, rows: list[tuple]) -> dict:
    """Rows, input tokens, maximum output tokens and dollars for one AI call, before sending anything.

    Also what the provider's prompt cache could serve when rows that share the start of their
    prompt go out together (``cached_tokens``, see ``estimate_cached_tokens``) and the dollars that
    would save at the model's cached-input rate (``cache_saving_usd``; None for an unknown price).
    ``cost_usd`` is the price without any cache hit.

    Example:
        >>> from inferframe.providers.spec import ProviderSpec
        >>> from inferframe.runtime.config import RuntimeConfig
        >>> c = AICallConfig("chat", ProviderSpec("openai"), "m", None, (), RuntimeConfig(price=(1.0, 2.0)), 1, "p",
        ...                  max_output_tokens=10)
        >>> estimate_call(c, [("x" * 40,)])["max_output_tokens"]
        10
        >>> c = AICallConfig("chat", ProviderSpec("openai"), "m", "Rules: " + "be kind. " * 900, (),
        ...                  RuntimeConfig(price=(1.0, 2.0, 0.1)), 1, "p", max_output_tokens=10)
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
            request = build_request(config, list(parts), cls=cls)
        except (ValueError, TypeError):
            continue
        if request is None:
            continue
        # The prompt kept beside the body: an embedding's input is the row's text.
        prompt = request.prompt if request.prompt is not None else "".join(map(str, parts))
        i, o = count_text(prompt, config.model) + 4, request.max_output_tokens or 0
        n, inp, out = n + 1, inp + i, out + o
        if config.endpoint != "embeddings":  # embeddings have no prompt cache
            texts.append(request.prompt or "")
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
        texts: each prompt's text in the order the server reads it (``Request.prompt``).
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
