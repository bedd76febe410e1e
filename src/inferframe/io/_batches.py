"""Reshape record batches to a target schema column by column.

Written per column rather than with ``RecordBatch.cast`` so it works on every
supported pyarrow (``RecordBatch.cast`` is recent) and can report which column
failed.

Example::

    >>> target = pa.schema([("a", pa.int8()), ("z", pa.string())])
    >>> cast_batch(pa.record_batch({"a": [1]}), target).to_pylist()
    [{'a': 1, 'z': None}]
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

__all__ = ["cast_batch"]


def cast_batch(
    batch: pa.RecordBatch,
    schema: pa.Schema,
    on_error: Callable[[str, Exception], Exception] | None = None,
) -> pa.RecordBatch:
    """Return ``batch`` with exactly ``schema``: columns reordered, cast, missing ones null.

    Args:
        batch: input rows; columns not in ``schema`` are dropped.
        schema: the schema of the result (metadata included).
        on_error: builds the exception to raise when column ``name`` cannot be cast;
            by default the pyarrow error propagates.

    Example::

        >>> batch = pa.record_batch({"a": [1], "b": [2]})
        >>> cast_batch(batch, pa.schema([("b", pa.int64())])).column_names
        ['b']
    """
    arrays = []
    for field in schema:
        idx = batch.schema.get_field_index(field.name)
        if idx < 0:
            arrays.append(pa.nulls(batch.num_rows, field.type))
            continue
        column = batch.column(idx)
        if column.type != field.type:
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                if on_error is None:
                    raise
                raise on_error(field.name, e) from e
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
