"""Encode a record batch as JSON lines: one JSON object per row, UTF-8.

Value mapping: structs become objects, lists become arrays, timestamps /
dates / times become ISO 8601 strings, binary becomes base64 text, decimals
become strings (no precision loss), durations become seconds (float), NaN and
infinities become ``null`` (JSON has no such numbers), and maps become arrays
of ``[key, value]`` pairs (keys need not be strings).

Example::

    >>> encode_jsonl(pa.record_batch({"a": [1, None], "b": [b"hi", b""]}))
    b'{"a":1,"b":"aGk="}\\n{"a":null,"b":""}\\n'
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import uuid
from typing import Any

import pyarrow as pa

__all__ = ["encode_jsonl"]


def _default(value: Any) -> Any:
    # Called by json only for values it cannot encode itself.
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    raise TypeError(f"Cannot write {type(value).__name__} values as JSON")


_STRICT = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default
)


def encode_jsonl(batch: pa.RecordBatch) -> bytes:
    """Return ``batch`` as UTF-8 JSON lines, each line ending in ``\\n``.

    Args:
        batch: the rows to encode; column names become object keys.

    Example::

        >>> encode_jsonl(pa.record_batch({"x": [[1, 2]]}))
        b'{"x":[1,2]}\\n'
    """
    lines = []
    for row in batch.to_pylist():
        try:
            lines.append(_STRICT.encode(row))
        except ValueError:
            # allow_nan=False found NaN/inf somewhere; the slow path nulls them.
            lines.append(_STRICT.encode(_finite(row)))
    lines.append("")
    return "\n".join(lines).encode("utf-8")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
