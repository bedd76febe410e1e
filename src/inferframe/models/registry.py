"""``resolve_model``: the model of one AI call, from the one provider registry: HTTP providers and in-process kinds.

An HTTP provider is resolved from the call's arguments and the session (its URL now, its key as an
opaque handle) and checked before any request; an in-process kind is found on this machine (never
downloaded) with the class that runs it and its vector size, read from its files.

Example:
    >>> ref = resolve_model("prompt", "local", None, kind="generate", options={})
    >>> ref.provider, ref.model, ref.in_process
    ('local', 'gemma-3-270m', False)
    >>> text = resolve_model("embed_text", "sentence_transformers", None, kind="text", options={})
    >>> text.runner.__name__, text.size, text.model
    ('MeanPooledSentenceTransformer', 384, 'all-MiniLM-L6-v2')
    >>> resolve_model("embed_text", None, None, kind="embedding", options={}).in_process  # no API configured
    True
"""

from __future__ import annotations

import dataclasses
from typing import Any

from inferframe.ai.call import ModelRef
from inferframe.errors import PlanError
from inferframe.models.image import INSTALL_HINT, ClipImageEmbedder, image_dimensions
from inferframe.models.loading import model_files, require, text_dimensions
from inferframe.models.text import (MeanPooledSentenceTransformer, SentenceTransformerEmbedder, TransformersEmbedder,
                                    mean_pooled)
from inferframe.providers.interface import RequestFormat, embedding_size, reads_images, require as require_protocol
from inferframe.providers.registry import REGISTRY, base_url_for, check_ready, resolve, resolved
from inferframe.providers.spec import ProviderSpec
from inferframe.session import current

DEFAULT_TEXT_MODEL = "all-MiniLM-L6-v2"


def resolve_model(fn: str, provider: Any, model: str | None, *, kind: str, options: dict) -> ModelRef:
    """The model one call runs, checked before any request or load.

    Parameters:
        fn: the function's name, for messages.
        provider: the provider argument (a name, a ``ProviderSpec`` or None: the session's, else chosen by model).
        model: the model argument.
        kind: "generate" (a language model over HTTP), "embed" (an embedding model over HTTP), "text"
            (an in-process text embedding model), "image" (an in-process image embedding model) or
            "embedding" (a text embedding model: in process or over HTTP, as the provider runs it; with
            no provider, the session's, else one that serves ``model`` by name, else in process).
        options: the call's options; ``base_url`` and ``api_key`` are taken out of them (HTTP).

    Example:
        >>> resolve_model("embed_image", "sentence_transformers", None, kind="image", options={})
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: embed_image() runs on provider='transformers' (a CLIP-style model in this process), not 'sentence_transformers'. embed_image() runs a CLIP-style model in this process. Install the libraries with pip install "inferframe[embed]", download a model once (e.g. huggingface-cli download openai/clip-vit-base-patch32) and pass model="openai/clip-vit-base-patch32" or a local directory.
    """
    if kind == "embedding":
        if provider is None:
            provider = _default_text_provider(model)
        name = provider.name if isinstance(provider, ProviderSpec) else provider
        kind = "text" if REGISTRY.get(name).capabilities.in_process else "embed"
        provider = name if kind == "text" else provider
    if kind == "text":
        require(provider)
        path = model_files(model)
        return ModelRef(provider, model or DEFAULT_TEXT_MODEL, caps=REGISTRY.get(provider).capabilities,
                        path=str(path), runner=_text_runner(provider, str(path)), size=text_dimensions(provider, path))
    if kind == "image":
        if provider != "transformers":
            raise PlanError(f"{fn}() runs on provider='transformers' (a CLIP-style model in this process), "
                            f"not {provider!r}. {INSTALL_HINT}")
        require(provider)
        if model is None:
            raise PlanError(f"{fn}() needs model=...: no image model is packaged with inferframe. {INSTALL_HINT}")
        path = model_files(model)
        return ModelRef(provider, model, caps=REGISTRY.get(provider).capabilities, path=str(path),
                        runner=ClipImageEmbedder, size=image_dimensions(path))
    if isinstance(provider, ModelRef) and model in (None, provider.model):
        return provider  # resolved once already, by an operator that builds several calls of one model (sem_join)
    spec = resolve(provider, default=current().provider, model=model, base_url=options.pop("base_url", None),
                   api_key=options.pop("api_key", None))
    info = REGISTRY.get(spec.name)  # the one lookup of this call: what follows reads ``info`` and the spec
    check_ready(spec, info)
    if not info.capabilities.in_process and spec.base_url is None:
        # Resolved now (arguments, session, environment), so the plan means the same in any process.
        url = base_url_for(spec, info)
        if url is not None:
            spec = dataclasses.replace(spec, base_url=url)
    spec = resolved(spec, info)
    require_protocol(spec.wire, RequestFormat, spec.name, fn)  # what it lacks is a PlanError here, before any request
    caps = spec.caps
    if model is not None:
        _check_served(fn, spec, model, info)
    if kind == "embed":
        model = model or caps.default_embedding_model or "text-embedding-3-small"
    else:
        model = model or caps.default_model
        if model is None:
            raise PlanError(f"{fn}() needs model=... for provider {spec.name!r}, e.g. model='gpt-5-mini'.")
    return ModelRef(spec.name, model, spec=spec, caps=caps)


