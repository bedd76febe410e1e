"""What the AI functions share when they build a call: inputs, provider, and the expression node.

Example:
    >>> import inferframe as ifr
    >>> len(message_parts([ifr.lit("Describe:"), ifr.col("img")], "prompt"))
    2
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

from inferframe.ai.columns import result_type
from inferframe.ai.requests import column_kind
from inferframe.datatype import DataType
from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, lit, to_node
from inferframe.expressions.nodes import Alias, Call, Node, UDFCall
from inferframe.expressions.udf import AISpec, ClassSpec
from inferframe.providers.interface import Capabilities
from inferframe.providers.registry import base_url_for, capabilities, check_ready, provider_class, resolve
from inferframe.providers.spec import ProviderSpec
from inferframe.session import current


def message_parts(messages: Any, fn: str) -> list[Node]:
    """The expression nodes of one row's message: a column, or a list of expressions joined in order."""
    if isinstance(messages, (list, tuple)):
        if not messages:
            raise PlanError(f"{fn}() got an empty list of messages.")
        return [to_node(m if isinstance(m, Expression) else lit(m)) for m in messages]
    if isinstance(messages, Expression):
        return [messages._node]
    if isinstance(messages, str):
        raise PlanError(f"{fn}() takes a column, e.g. {fn}(col({messages!r})) or {fn}(lit('...')); got the string {messages!r}.")
    raise PlanError(f"{fn}() takes a column or a list of expressions, got {type(messages).__name__}.")


def provider_for(provider: Any, model: str | None, options: dict) -> tuple[ProviderSpec, Capabilities]:
    """Resolve the call's provider from its arguments and the session; check it can work before any request.

    Pops ``base_url`` and ``api_key`` from ``options``; the key becomes an opaque handle. The URL is
    resolved now (arguments, session, environment), so the plan means the same in any process.
    """
    spec = resolve(provider, default=current().provider, model=model, base_url=options.pop("base_url", None),
                   api_key=options.pop("api_key", None))
    check_ready(spec)
    caps = capabilities(spec)
    if not caps.in_process and spec.base_url is None:
        url = base_url_for(spec)
        if url is not None:
            spec = dataclasses.replace(spec, base_url=url)
    return spec, caps


@dataclasses.dataclass(frozen=True, eq=False)
class InputCheckedSpec(AISpec):
    """An AI call's spec that refuses image inputs, when the plan is built, for a model that reads none.

    ``no_images`` says which model reads text only ("": images may be sent).
    """

    no_images: str = ""

    def return_type(self, arg_fields: list[pa.Field]) -> pa.DataType:
        for field in arg_fields:
            if self.no_images and column_kind(field.type) == "image":
                raise PlanError(
                    f"{self.name}(): {self.no_images} reads text only, but input {field.name!r} is an image column "
                    f"({DataType(field.type)}); no request was sent. Send text only, or use a provider and model that read "
                    "images, e.g. provider='openai', model='gpt-5-mini'.")
        return super().return_type(arg_fields)


def image_refusal(spec: ProviderSpec, caps: Capabilities, model: str | None) -> str:
    """Which model reads no images ("the model 'm' of provider 'p'"), or "" when it does or it is not known.

    Example:
        >>> from inferframe.providers.registry import capabilities, resolve
        >>> local = resolve("local", default=None, model=None, base_url=None, api_key=None)
        >>> image_refusal(local, capabilities(local), "gemma-3-270m")
        "the model 'gemma-3-270m' of provider 'local'"
    """
    if provider_class(spec).reads_images(model, caps) is False:
        return f"the model {model!r} of provider {spec.name!r}"
    return ""


def ai_expression(owner: type, config: Any, parts: list[Node], value_type: pa.DataType, *, error_column: bool,
                  usage_column: bool, name: str, batch: int, window: int,
                  confidence_column: bool = False, no_images: str = "") -> Expression:
    """The column expression of one AI call: its value, with error and usage side columns split off by the planner.

    Parameters:
        owner: the operator class built per run (``owner.for_run(services, config)``).
        config: the call's config, resolved now.
        parts: the input expressions.
        value_type: the Arrow type of the answer.
        error_column / usage_column: add "<name>_error" / "<name>_usage".
        name: the function's name, for messages.
        batch: rows per call of the operator.
        window: calls in flight at once.
        confidence_column: the operator also returns a "confidence" field, split off as "<name>_confidence".
        no_images: the model that reads no images (``image_refusal``): an image input is a PlanError.
    """
    runtime = getattr(config, "runtime", config)  # a cascade's config holds on_error itself
    spec = InputCheckedSpec(
        name=name, fn=owner.__call__, return_dtype=result_type(value_type, confidence=confidence_column),
        is_batch=True, is_async=True,
        max_concurrency=window, batch_size=batch, owner=ClassSpec(owner, (config,), {}),
        layout=tuple(("expr", i) for i in range(len(parts))), error_column=error_column, usage_column=usage_column,
        confidence_column=confidence_column, on_error=getattr(runtime, "on_error", "null"), no_images=no_images,
    )
    call = UDFCall(spec, tuple(parts))
    return Expression(Alias(Call("struct.get", (call,), (("field", "value"),)), parts[0].name()))
