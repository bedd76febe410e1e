"""``embed_text``/``embed_image`` on models run inside this process: the plan side (files, sizes, options).

The model is found on this machine (never downloaded) and its vector size read from its config
files, so the column type is exact before anything runs.

Example:
    >>> import inferframe as ifr
    >>> expr = inprocess_embed_text(ifr.col("doc"), provider="sentence_transformers", model=None, dimensions=None)
    >>> ifr.from_pydict({"doc": ["a cat"]}).with_column("v", expr).schema()["v"]
    DataType(embedding<float, 384>)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

from inferframe.ai.call import AICall, Instances, Sizing, sizing
from inferframe.ai.options import RUNTIME, check, in_range, whole_number
from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, to_node
from inferframe.functions._calls import ai_expression
from inferframe.models.registry import resolve_model

_TEXT_OPTIONS = frozenset({"batch_size", "device", "normalize", "max_concurrency", "use_process", "gpus",
                           "encode_batch_size", "long_inputs", "on_error", "error_column"})
_IMAGE_OPTIONS = frozenset({"batch_size", "device", "normalize", "max_concurrency", "use_process", "gpus",
                            "error_column", "on_error"})

# The numeric options of in-process models, checked as for every AI function (ai.options).
NUMBERS = {"batch_size": whole_number(1), "encode_batch_size": whole_number(1), "max_concurrency": whole_number(1),
           "gpus": in_range(0, None), "dimensions": whole_number(1)}


@dataclasses.dataclass(frozen=True)
class ModelRunOptions:
    """How an in-process model call runs, from its options, checked: errors, long texts, batches, instances."""

    on_error: str
    error_column: bool
    long_inputs: str
    sizing: Sizing
    instances: Instances


def model_run_options(fn: str, options: dict, *, batch_size: int = 1024) -> ModelRunOptions:
    """The run options of an in-process model call, checked as for every AI function (``batch_size``: the default).

    Example:
        >>> model_run_options("embed_text", {"max_concurrency": 2}).sizing
        Sizing(batch=1024, window=2)
    """
    for name, rule in NUMBERS.items():
        check(fn, name, options.get(name), rule)
    on_error = check(fn, "on_error", options.get("on_error"), RUNTIME["on_error"]) or "null"
    error_column = check(fn, "error_column", options.get("error_column"), RUNTIME["error_column"]) is not False
    long_inputs = options.get("long_inputs", "chunk")
    if long_inputs not in ("chunk", "truncate"):
        raise PlanError(f"long_inputs must be 'chunk' or 'truncate', got {long_inputs!r}.")
    instances = Instances(options.get("max_concurrency"), bool(options.get("use_process", False)),
                          float(options.get("gpus") or 0))
    size = sizing(options.get("max_concurrency") or 1, rows_per_call=int(options.get("batch_size") or batch_size))
    return ModelRunOptions(on_error, error_column, long_inputs, size, instances)


def _unknown(fn: str, options: dict, allowed: frozenset) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise PlanError(f"{fn} got unknown options {unknown}; it takes {', '.join(sorted(allowed))}.")


def inprocess_embed_text(text: Any, *, provider: str, model: str | None, dimensions: int | None,
                         **options: Any) -> Expression:
    """Plan an in-process embedding column; see ``inferframe.functions.embed_text``."""
    _unknown(f"embed_text(provider={provider!r})", options, _TEXT_OPTIONS)
    ref = resolve_model("embed_text", provider, model, kind="text", options={})
    size = ref.size
    check("embed_text", "dimensions", dimensions, NUMBERS["dimensions"])
    if dimensions is not None:
        if not 1 <= int(dimensions) <= ref.size:
            raise PlanError(f"dimensions={dimensions} is out of range: {ref.model} gives {ref.size}-dimensional "
                            f"vectors, which can be shortened (first N values, then re-normalised) but not lengthened.")
        size = int(dimensions)
    run = model_run_options("embed_text", options)
    settings = {
        "device": options.get("device"), "normalize": bool(options.get("normalize", True)), "dimensions": size,
        "encode_batch_size": int(options.get("encode_batch_size") or 32), "long_inputs": run.long_inputs,
        "label": f"embed[{ref.model}]", "on_error": run.on_error,
    }
    return ai_expression(AICall(f"embed_text[{provider}]", ref.runner, (ref.path,), (to_node(text),),
                                pa.list_(pa.float32(), size), run.sizing, kwargs=tuple(settings.items()), model=ref,
                                options=run, method="embed", is_async=False, error_column=run.error_column,
                                on_error=run.on_error, instances=run.instances, accepts=("text",)))


def inprocess_embed_image(images: Any, *, provider: str, model: str | None, dimensions: int | None,
                          **options: Any) -> Expression:
    """Plan an in-process image embedding column; see ``inferframe.functions.embed_image``."""
    _unknown("embed_image()", options, _IMAGE_OPTIONS)
    ref = resolve_model("embed_image", provider, model, kind="image", options={})
    check("embed_image", "dimensions", dimensions, NUMBERS["dimensions"])
    if dimensions is not None and int(dimensions) != ref.size:
        raise PlanError(f"dimensions={dimensions} does not match the model: {model} gives {ref.size}-dimensional "
                        "image vectors.")
    run = model_run_options("embed_image", options, batch_size=64)
    settings = {"device": options.get("device"), "normalize": bool(options.get("normalize", True)),
                "on_error": run.on_error}
    return ai_expression(AICall("embed_image", ref.runner, (ref.path,), (to_node(images),),
                                pa.list_(pa.float32(), ref.size), run.sizing, kwargs=tuple(settings.items()),
                                model=ref, options=run, method="embed", is_async=False, error_column=run.error_column,
                                on_error=run.on_error, instances=run.instances, accepts=("text", "binary")))