def _check_served(fn: str, spec: ProviderSpec, model: str, info: Any = None) -> None:
    """The embedded server runs one packaged model: any other name would be answered by it under a false name.

    Example:
        >>> _check_served("prompt", ProviderSpec("local"), "gpt-5-mini")
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: prompt(): model 'gpt-5-mini' is not served here: ...
    """
    info = info or REGISTRY.get(spec.name)
    if not info.offline_default or info.knows_model(model):
        return
    served = info.capabilities.default_model
    hosted = next((i for i in REGISTRY.infos() if i.key_env and i.knows_model(model)), None)
    where = (f"set {hosted.key_env} (or pass provider={hosted.name!r}, api_key=..., or call "
             f"inferframe.set_provider({hosted.name!r}, api_key=...))" if hosted else
             "name the provider that serves it (provider='openai', 'vllm', ... with base_url=... and api_key=..., or "
             "inferframe.set_provider(...))")
    raise PlanError(
        f"{fn}(): model {model!r} is not served here: with no provider named and no API key, calls run on the embedded "
        f"local model ({served!r}), which would answer under the name {model!r}. To run {model!r}, {where}; or leave "
        f"model out (or pass model={served!r}) to use the embedded model.")


def _default_text_provider(model: str | None) -> str:
    """With no provider: the session's default, else a provider that serves the model by name, else in-process."""
    default = current().provider
    if default is not None:
        return default.name
    for info in REGISTRY.infos():
        if info.cls is not None and model and embedding_size(info.cls, model):
            return info.name  # a hosted model: without a key the user is told how to give one
    return "sentence_transformers"


def image_refusal(ref: ModelRef) -> str:
    """Which model reads no images ("the model 'm' of provider 'p'"), or "" when it does or it is not known.

    Example:
        >>> image_refusal(resolve_model("prompt", "local", "gemma-3-270m", kind="generate", options={}))
        "the model 'gemma-3-270m' of provider 'local'"
    """
    if reads_images(ref.spec.wire_format(), ref.model, ref.caps) is False:
        return f"the model {ref.model!r} of provider {ref.provider!r}"
    return ""


def _text_runner(provider: str, path: str) -> type:
    """The class that runs an in-process text model: a sentence-transformers model that only mean-pools its encoder
    runs through transformers (the same vectors, without sentence-transformers' import); any other on its library."""
    if provider != "sentence_transformers":
        return TransformersEmbedder
    return MeanPooledSentenceTransformer if mean_pooled(path) is not None else SentenceTransformerEmbedder
