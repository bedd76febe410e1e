"""What one AI call needs at run time, resolved when the plan is built; pickles without secrets.

Example:
    >>> from inferframe.providers.spec import ProviderSpec
    >>> from inferframe.runtime.config import RuntimeConfig
    >>> c = AICallConfig("chat", ProviderSpec("local"), "gemma-3-270m", None, (), RuntimeConfig(), 1, "prompt[gemma-3-270m]")
    >>> c.limits_key
    'local|gemma-3-270m'
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from inferframe.providers.interface import MediaOptions
from inferframe.providers.spec import ProviderSpec
from inferframe.runtime.config import RuntimeConfig


@dataclasses.dataclass(frozen=True)
class AICallConfig:
    """Everything one AI call needs at run time; pickles without secrets.

    Parameters:
        endpoint: "chat", "responses" or "embeddings".
        provider: which provider and where (a key only as an opaque handle).
        model: the model name.
        system_message: instructions sent with every row.
        options: request options passed into the body, as sorted pairs (never the answer's cap).
        runtime: limits, retries, budget, cache and price, resolved from the session.
        n_parts: how many input expressions make one row's message.
        label: how the progress line and last_run() name this call.
        media: how images and files become message parts.
        return_format: a Pydantic model, JSON schema, Literal/Enum or choices; validated per row.
        format_request: request fields that ask the server to enforce the schema.
        repair: ask once more when an answer breaks return_format.
        max_output_tokens: the answer's token cap every request carries: the user's (under any of its names,
            read once by ``ai.options.answer_cap``) or the provider's default for the format; None: the
            server's. The wire format spells it per endpoint; the budget, sem_join and the local provider read it.
    """

    endpoint: str
    provider: ProviderSpec
    model: str | None
    system_message: str | None
    options: tuple
    runtime: RuntimeConfig
    n_parts: int
    label: str
    media: MediaOptions = MediaOptions()
    return_format: Any = None
    format_request: tuple = ()
    repair: bool = False
    max_output_tokens: int | None = None

    @functools.cached_property
    def output_bound(self) -> int | None:
        """The most tokens an answer may take, for the budget and the estimate: ``max_output_tokens``, else
        ``n_predict`` (llama.cpp's own name for a cap, passed through in the body as the user wrote it).

        Example:
            >>> AICallConfig("chat", ProviderSpec("local"), "m", None, (("n_predict", 7),), RuntimeConfig(), 1, "p").output_bound
            7
        """
        if self.max_output_tokens is not None:
            return self.max_output_tokens
        bound = dict(self.options).get("n_predict")
        return bound if isinstance(bound, int) and bound > 0 else None

    @property
    def limits_key(self) -> str:
        """Calls with the same key share one rate limit, in-flight bound and breaker (as the server's limits are shared)."""
        p = self.provider
        return f"{p.name}{'@' + p.base_url if p.base_url else ''}|{self.model}"

    def identity(self) -> list:
        """What the run history's fingerprint covers: endpoint, provider and URL, model, instructions, options, format.

        The cap is listed among the options, as ``max_tokens``, as it was when it was one: a run's fingerprint
        is the one its earlier runs in the history have.
        """
        p = self.provider
        options = self.options if self.max_output_tokens is None else \
            tuple(sorted({**dict(self.options), "max_tokens": self.max_output_tokens}.items()))
        return [self.endpoint, p.name, p.base_url, self.model, self.system_message, repr(options),
                repr(self.format_request), repr(self.return_format), self.n_parts]

    def summary(self) -> dict:
        """The call as the run history lists it."""
        return {"label": self.label, "provider": self.provider.name, "base_url": self.provider.base_url,
                "model": self.model, "endpoint": self.endpoint, "prompt_version": self.runtime.prompt_version}


@dataclasses.dataclass(frozen=True)
class EmbedCallConfig(AICallConfig):
    """An AI call config plus what embeddings need: the vector size and the packing limits."""

    size: int = 0
    max_input_tokens: int | None = None
    max_batch_tokens: int = 300_000
    max_batch_inputs: int = 2048
