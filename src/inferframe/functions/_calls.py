"""What the AI functions share when they build a call: its inputs, and the one builder of its column expression.

Example:
    >>> import inferframe as ifr
    >>> len(message_parts([ifr.lit("Describe:"), ifr.col("img")], "prompt"))
    2
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa

from inferframe.ai.call import AICall
from inferframe.ai.columns import result_type
from inferframe.ai.requests import column_kind
from inferframe.datatype import DataType
from inferframe.errors import PlanError
from inferframe.expressions.expression import Expression, lit, to_node
from inferframe.expressions.nodes import Alias, Call, Node, UDFCall
from inferframe.expressions.udf import AISpec, ClassSpec
from inferframe.functions._input_types import check_input


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


@dataclasses.dataclass(frozen=True, eq=False)
class AICallSpec(AISpec):
    """An AI call's spec that checks its inputs when the plan is built, before any request.

    ``no_images`` names a model that reads text only (an image input is refused); ``accepts`` the
    input kinds an in-process model takes ("text", "binary"; empty: any).
    """

    no_images: str = ""
    accepts: tuple = ()

    def return_type(self, arg_fields: list[pa.Field]) -> pa.DataType:
        for field in arg_fields:
            if self.no_images and column_kind(field.type) == "image":
                raise PlanError(
                    f"{self.name}(): {self.no_images} reads text only, but input {field.name!r} is an image column "
                    f"({DataType(field.type)}); no request was sent. Send text only, or use a provider and model that read "
                    "images, e.g. provider='openai', model='gpt-5-mini'.")
            check_input(self.name, field, self.accepts)  # the one input rule: text is text, nothing cast silently
        return super().return_type(arg_fields)


def ai_expression(call: AICall) -> Expression:
    """The column expression of one AI call: its value, with error, usage and confidence side columns split off by the planner.

    Parameters:
        call: the call, resolved now; its operator is built per run (``call.operator.for_run``).

    Example:
        >>> import inferframe as ifr
        >>> from inferframe.ai.call import AICall, sizing
        >>> from inferframe.ai.media import Downloader, MediaConfig
        >>> expr = ai_expression(AICall("download", Downloader, (MediaConfig(8, "download"),), (ifr.col("p")._node,),
        ...                             pa.binary(), sizing(8)))
        >>> ifr.from_pydict({"p": ["/nowhere"]}).with_column("b", expr).column_names
        ['p', 'b', 'b_error']
    """
    inst = call.instances
    owner = ClassSpec(call.operator, call.args, dict(call.kwargs), max_concurrency=inst.max_concurrency,
                      use_process=inst.use_process, gpus=inst.gpus)
    spec = AICallSpec(
        name=call.function, fn=getattr(call.operator, call.method),
        return_dtype=result_type(call.value_type, confidence=call.confidence_column),
        is_batch=True, is_async=call.is_async, max_concurrency=call.sizing.window, batch_size=call.sizing.batch,
        use_process=inst.use_process, gpus=inst.gpus, owner=owner,
        layout=tuple(("expr", i) for i in range(len(call.parts))), error_column=call.error_column,
        usage_column=call.usage_column, confidence_column=call.confidence_column, on_error=call.on_error,
        call=call, no_images=call.no_images, accepts=call.accepts,
    )
    return Expression(Alias(Call("struct.get", (UDFCall(spec, tuple(call.parts)),), (("field", "value"),)),
                            call.parts[0].name()))
