"""``embed_text`` and ``embed_image``: one fixed-size float32 vector per row.

Two kinds of provider serve them:
- in-process models (``sentence_transformers``, ``transformers``): loaded once per worker and fed
  batches; the default is the packaged all-MiniLM-L6-v2, offline, on a GPU where there is one;
- OpenAI-compatible ``/v1/embeddings`` servers (``openai``, ``lm_studio``, ``vllm``, ``local``, ...),
  through the same runtime as ``prompt()``.

Example:
    >>> import inferframe as ifr
    >>> from inferframe.functions import embed_text
    >>> df = ifr.from_pydict({"doc": ["a cat", "a dog"]})
    >>> df.with_column("v", embed_text(ifr.col("doc"))).schema()["v"]
    DataType(embedding<float, 384>)
"""

from __future__ import annotations

from typing import Any

from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression
from inferframe.functions._calls import ai_expression
from inferframe.functions._embed_api import api_embed_call
from inferframe.functions._embed_models import inprocess_embed_call
from inferframe.models.registry import resolve_model
from inferframe.providers.spec import ProviderSpec


def _check_column(name: str, value: Any) -> None:
    if not isinstance(value, Expression):
        hint = f"{name}(col({value!r}))" if isinstance(value, str) else f"{name}(col('...'))"
        raise PlanError(f"{name}() takes a column expression, e.g. {hint}; got {type(value).__name__} {value!r:.60}.")


def embed_text(text: Any, *, provider: str | ProviderSpec | None = None, model: str | None = None,
               dimensions: int | None = None, **options: Any) -> Expression:
    """Embed every row's text; the column is a fixed-size float32 vector, its size known before the run.

    Parameters:
        text: the text column.
        provider: "sentence_transformers" (default when no API is configured) or "transformers" run
            in this process; or an OpenAI-compatible provider: "openai", "lm_studio", "vllm", "local"
            (the embedded llama.cpp server), ...
        model: in-process, a model directory or name (default: the packaged all-MiniLM-L6-v2);
            over an API, the embedding model, e.g. "text-embedding-3-small".
        dimensions: the vector size; over an API, asks the server to shorten the vectors.
        **options: in-process: batch_size, device ("cpu", "cuda", ...), normalize (default True),
            max_concurrency (instances), use_process, gpus (per instance; each worker process sees
            only its own), long_inputs ("chunk" or "truncate"), on_error, error_column. Over an
            API: the runtime options of ``prompt()`` (max_concurrency, rpm, tpm, cache, batch, on_error, ...).

    A row that fails (an empty text; over an API also an HTTP error, a malformed answer or a
    vector of the wrong size) gets a null vector and its error in ``<name>_error``; with
    ``on_error="raise"`` the first one stops the job with ``RowFailed`` naming its kind and message.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_pydict({"doc": ["a cat", "a dog", ""]})
        >>> out = df.with_column("v", embed_text(ifr.col("doc"))).to_pydict()
        >>> len(out["v"][0]), out["v"][2], out["v_error"][2]["kind"]
        (384, None, 'input')
        >>> df.with_column("v", embed_text(ifr.col("doc"), on_error="raise")).to_pydict()
        Traceback (most recent call last):
        ...
        inferframe.errors.RowFailed: A row failed (input): an empty text has no embedding
    """
    _check_column("embed_text", text)
    ref = resolve_model("embed_text", provider, model, kind="embedding", options=options)
    if ref.in_process:
        return ai_expression(inprocess_embed_call("embed_text", text, ref, dimensions, options))
    return ai_expression(api_embed_call(text, ref, dimensions, options))


def embed_image(images: Any, *, provider: str | None = None, model: str | None = None,
                dimensions: int | None = None, **options: Any) -> Expression:
    """Embed every row's image with a CLIP-style model run in this process.

    A row whose image cannot be read or decoded gets a null vector and its error (kind "image") in
    ``<name>_error``; with ``on_error="raise"`` the first one stops the job with ``RowFailed``.
    No image model ships with inferframe: download one once, then name it or its directory.

    Parameters:
        images: an image column, a binary column of encoded images, or a column of paths/URLs.
        provider: "transformers" (the default).
        model: a CLIP-style model directory, or a name in the local Hugging Face cache
            (e.g. "openai/clip-vit-base-patch32").
        dimensions: optional; checked against the model's vector size at plan time.
        **options: batch_size, device, normalize (default True), max_concurrency, use_process, gpus,
            on_error ("null" or "raise"), error_column.

    Example:
        >>> import inferframe as ifr
        >>> df = ifr.from_glob_path("photos/*.jpg")  # doctest: +SKIP
        >>> df = df.with_column("v", embed_image(ifr.col("path"), model="openai/clip-vit-base-patch32"))  # doctest: +SKIP
    """
    _check_column("embed_image", images)
    name = provider.name if isinstance(provider, ProviderSpec) else (provider or "transformers")
    ref = resolve_model("embed_image", name, model, kind="image", options={})
    return ai_expression(inprocess_embed_call("embed_image", images, ref, dimensions, options))
