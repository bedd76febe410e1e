"""The Arrow types of an AI call's output: the value with its error and usage side columns.

Example:
    >>> result_type(pa.string()).names
    ['value', 'error', 'usage']
    >>> result_type(pa.string(), confidence=True).names
    ['value', 'error', 'usage', 'confidence']
    >>> [f.name for f in USAGE_TYPE]
    ['input_tokens', 'output_tokens', 'cost', 'finish_reason', 'cached_tokens']
"""

from __future__ import annotations

import pyarrow as pa

# "<name>_error": why the row failed (kind is an ErrorKind value), and "<name>_usage": what it cost
# (cached_tokens: the part of input_tokens the provider's prompt cache served, billed at its cached rate).
ERROR_TYPE = pa.struct([("kind", pa.string()), ("message", pa.string()), ("status", pa.int64()),
                        ("attempts", pa.int64()), ("raw", pa.string())])
USAGE_TYPE = pa.struct([("input_tokens", pa.int64()), ("output_tokens", pa.int64()), ("cost", pa.float64()),
                        ("finish_reason", pa.string()), ("cached_tokens", pa.int64())])


def result_type(value_type: pa.DataType, confidence: bool = False) -> pa.DataType:
    """struct{value, error, usage[, confidence]}: what an AI operator returns per row.

    Parameters:
        value_type: the Arrow type of the answer.
        confidence: add a float64 "confidence" field (the answer's probability; null where the row failed).
    """
    fields = [("value", value_type), ("error", ERROR_TYPE), ("usage", USAGE_TYPE)]
    if confidence:
        fields.append(("confidence", pa.float64()))
    return pa.struct(fields)
