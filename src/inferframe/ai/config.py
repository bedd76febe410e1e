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
        options: request options passed into the body, as sorted pairs.
        runtime: limits, retries, budget, cache and price, resolved from the session.
        n_parts: how many input expressions make one row's message.
        label: how the progress line and last_run() name this call.
        media: how images and files become message parts.
        return_format: a Pydantic model, JSON schema, Literal/Enum or choices; validated per row.
        format_request: request fields that ask the server to enforce the schema.
        repair: ask once more when an answer breaks return_format.
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

    @functools.cached_property
    def max_output_tokens(self) -> int | None:
        """The answer's token bound every request of this call carries (``max_tokens``, folded once by ``parse_options``).

        ``n_predict`` is llama.cpp's own name for it, passed through as the user wrote it.

        Example:
            >>> AICallConfig("chat", ProviderSpec("local"), "m", None, (("max_tokens", 7),), RuntimeConfig(), 1, "p").max_output_tokens
            7
        """
        options = dict(self.options)
        bound = options.get("max_tokens", options.get("n_predict"))
        return bound if isinstance(bound, int) and bound > 0 else None

    @property
    def limits_key(self) -> str:
        """Calls with the same key share one rate limit, in-flight bound and breaker (as the server's limits are shared)."""
        p = self.provider
        return f"{p.name}{'@' + p.base_url if p.base_url else ''}|{self.model}"

    def identity(self) -> list:
        """What the run history's fingerprint covers: endpoint, provider and URL, model, instructions, options, format."""
        p = self.provider
        return [self.endpoint, p.name, p.base_url, self.model, self.system_message, repr(self.options),
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
