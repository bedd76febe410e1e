"""``embed_text``/``embed_image`` on models run inside this process: the ``AICall`` from the resolved model and its options.

The model is found on this machine (never downloaded) and its vector size read from its config
files by ``resolve_model``, so the column type is exact before anything runs; the options are
checked by the one parser (``parse_options``).

Example:
    >>> import inferframe as ifr
    >>> from inferframe.models.registry import resolve_model
    >>> ref = resolve_model("embed_text", "sentence_transformers", None, kind="text", options={})
    >>> call = inprocess_embed_call("embed_text", ifr.col("doc"), ref, None, {"max_concurrency": 2})
    >>> call.value_type, call.sizing
    (FixedSizeListType(fixed_size_list<item: float>[384]), Sizing(batch=1024, window=2))
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from inferframe.ai.call import AICall, ModelRef
from inferframe.ai.options import EMBED_MODEL, TEXT_MODEL, check, parse_options, whole_number
from inferframe.errors import PlanError
from inferframe.expressions.expression import to_node
from inferframe.session import current


def inprocess_embed_call(fn: str, column: Any, ref: ModelRef, dimensions: int | None, options: dict) -> AICall:
    """The ``AICall`` of ``embed_text`` or ``embed_image`` on a model run in this process.

    Parameters:
        fn: "embed_text" or "embed_image".
        column: the text column, or the image column (images, binary, or paths/URLs).
        ref: the model, resolved by ``resolve_model`` (kind "text" or "image").
        dimensions: the vector size asked for (text: shortened to it; image: must be the model's).
        options: the call's options (see ``inferframe.functions.embed_text``).
    """
    text = fn == "embed_text"
    parsed = parse_options(fn, options, ref.caps, current(), model=ref.model,
                           own={**EMBED_MODEL, **TEXT_MODEL} if text else EMBED_MODEL, batch_size=1024 if text else 64)
    check(fn, "dimensions", dimensions, whole_number(1))
    size, opts = ref.size, parsed.extra
    settings = {"device": opts.get("device"), "normalize": bool(opts.get("normalize", True))}
    if text:
        if dimensions is not None:
            if not 1 <= int(dimensions) <= ref.size:
                raise PlanError(f"dimensions={dimensions} is out of range: {ref.model} gives {ref.size}-dimensional "
                                "vectors, which can be shortened (first N values, then re-normalised) but not lengthened.")
            size = int(dimensions)
        settings.update(dimensions=size, encode_batch_size=int(opts.get("encode_batch_size") or 32),
                        long_inputs=opts.get("long_inputs") or "chunk", label=f"embed[{ref.model}]")
    elif dimensions is not None and int(dimensions) != ref.size:
        raise PlanError(f"dimensions={dimensions} does not match the model: {ref.model} gives {ref.size}-dimensional "
                        "image vectors.")
    settings["on_error"] = parsed.on_error
    return AICall(f"embed_text[{ref.provider}]" if text else fn, ref.runner, (ref.path,), (to_node(column),),
                  pa.list_(pa.float32(), size), parsed.sizing, kwargs=tuple(settings.items()), model=ref,
                  options=parsed, method="embed", is_async=False, error_column=parsed.error_column,
                  on_error=parsed.on_error, instances=parsed.instances,
                  accepts=("text",) if text else ("text", "binary"))
