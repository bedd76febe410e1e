"""Stream record batches into one output file of a given format.

Each writer holds at most one parquet row group (or one batch) in memory.
Writers never close or delete anything they did not open; the caller owns
the output stream and the atomic move into place.

Example::

    >>> sink = pa.BufferOutputStream()
    >>> w = open_part_writer("csv", sink, pa.schema([("a", pa.int64())]))
    >>> w.write(pa.record_batch({"a": [1]})); w.close()
    >>> sink.getvalue().to_pybytes()
    b'"a"\\n1\\n'
"""

from __future__ import annotations

from typing import Protocol

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from inferframe.errors import PlanError
from inferframe.io._jsonl import encode_jsonl

__all__ = [
    "WRITE_FORMATS",
    "PartWriter",
    "open_part_writer",
    "file_extension",
    "check_writable",
    "stream_compression",
]

WRITE_FORMATS = ("parquet", "csv", "json")

_BASE_EXTENSION = {"parquet": ".parquet", "csv": ".csv", "json": ".jsonl"}

# Suffixes pyarrow's readers recognise when detecting compression.
_CODEC_EXTENSION = {"gzip": ".gz", "bz2": ".bz2", "zstd": ".zst", "lz4": ".lz4", "brotli": ".br"}

# pyarrow's own default row group size; the byte cap keeps wide rows
# (embeddings, images) from buffering gigabytes before a flush.
_ROW_GROUP_ROWS = 1024 * 1024
_ROW_GROUP_BYTES = 64 * 1024 * 1024


class PartWriter(Protocol):
    """Writes batches to one file; ``close`` finishes the file (footer, flush)."""

    def write(self, batch: pa.RecordBatch) -> None: ...

    def close(self) -> None: ...


def check_writable(format: str, schema: pa.Schema, compression: str | None) -> None:
    """Raise PlanError now if ``format`` cannot store ``schema`` or use ``compression``.

    Args:
        format: ``parquet``, ``csv`` or ``json``.
        schema: schema of the data to write.
        compression: codec name or None.

    Example::

        >>> check_writable("csv", pa.schema([("v", pa.list_(pa.int8()))]), None)
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: CSV cannot store nested column(s) v (list<item: int8>); write parquet or json...
    """
    if format not in WRITE_FORMATS:
        raise PlanError(f"Unknown write format {format!r}; expected one of {WRITE_FORMATS}.")
    if format == "csv":
        nested = [f for f in schema if pa.types.is_nested(f.type)]
        if nested:
            listed = ", ".join(f"{f.name} ({f.type})" for f in nested)
            raise PlanError(
                f"CSV cannot store nested column(s) {listed}; write parquet or json instead."
            )
    if compression is not None and format != "parquet" and compression not in _CODEC_EXTENSION:
        raise PlanError(
            f"Unsupported compression {compression!r} for {format}; "
            f"use one of {', '.join(_CODEC_EXTENSION)} or None."
        )


def file_extension(format: str, compression: str | None) -> str:
    """Return the file suffix for ``format`` (``.parquet``, ``.csv.gz``, ``.jsonl``...).

    Args:
        format: ``parquet``, ``csv`` or ``json``.
        compression: codec name or None; parquet compresses inside the file.

    Example::

        >>> file_extension("json", "gzip")
        '.jsonl.gz'
    """
    ext = _BASE_EXTENSION[format]
    if format != "parquet" and compression is not None:
        ext += _CODEC_EXTENSION[compression]
    return ext


def stream_compression(format: str, compression: str | None) -> str | None:
    """Return the codec the output *stream* should apply (parquet compresses internally).

    Args:
        format: ``parquet``, ``csv`` or ``json``.
        compression: codec name or None.

    Example::

        >>> stream_compression("parquet", "zstd") is None
        True
    """
    return None if format == "parquet" else compression


def open_part_writer(
    format: str, sink: pa.NativeFile, schema: pa.Schema, compression: str | None = None
) -> PartWriter:
    """Return a writer that streams batches of ``schema`` into ``sink`` as ``format``.

    Args:
        format: ``parquet``, ``csv`` or ``json``.
        sink: an open output stream (already compressing for csv/json if wanted).
        schema: schema of every batch that will be written.
        compression: parquet codec (``snappy`` when None); ignored for csv/json.

    Example::

        >>> w = open_part_writer("json", pa.BufferOutputStream(), pa.schema([]))
    """
    if format == "parquet":
        return _ParquetPart(sink, schema, compression)
    if format == "csv":
        return _CsvPart(sink, schema)
    if format == "json":
        return _JsonPart(sink)
    raise PlanError(f"Unknown write format {format!r}; expected one of {WRITE_FORMATS}.")


class _ParquetPart:
    def __init__(self, sink: pa.NativeFile, schema: pa.Schema, compression: str | None):
        kwargs = {} if compression is None else {"compression": compression}
        self._writer = pq.ParquetWriter(sink, schema, **kwargs)
        self._schema = schema
        self._pending: list[pa.RecordBatch] = []
        self._rows = 0
        self._bytes = 0

    def write(self, batch: pa.RecordBatch) -> None:
        # Each write_table call starts a new row group, so small batches are
        # buffered into one group instead of producing thousands of tiny ones.
        self._pending.append(batch)
        self._rows += batch.num_rows
        self._bytes += batch.nbytes
        if self._rows >= _ROW_GROUP_ROWS or self._bytes >= _ROW_GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            table = pa.Table.from_batches(self._pending, schema=self._schema)
            self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self._pending, self._rows, self._bytes = [], 0, 0

    def close(self) -> None:
        self._flush()
        self._writer.close()


class _CsvPart:
    def __init__(self, sink: pa.NativeFile, schema: pa.Schema):
        # The header is written here, so an empty part still records the columns.
        self._writer = pacsv.CSVWriter(sink, schema)

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def close(self) -> None:
        self._writer.close()


class _JsonPart:
    def __init__(self, sink: pa.NativeFile):
        self._sink = sink

    def write(self, batch: pa.RecordBatch) -> None:
        self._sink.write(encode_jsonl(batch))

    def close(self) -> None:
        pass
