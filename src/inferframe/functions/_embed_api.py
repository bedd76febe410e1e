"""``embed_text`` over OpenAI-compatible ``/v1/embeddings`` endpoints: the plan side (sizes, limits, options).

Example:
    >>> from inferframe import col
    >>> from inferframe.models.registry import resolve_model
    >>> options = {"base_url": "http://127.0.0.1:8000/v1"}
    >>> ref = resolve_model("embed_text", "openai", "text-embedding-3-small", kind="embedding", options=options)
    >>> api_embed_call(col("doc"), ref, None, options).value_type
    FixedSizeListType(fixed_size_list<item: float>[1536])
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

from inferframe.ai.call import AICall, ModelRef, sizing
from inferframe.ai.config import EmbedCallConfig
from inferframe.ai.embed import EmbeddingOperator
from inferframe.ai.options import EMBEDDING, check, whole_number, parse_options
from inferframe.ai.probe import probe_dimensions
from inferframe.functions._calls import message_parts
from inferframe.providers.interface import embedding_max_input_tokens, embedding_size
from inferframe.session import current

# OpenAI's limit on the estimated tokens of one /v1/embeddings request.
DEFAULT_MAX_BATCH_TOKENS = 300_000
_POSITIVE = whole_number(1)


def api_embed_call(text: Any, ref: ModelRef, dimensions: int | None, options: dict) -> AICall:
    """Embed every row's text through an OpenAI-compatible /v1/embeddings endpoint.

    The column is a fixed-size float32 vector whose size is known before the run: from the model
    table, ``dimensions=``, or else one probe request at plan time (embedding "probe"). It runs
    through the same runtime as ``prompt()``: rate limits, retries, errors as data, the response cache.

    Rows are packed into few requests (``input: [t1, t2, ...]``) up to ``max_batch_inputs`` inputs
    and ``max_batch_tokens`` estimated tokens each; the vectors come back in row order. The cache
    stays per text, keyed as if each row were sent alone, so a rerun grouped differently (or an
    older one-row-per-request run) is answered from it; identical texts are sent once per run. If a
    packed request is refused as bad (400), it is split in halves until the bad input stands alone;
    after other lasting failures every row in the request gets the error. A vector of another size
    than the column's is an error of kind "malformed" for its row; with ``on_error="raise"`` that,
    like any failed row, stops the job with ``RowFailed`` (a refused pack raises before it is split).

    A text over ``max_input_tokens`` is split into chunks of at most that many tokens; each chunk
    is embedded (and cached) on its own, and the row's vector is their mean weighted by token
    count, scaled to unit length (the OpenAI cookbook's way). Tokens are counted exactly with
    tiktoken for OpenAI models, with the server's tokenizer for the local model, else estimated.

    ``batch=True`` uses the OpenAI Batch API instead: one row (or chunk) per line, no packing.

    Parameters:
        text: the text column.
        ref: the model, resolved by ``resolve_model``: "openai", "local" (the embedded llama.cpp server) or
            another OpenAI-compatible provider, and the embedding model (default "text-embedding-3-small";
            "gemma-3-270m" for "local").
        dimensions: the vector size; asks the server to shorten the vectors.
        options: max_batch_inputs (default 2048; 8 for "local"), max_batch_tokens (default 300,000),
            max_input_tokens (default: 8191 for OpenAI's models, 512 for "local", else no splitting);
            runtime options as for ``prompt()`` (max_concurrency, rpm, tpm, cache, batch, ...).

    Example:
        >>> from inferframe import col
        >>> from inferframe.models.registry import resolve_model
        >>> options = {"base_url": "http://127.0.0.1:8000/v1", "max_batch_inputs": 512}
        >>> ref = resolve_model("embed_text", "openai", "text-embedding-3-small", kind="embed", options=options)
        >>> api_embed_call(col("doc"), ref, None, options).config.max_batch_inputs
        512
    """
    parts = message_parts(text, "embed_text")
    spec, caps, model = ref.spec, ref.caps, ref.model
    cls = spec.wire_format()
    if dimensions is not None:
        dimensions = check("embed_text", "dimensions", dimensions, _POSITIVE)
    parsed = parse_options("embed_text", options, caps, current(), model=model, own=EMBEDDING, pass_through=False)
    if parsed.timeout is not None:  # seconds per request: a packed request may need more than one row did
        spec = spec.with_option("timeout", parsed.timeout)
    limits = parsed.extra
    max_input = limits.get("max_input_tokens") or caps.embedding_max_input_tokens or embedding_max_input_tokens(cls, model)
    config = EmbedCallConfig(
        endpoint="embeddings", provider=spec, model=model, system_message=None,
        options=(("dimensions", dimensions),) if dimensions else (), runtime=parsed.runtime, n_parts=len(parts),
        label=f"embed[{model}]", max_input_tokens=max_input,
        max_batch_tokens=limits.get("max_batch_tokens", DEFAULT_MAX_BATCH_TOKENS),
        max_batch_inputs=limits.get("max_batch_inputs", caps.embedding_max_batch_inputs),
    )
    size = dimensions or embedding_size(cls, model) or probe_dimensions(config)
    config = dataclasses.replace(config, size=size)
    runtime = config.runtime
    return AICall(
        "embed_text", EmbeddingOperator, (config,), tuple(parts), pa.list_(pa.float32(), size),
        sizing(runtime.max_concurrency, batch_api=runtime.batch, rows_per_request=config.max_batch_inputs),
        model=ref, options=parsed, error_column=parsed.error_column, usage_column=parsed.usage_column,
        on_error=runtime.on_error)
