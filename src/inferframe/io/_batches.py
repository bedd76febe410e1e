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

__all__ = ["cast_batch", "storage_batch", "storage_schema"]


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


def _storage_type(t: pa.DataType) -> pa.DataType:
    if isinstance(t, pa.ExtensionType):
        return _storage_type(t.storage_type)
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_storage_type(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_storage_type(t.value_type)), t.list_size)
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_storage_type(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_storage_type(t.value_type)))
    return t


def storage_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with inferframe's extension types (images, files) replaced by their storage types.

    For libraries that do not know them (Lance, polars, Hugging Face datasets): images become binary,
    files strings.

    Example::

        >>> from inferframe.datatype import DataType
        >>> storage_schema(pa.schema([("img", DataType.image().to_arrow())])).types
        [DataType(binary)]
    """
    return pa.schema([f.with_type(_storage_type(f.type)) for f in schema], metadata=schema.metadata)


def _plain(array: pa.Array, t: pa.DataType) -> pa.Array:
    if array.type == t:
        return array
    if isinstance(array.type, pa.ExtensionType):
        return _plain(array.storage, t)
    return array.cast(t)


def storage_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` as ``schema``, its :func:`storage_schema`: the extension arrays' storage, no copy at the top level.

    Example::

        >>> from inferframe.datatype import DataType
        >>> t = DataType.image().to_arrow()
        >>> b = pa.record_batch([pa.ExtensionArray.from_storage(t, pa.array([b"x"]))], names=["img"])
        >>> storage_batch(b, storage_schema(b.schema)).column(0).type
        DataType(binary)
    """
    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays([_plain(c, f.type) for c, f in zip(batch.columns, schema)], schema=schema)
