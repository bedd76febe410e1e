"""Embeddings over OpenAI-compatible ``/v1/embeddings`` endpoints, through the same runtime as ``prompt()``.

Example:
    >>> from inferframe import col
    >>> from inferframe.functions.embed_api import api_embed_text
    >>> expr = api_embed_text(col("doc"), provider="openai", base_url="http://127.0.0.1:8000/v1",
    ...                       model="text-embedding-3-small")
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression
from inferframe.functions.ai import _RUNTIME_OPTIONS, AICallConfig, _ai_expression, _parts, cache_settings
from inferframe.providers import base as providers
from inferframe.runtime import RuntimeConfig
from inferframe.runtime.retry import RetryPolicy


# Output sizes of common embedding models, so the column type is exact before anything is sent.
EMBEDDING_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


def api_embed_text(text: Any, *, provider: str | providers.ProviderSpec | None = None, model: str | None = None,
                   dimensions: int | None = None, **options: Any) -> Expression:
    """Embed every row's text through an OpenAI-compatible /v1/embeddings endpoint.

    The column is a fixed-size float32 vector whose size is known before the run (from the
    model table or ``dimensions=``). It runs through the same runtime as ``prompt()``: rate
    limits, retries, errors as data, the response cache, and ``batch=True`` for the Batch API.

    Parameters:
        text: the text column.
        provider: "openai" or another OpenAI-compatible provider.
        model: the embedding model, e.g. "text-embedding-3-small".
        dimensions: the vector size; required for models not in the table.
        **options: runtime options as for ``prompt()`` (max_concurrency, rpm, tpm, cache, batch, ...).

    Example:
        >>> from inferframe import col
        >>> expr = api_embed_text(col("doc"), provider="openai", base_url="http://127.0.0.1:8000/v1",
        ...                       model="text-embedding-3-small")
    """
    parts = _parts(text)
    spec = providers.resolve(provider or "openai", model=model, base_url=options.pop("base_url", None),
                             api_key=options.pop("api_key", None))
    providers.check_ready(spec)
    model = model or "text-embedding-3-small"
    size = dimensions or EMBEDDING_DIMENSIONS.get(model)
    if not size:
        raise PlanError(f"embed_text() does not know how many dimensions {model!r} returns; pass dimensions=N.")
    runtime_opts = {k: options.pop(k) for k in list(options) if k in _RUNTIME_OPTIONS}
    if options:
        raise PlanError(f"embed_text() got unknown options {sorted(options)}.")
    info = providers.REGISTRY.get(spec.name)
    runtime = RuntimeConfig(
        max_concurrency=int(runtime_opts.get("max_concurrency") or info.default_concurrency or 64),
        rpm=runtime_opts.get("rpm"), tpm=runtime_opts.get("tpm"),
        retry=RetryPolicy(max_attempts=int(runtime_opts.get("max_retries", 5)) + 1),
        max_cost=runtime_opts.get("max_cost"), on_error=runtime_opts.get("on_error", "null"),
        **cache_settings(runtime_opts), batch=bool(runtime_opts.get("batch", False)),
        batch_poll_interval=float(runtime_opts.get("batch_poll_interval", 5.0)),
    )
    config = AICallConfig(
        endpoint="embeddings", provider=spec, model=model, system_message=None,
        options=(("dimensions", dimensions),) if dimensions else (), runtime=runtime, n_parts=len(parts),
        label=f"embed[{model}]",
    )
    return _ai_expression(config, parts, pa.list_(pa.float32(), size), error_column=runtime_opts.get("error_column", True),
                          usage_column=runtime_opts.get("usage_column", False), name="embed_text",
                          batch=50_000 if runtime.batch else 128)
