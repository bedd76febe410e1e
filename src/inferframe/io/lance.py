"""Write record batches into a LanceDB table, streamed: the frame is never collected in memory.

``lancedb`` is an optional dependency (``pip install "inferframe[lance]"``), imported only here.
Fixed-size float lists (``DataType.embedding(...)``) are stored as they are, which is what LanceDB
takes as vector columns, so ``table.search(vector)`` works on the result.

Example:
    >>> import inferframe as ifr, os, tempfile
    >>> df = ifr.from_pydict({"id": [1]})
    >>> with tempfile.TemporaryDirectory() as db:
    ...     [path] = df.write_lance(db, table="items", mode="overwrite").to_pydict()["path"]
    >>> os.path.basename(path)
    'items.lance'
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import pyarrow as pa

from inferframe.errors import PlanError

MODES = ("create", "overwrite", "append")


def _lancedb():
    # Lance logs at WARN by default, e.g. "No existing dataset at ..., it will be created" on every
    # new table: nothing a user can act on. LANCEDB_LOG is read once, when lancedb is first imported;
    # a value the user set is kept.
    os.environ.setdefault("LANCEDB_LOG", "error")
    try:
        import lancedb
    except ImportError:
        raise ImportError(
            'write_lance() needs the optional lancedb package: pip install "inferframe[lance]"'
        ) from None
    return lancedb


def _storage_type(t: pa.DataType) -> pa.DataType:
    """``t`` with inferframe's extension types (images, files) replaced by their storage: Lance cannot store them."""
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


def _plain(array: pa.Array, t: pa.DataType) -> pa.Array:
    if array.type == t:
        return array
    if isinstance(array.type, pa.ExtensionType):
        return _plain(array.storage, t)
    return array.cast(t)


def write_lance(batches: Iterable[pa.RecordBatch], schema: pa.Schema, uri: str, table: str, mode: str = "create",
                **options: Any) -> str:
    """Stream ``batches`` into the LanceDB table ``table`` of the database at ``uri``; returns the table's location.

    Parameters:
        batches: the record batches, consumed one at a time.
        schema: their schema (also used when there are no batches, so an empty table keeps its columns).
        uri: the LanceDB database: a directory or an object-store URI.
        table: the table name.
        mode: "create" (fail if the table exists), "overwrite" (replace it), or "append"
            (add rows to it, creating it when missing; the schema must match).
        **options: passed to ``lancedb.connect`` (e.g. ``storage_options``).

    Lance commits a write as one new table version at the end, so a failed write adds nothing.

    Example:
        >>> import lancedb, tempfile
        >>> b = pa.record_batch({"id": [1, 2]})
        >>> with tempfile.TemporaryDirectory() as db:
        ...     location = write_lance([b], b.schema, db, "t", mode="overwrite")
        ...     lancedb.connect(db).open_table("t").count_rows(), location == f"{db}/t.lance"
        (2, True)
    """
    if mode not in MODES:
        raise PlanError(f"write_lance(): mode must be one of {', '.join(MODES)}, got {mode!r}.")
    if not isinstance(table, str) or not table:
        raise PlanError("write_lance(): table= needs a table name, e.g. table='items'.")
    lancedb = _lancedb()
    db = lancedb.connect(uri, **options)
    exists = _exists(db, table)
    if mode == "create" and exists:
        raise PlanError(
            f"write_lance(): table {table!r} already exists in {uri}. "
            "Use mode='overwrite' to replace it or mode='append' to add rows."
        )
    target = pa.schema([f.with_type(_storage_type(f.type)) for f in schema], metadata=schema.metadata)

    def plain() -> Iterable[pa.RecordBatch]:
        for b in batches:
            if isinstance(b, pa.Table):
                yield from plain_table(b)
                continue
            yield pa.RecordBatch.from_arrays([_plain(c, f.type) for c, f in zip(b.columns, target)], schema=target)

    def plain_table(t: pa.Table) -> Iterable[pa.RecordBatch]:
        for b in t.to_batches():
            yield pa.RecordBatch.from_arrays([_plain(c, f.type) for c, f in zip(b.columns, target)], schema=target)

    reader = pa.RecordBatchReader.from_batches(target, plain())
    if mode == "append" and exists:
        tbl = db.open_table(table)
        tbl.add(reader)
    else:
        tbl = db.create_table(table, data=reader, mode="overwrite" if mode == "overwrite" else "create")
    return str(tbl.uri)


def _exists(db, table: str) -> bool:
    try:
        db.open_table(table)
    except (FileNotFoundError, ValueError):
        return False
    return True
