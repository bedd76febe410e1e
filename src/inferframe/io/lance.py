"""Read and write LanceDB tables, streamed: a frame is never collected in memory.

``lancedb`` is an optional dependency (``pip install "inferframe[lance]"``), imported only here.
Fixed-size float lists (``DataType.embedding(...)``) are stored as they are, which is what LanceDB
takes as vector columns, so ``table.search(vector)`` works on the result; reading gives them back
as fixed-size lists (embeddings).

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

from inferframe.errors import ArgumentTypeError, OutputExistsError, PlanError
from inferframe.io._batches import storage_batch, storage_schema
from inferframe.io.arrow_stream import StreamSource, engine_schema

__all__ = ["MODES", "lance_source", "write_lance"]

MODES = ("create", "overwrite", "append")
# Rows per batch read from a Lance table.
READ_BATCH_ROWS = 65536


def _lancedb():
    # Lance logs at WARN by default, e.g. "No existing dataset at ..., it will be created" on every
    # new table: nothing a user can act on. LANCEDB_LOG is read once, when lancedb is first imported;
    # a value the user set is kept.
    os.environ.setdefault("LANCEDB_LOG", "error")
    try:
        import lancedb
    except ImportError:
        raise ImportError(
            'read_lance()/write_lance() need the optional lancedb package: pip install "inferframe[lance]"'
        ) from None
    return lancedb


def write_lance(batches: Iterable[pa.RecordBatch], schema: pa.Schema, uri: str, table: str, mode: str = "create",
                **options: Any) -> str:
    """Stream ``batches`` into the LanceDB table ``table`` of the database at ``uri``; returns the table's location.

    Parameters:
        batches: the record batches, consumed one at a time.
        schema: their schema (also used when there are no batches, so an empty table keeps its columns).
        uri: the LanceDB database: a directory or an object-store URI.
        table: the table name.
        mode: "create" or "error" (fail if the table exists), "overwrite" (replace it), or "append"
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
    if mode == "error":  # "create" under the name every other writer uses (write_parquet(mode="error"))
        mode = "create"
    if mode not in MODES:
        raise PlanError(f"write_lance(): mode must be one of {', '.join(MODES)}, got {mode!r}.")
    if not isinstance(table, str) or not table:
        raise PlanError("write_lance(): table= needs a table name, e.g. table='items'.")
    lancedb = _lancedb()
    db = lancedb.connect(uri, **options)
    exists = _exists(db, table)
    if mode == "create" and exists:
        raise OutputExistsError(
            f"write_lance(): table {table!r} already exists in {uri}; nothing was written. "
            "Use mode='overwrite' to replace it or mode='append' to add rows.", directory=str(uri), files=[table])
    target = storage_schema(schema)

    def plain() -> Iterable[pa.RecordBatch]:
        for b in batches:
            for batch in b.to_batches() if isinstance(b, pa.Table) else [b]:
                yield storage_batch(batch, target)

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


def lance_source(uri: str, table: str, **options: Any) -> StreamSource:
    """The LanceDB table ``table`` of the database at ``uri`` as a stream, read afresh by every run.

    Only the plan's columns are read (Lance is columnar); the row count comes from the table's metadata.

    Parameters:
        uri: the LanceDB database: a directory or an object-store URI.
        table: the table name.
        **options: passed to ``lancedb.connect`` (e.g. ``storage_options``).

    Example:
        >>> import tempfile
        >>> from inferframe.io.arrow_stream import scan_stream
        >>> with tempfile.TemporaryDirectory() as db:
        ...     _ = write_lance([pa.record_batch({"id": [1, 2], "s": ["a", "b"]})], pa.schema([("id", pa.int64()), ("s", pa.string())]), db, "t")
        ...     src = lance_source(db, "t")
        ...     [b.to_pydict() for b in scan_stream(src, columns=["s"])], src.rows
        ([{'s': ['a', 'b']}], 2)
    """
    if not isinstance(table, str) or not table:
        raise ArgumentTypeError(f"read_lance(): table= needs a table name such as 'items', got {table!r}.")
    db = _lancedb().connect(uri, **options)
    if not _exists(db, table):
        raise PlanError(f"read_lance(): there is no table {table!r} in {uri}; its tables are {sorted(_names(db))}.")
    tbl = db.open_table(table)

    def open_(columns):
        query = tbl.search().limit(None)
        if columns is not None:
            query = query.select(list(columns))
        return query.to_batches(batch_size=READ_BATCH_ROWS)

    return StreamSource(f"lance table {table!r}", engine_schema(tbl.schema), open_, rows=tbl.count_rows())


def _names(db) -> list[str]:
    listing = db.list_tables() if hasattr(db, "list_tables") else db.table_names()
    return list(getattr(listing, "tables", listing))
