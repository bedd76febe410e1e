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

from inferframe.ai.columns import result_type
from inferframe.ai.options import RUNTIME, check, in_range, whole_number
from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, to_node
from inferframe.expressions.nodes import Alias, Call, UDFCall
from inferframe.expressions.udf import AISpec, ClassSpec
from inferframe.models.image import _INSTALL, ClipImageEmbedder, image_dimensions
from inferframe.models.loading import model_files, require, text_dimensions
from inferframe.models.text import SentenceTransformerEmbedder, TransformersEmbedder


@dataclasses.dataclass(frozen=True, eq=False)
class ModelUDFSpec(AISpec):
    """An in-process model's UDF spec that checks its input column's type when the plan is built."""

    accepts: tuple = ("text",)  # "text", "binary" (encoded bytes or images)

    def return_type(self, arg_fields: list[pa.Field]) -> pa.DataType:
        field = arg_fields[0]
        t = field.type.storage_type if isinstance(field.type, pa.ExtensionType) else field.type
        if pa.types.is_dictionary(t):
            t = t.value_type
        ok = (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)
              or ("binary" in self.accepts and (pa.types.is_binary(t) or pa.types.is_large_binary(t))))
        if not ok:
            what = "text" if self.accepts == ("text",) else "images (an image or binary column, or paths)"
            raise PlanError(f"{self.name.split('[')[0]}() needs {what}, but column {field.name!r} is {field.type}. "
                            f"Cast it first, e.g. col({field.name!r}).cast(DataType.string()).")
        return super().return_type(arg_fields)


_TEXT_OPTIONS = {"batch_size", "device", "normalize", "max_concurrency", "use_process", "gpus", "encode_batch_size",
            "long_inputs", "on_error", "error_column"}
_IMAGE_OPTIONS = {"batch_size", "device", "normalize", "max_concurrency", "use_process", "gpus", "error_column",
                  "on_error"}


# The numeric options of in-process models, checked as for every AI function (ai.options).
NUMBERS = {"batch_size": whole_number(1), "encode_batch_size": whole_number(1), "max_concurrency": whole_number(1),
           "gpus": in_range(0, None), "dimensions": whole_number(1)}


def _errors(fn: str, options: dict) -> tuple[str, bool]:
    """on_error and error_column, checked as for every AI function; the numeric options' ranges too."""
    for name, rule in NUMBERS.items():
        check(fn, name, options.get(name), rule)
    return (check(fn, "on_error", options.get("on_error"), RUNTIME["on_error"]) or "null",
            check(fn, "error_column", options.get("error_column"), RUNTIME["error_column"]) is not False)


def _text_run_options(fn: str, options: dict) -> tuple[str, bool, str, int]:
    """(on_error, error_column, long_inputs, batch_size) of an in-process text model, checked."""
    on_error, error_column = _errors(fn, options)
    long_inputs = options.get("long_inputs", "chunk")
    if long_inputs not in ("chunk", "truncate"):
        raise PlanError(f"long_inputs must be 'chunk' or 'truncate', got {long_inputs!r}.")
    batch = int(options.get("batch_size") or 1024)
    if batch < 1:
        raise PlanError(f"batch_size must be at least 1, got {batch}.")
    return on_error, error_column, long_inputs, batch


def inprocess_embed_text(text: Any, *, provider: str, model: str | None, dimensions: int | None,
                         **options: Any) -> Expression:
    """Plan an in-process embedding column; see ``inferframe.functions.embed_text``."""
    unknown = sorted(set(options) - _TEXT_OPTIONS)
    if unknown:
        raise PlanError(f"embed_text(provider={provider!r}) got unknown options {unknown}; "
                        f"it takes {', '.join(sorted(_TEXT_OPTIONS))}.")
    require(provider)
    path = model_files(model)
    native = text_dimensions(provider, path)
    size = native
    check("embed_text", "dimensions", dimensions, NUMBERS["dimensions"])
    if dimensions is not None:
        if not 1 <= int(dimensions) <= native:
            raise PlanError(f"dimensions={dimensions} is out of range: {model or 'all-MiniLM-L6-v2'} gives {native}-dimensional "
                            f"vectors, which can be shortened (first N values, then re-normalised) but not lengthened.")
        size = int(dimensions)
    on_error, error_column, long_inputs, batch = _text_run_options("embed_text", options)
    owner_cls = SentenceTransformerEmbedder if provider == "sentence_transformers" else TransformersEmbedder
    owner = ClassSpec(owner_cls, (str(path),), {
        "device": options.get("device"), "normalize": bool(options.get("normalize", True)), "dimensions": size,
        "encode_batch_size": int(options.get("encode_batch_size") or 32), "long_inputs": long_inputs,
        "label": f"embed[{model or 'all-MiniLM-L6-v2'}]", "on_error": on_error,
    }, max_concurrency=options.get("max_concurrency"), use_process=bool(options.get("use_process", False)),
        gpus=float(options.get("gpus") or 0))
    node = to_node(text)
    spec = ModelUDFSpec(
        name=f"embed_text[{provider}]", fn=owner_cls.embed, return_dtype=result_type(pa.list_(pa.float32(), size)),
        is_batch=True, batch_size=batch, max_concurrency=options.get("max_concurrency") or 1,
        use_process=owner.use_process, gpus=owner.gpus, owner=owner, layout=(("expr", 0),), error_column=error_column, on_error=on_error,
    )
    return Expression(Alias(Call("struct.get", (UDFCall(spec, (node,)),), (("field", "value"),)), node.name()))


def inprocess_embed_image(images: Any, *, provider: str, model: str | None, dimensions: int | None,
                          **options: Any) -> Expression:
    """Plan an in-process image embedding column; see ``inferframe.functions.embed_image``."""
    unknown = sorted(set(options) - _IMAGE_OPTIONS)
    if unknown:
        raise PlanError(f"embed_image() got unknown options {unknown}; it takes {', '.join(sorted(_IMAGE_OPTIONS))}.")
    if provider != "transformers":
        raise PlanError(f"embed_image() runs on provider='transformers' (a CLIP-style model in this process), "
                        f"not {provider!r}. {_INSTALL}")
    require(provider)
    if model is None:
        raise PlanError(f"embed_image() needs model=...: no image model is packaged with inferframe. {_INSTALL}")
    path = model_files(model)
    size = image_dimensions(path)
    check("embed_image", "dimensions", dimensions, NUMBERS["dimensions"])
    if dimensions is not None and int(dimensions) != size:
        raise PlanError(f"dimensions={dimensions} does not match the model: {model} gives {size}-dimensional image vectors.")
    on_error, error_column = _errors("embed_image", options)
    batch = int(options.get("batch_size") or 64)
    owner = ClassSpec(ClipImageEmbedder, (str(path),), {"device": options.get("device"),
                                                        "normalize": bool(options.get("normalize", True)),
                                                        "on_error": on_error},
                      max_concurrency=options.get("max_concurrency"), use_process=bool(options.get("use_process", False)),
                      gpus=float(options.get("gpus") or 0))
    out_type = result_type(pa.list_(pa.float32(), size))
    spec = ModelUDFSpec(name="embed_image", accepts=("text", "binary"), fn=ClipImageEmbedder.embed, return_dtype=out_type, is_batch=True,
                  batch_size=batch, max_concurrency=options.get("max_concurrency") or 1, use_process=owner.use_process, gpus=owner.gpus,
                  owner=owner, layout=(("expr", 0),), error_column=error_column, on_error=on_error)
    node = to_node(images)
    return Expression(Alias(Call("struct.get", (UDFCall(spec, (node,)),), (("field", "value"),)), node.name()))
