"""The classify operator: a label per row by constrained generation or by label scoring, with a confidence.

Example:
    >>> import asyncio, pyarrow as pa
    >>> from inferframe.providers.interface import MockProvider, Outcome
    >>> from inferframe.providers.spec import ProviderSpec
    >>> from inferframe.runtime.config import RuntimeConfig
    >>> from inferframe.series import Series
    >>> config = ClassifyConfig("chat", ProviderSpec("lm_studio"), "m", None, (), RuntimeConfig(cache_policy="off"), 1,
    ...                         "classify_text[m]", return_format=["yes", "no"], labels=("yes", "no"))
    >>> async def run():
    ...     op = ClassifyOperator(config, provider=MockProvider(lambda r: Outcome(value="yes")))
    ...     return await op(Series(pa.array(["q1", None])))
    >>> out = asyncio.run(run())
    >>> out.field("value").to_pylist(), out.field("confidence").to_pylist()
    (['yes', None], [None, None])
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from inferframe.ai.columns import result_type
from inferframe.ai.config import AICallConfig
from inferframe.ai.prompt import PromptOperator


@dataclasses.dataclass(frozen=True)
class ClassifyConfig(AICallConfig):
    """An AI call config plus what classification needs.

    Parameters:
        labels: the labels, in the user's order.
        method: "generate" (constrained generation) or "score" (every label scored by log-probability).
        prefix / suffix: the constant text around each row in the user message (demonstrations first).
        content_free: inputs whose label probabilities calibrate the scores (empty: no calibration).
        confidence: return a "confidence" field.
    """

    labels: tuple = ()
    method: str = "generate"
    prefix: str = ""
    suffix: str = ""
    content_free: tuple = ("N/A", "", "[MASK]")
    confidence: bool = True


class ClassifyOperator(PromptOperator):
    """A label per row, and with ``config.confidence`` the label's calibrated probability.

    Generation gives no probability: its confidence is null; label scoring gives it.
    """

    async def __call__(self, *columns) -> pa.StructArray:
        out = await super().__call__(*columns)
        if not self.config.confidence:
            return out
        return with_confidence(out, [None] * len(out))


def with_confidence(out: pa.StructArray, confidence: list) -> pa.StructArray:
    """``out`` (struct{value, error, usage}) with a "confidence" field added.

    Parameters:
        out: an operator's result.
        confidence: one float or None per row.

    Example:
        >>> s = pa.array([{"value": "a", "error": None, "usage": None}], result_type(pa.string()))
        >>> with_confidence(s, [0.75]).field("confidence").to_pylist()
        [0.75]
    """
    fields = [out.field(i) for i in range(out.type.num_fields)] + [pa.array(confidence, pa.float64())]
    value_type = out.type.field("value").type
    return pa.StructArray.from_arrays(fields, fields=list(result_type(value_type, confidence=True)),
                                      mask=None if out.null_count == 0 else out.is_null())
