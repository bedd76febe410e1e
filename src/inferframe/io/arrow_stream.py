"""Sources read through the Arrow PyCapsule stream interface, batch by batch, never gathered.

A :class:`StreamSource` is to an Arrow stream what ``ScanSource`` is to files: the description a plan's
``Source`` node holds. Its ``open(columns)`` gives a fresh stream (anything exporting
``__arrow_c_stream__``, or an iterable of record batches) each time the plan runs, narrowed to
``columns`` where the producer can (a query, a lazy frame, a dataset) and narrowed here otherwise.

Read once or again: a source over something that can be read again (a table-like object, a dataset, a
query, a lazy frame) is read afresh by every run. A one-shot stream (a ``pyarrow.RecordBatchReader``, a
bare stream capsule) is read by the first run only; the next run raises a ``PlanError`` saying so and
how to keep the rows (``.collect()`` first).

Across processes: the stream lives in the process that made it. A ``StreamSource`` pickles as a
stand-in that keeps its name and schema (so a plan holding one still pickles) and raises a
``PlanError`` naming the fix if it is read in another process; the Ray runner reads stream sources on
the driver instead (``runners.ray_plan``).

Example:
    >>> import pyarrow as pa
    >>> table = pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    >>> src = stream_source(table.to_reader(max_chunksize=2))
    >>> [b.to_pydict() for b in scan_stream(src, columns=["a"], limit=2)]
    [{'a': [1, 2]}]
    >>> src.once, src.describe()
    (True, 'ArrowStream pyarrow.RecordBatchReader (read once)')
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from inferframe.errors import ArgumentTypeError, ColumnNotFoundError, PlanError
from inferframe.io._batches import cast_batch
from inferframe.io.errors import SchemaMismatchError

__all__ = ["StreamSource", "engine_schema", "engine_table", "scan_stream", "stream_source", "unique_names"]

# What ``StreamSource.open`` returns: an object exporting ``__arrow_c_stream__`` or an iterable of batches/tables.
Opener = Callable[[tuple[str, ...] | None], Any]


@dataclass(frozen=True, eq=False)
class StreamSource:
    """An Arrow stream a plan reads when it runs.

    Attributes:
        label: what the stream is, for ``explain()`` and errors (e.g. ``"polars.LazyFrame"``).
        schema: the columns every batch has (before projection).
        open: ``open(columns)`` -> a fresh stream of the rows; ``columns`` is None for every column.
            It may return more columns than asked; the scan keeps the ones asked for.
        once: the stream can be read only once (the second run raises a PlanError).
        rows: the row count when known without reading (for progress bars and ``count_rows``).

    Example:
        >>> src = StreamSource("numbers", pa.schema([("n", pa.int64())]), lambda cols: [pa.record_batch({"n": [1]})])
        >>> [b.num_rows for b in scan_stream(src)], [b.num_rows for b in scan_stream(src)]
        ([1], [1])
    """

    label: str
    schema: pa.Schema
    open: Opener = field(repr=False)
    once: bool = False
    rows: int | None = None
    # Plan rules ask a source for its format; only Parquet scans take pushed-down filters.
    format: ClassVar[str] = "arrow"
    _state: dict = field(default_factory=lambda: {"lock": threading.Lock(), "opened": False}, repr=False)

    def __post_init__(self) -> None:
        unique_names(self.schema.names, self.label)

    def describe(self) -> str:
        return f"ArrowStream {self.label}" + (" (read once)" if self.once else "")

    def take(self, columns: tuple[str, ...] | None) -> Any:
        """A fresh stream of the rows (the one stream of a one-shot source, the first time only)."""
        with self._state["lock"]:
            opened, self._state["opened"] = self._state["opened"], True
        if self.once and opened:
            raise PlanError(
                f"This DataFrame reads a one-shot Arrow stream ({self.label}) that an earlier run already "
                "consumed: a stream can be read once. Call .collect() on the DataFrame before running it "
                "more than once (it keeps the rows in memory), or build it from something that can be read "
                "again (a pyarrow Table or Dataset, a polars or DuckDB object, a file)."
            )
        try:
            return self.open(columns)
        except PlanError:
            raise
        except Exception as e:
            again = " again" if opened else ""
            raise PlanError(
                f"Could not open the Arrow stream of {self.label}{again}: {type(e).__name__}: {e}. If it is a "
                "stream that can be read only once, call .collect() on the DataFrame after building it and "
                "run that instead."
            ) from e

    def __reduce__(self):
        # The stream lives in this process: another process gets a stand-in that says so when read.
        return (_elsewhere, (self.label, self.schema, self.rows))


def _elsewhere(label: str, schema: pa.Schema, rows: int | None) -> StreamSource:
    def refuse(columns):
        raise PlanError(
            f"The Arrow stream {label} lives in the process that built this DataFrame and cannot be read in "
            "another one. Call .collect() (or write it to Parquet and read that) in the first process, and "
            "ship the result."
        )

    return StreamSource(label, schema, refuse, once=False, rows=rows)


def unique_names(names: Sequence[str], what: str) -> None:
    """Raise a PlanError if ``names`` repeats a column name (a DataFrame needs distinct names).

    Example:
        >>> unique_names(["a", "a"], "the query")
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: the query has two columns named 'a'; give them distinct names (e.g. SQL's AS) first.
    """
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise PlanError(f"{what} has two columns named {n!r}; give them distinct names (e.g. SQL's AS) first.")
        seen.add(n)


def _engine_type(t: pa.DataType) -> pa.DataType:
    if _is(t, "is_string_view", "is_large_string"):
        return pa.string()
    if _is(t, "is_binary_view", "is_large_binary"):
        return pa.binary()
    if _is(t, "is_list", "is_large_list", "is_list_view", "is_large_list_view"):
        return pa.list_(t.value_field.with_type(_engine_type(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_engine_type(t.value_type)), t.list_size)
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_engine_type(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_engine_type(t.key_type)), t.item_field.with_type(_engine_type(t.item_type)))
    return t


def _is(t: pa.DataType, *checks: str) -> bool:
    return any(getattr(pa.types, check, lambda _: False)(t) for check in checks)


def engine_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the view and large string, binary and list types made plain (the engine's functions take those).

    Polars exports strings as views or large strings, Hugging Face may use large ones; a batch per morsel
    never needs 64-bit offsets.

    Example:
        >>> engine_schema(pa.schema([("s", pa.large_string()), ("v", pa.large_list(pa.float32()))])).types
        [DataType(string), ListType(list<item: float>)]
    """
    return pa.schema([f.with_type(_engine_type(f.type)) for f in schema], metadata=schema.metadata)


def engine_table(table: pa.Table) -> pa.Table:
    """``table`` cast to :func:`engine_schema` (the same table, no copy, when nothing needs casting).

    Example:
        >>> engine_table(pa.table({"s": pa.array(["a"], pa.large_string())})).schema.types
        [DataType(string)]
    """
    target = engine_schema(table.schema)
    return table if target.equals(table.schema) else table.cast(target)


class _Capsule:
    """A bare stream capsule wrapped so pyarrow's public ``from_stream`` takes it."""

    def __init__(self, capsule: Any) -> None:
        self.capsule = capsule

    def __arrow_c_stream__(self, requested_schema=None):
        return self.capsule


def _label(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__.split('.')[0]}.{cls.__qualname__}"


def stream_source(obj: Any) -> StreamSource:
    """A StreamSource over an object exporting ``__arrow_c_stream__``, a pyarrow RecordBatchReader or Dataset.

    A RecordBatchReader or a bare capsule is read once; a pyarrow Dataset or Scanner is scanned afresh
    (with the projection pushed into the scan) every run; any other exporter is asked for a new stream
    every run (most, such as tables and frames, give one; one that cannot raises a clear error then).

    Parameters:
        obj: the stream's producer.

    Example:
        >>> import pyarrow as pa, pyarrow.dataset as ds
        >>> src = stream_source(ds.dataset(pa.table({"a": [1, 2], "b": [3, 4]})))
        >>> [b.to_pydict() for b in scan_stream(src, columns=["b"])], src.once
        ([{'b': [3, 4]}], False)
    """
    import pyarrow.dataset as pads

    if type(obj).__name__ == "PyCapsule":
        obj = pa.RecordBatchReader.from_stream(_Capsule(obj))
    if isinstance(obj, pa.RecordBatchReader):
        return StreamSource(_label(obj), engine_schema(obj.schema), lambda columns: obj, once=True)
    if isinstance(obj, pads.Dataset):
        return StreamSource(_label(obj), engine_schema(obj.schema),
                            lambda columns: obj.scanner(columns=None if columns is None else list(columns)).to_reader())
    if isinstance(obj, pads.Scanner):
        return StreamSource(_label(obj), engine_schema(obj.projected_schema), lambda columns: obj.to_reader())
    if not hasattr(obj, "__arrow_c_stream__"):
        raise ArgumentTypeError(f"Expected an object exporting __arrow_c_stream__ (an Arrow stream), got {type(obj).__name__}.")
    if hasattr(obj, "__arrow_c_schema__"):
        schema = pa.schema(obj)
        first = None
    else:  # the schema is known only from a stream: keep that one for the first run
        first = pa.RecordBatchReader.from_stream(obj)
        schema = first.schema
    pending = [first] if first is not None else []

    def open_(columns):
        return pending.pop() if pending else pa.RecordBatchReader.from_stream(obj)

    return StreamSource(_label(obj), engine_schema(schema), open_)


def _batches(stream: Any) -> Iterator[pa.RecordBatch]:
    """The record batches of whatever ``StreamSource.open`` returned; closes a reader when stopped early."""
    if hasattr(stream, "__arrow_c_stream__") and not isinstance(stream, (pa.RecordBatchReader, pa.Table)):
        stream = pa.RecordBatchReader.from_stream(stream)
    if isinstance(stream, pa.Table):
        stream = stream.to_batches()
    try:
        for item in stream:
            if isinstance(item, pa.Table):
                yield from item.to_batches()
            else:
                yield item
    finally:
        close = getattr(stream, "close", None)
        if callable(close):
            close()


def scan_stream(
    src: StreamSource,
    *,
    columns: Sequence[str] | None = None,
    filter: pc.Expression | None = None,
    limit: int | None = None,
    batch_size: int = 65536,
) -> Iterator[pa.RecordBatch]:
    """Stream ``src``'s batches with ``columns`` kept, ``filter`` applied and reading stopped at ``limit`` rows.

    Every batch is given the source's schema (projected to ``columns``); a batch whose column cannot
    be cast to it raises a SchemaMismatchError naming the column. Empty batches are skipped.

    Parameters:
        src: the source.
        columns: the columns to keep, in order (None: all).
        filter: a ``pyarrow.compute`` boolean expression over the source's columns.
        limit: stop after this many rows (the stream is closed then: its producer stops).
        batch_size: the most rows per yielded batch.

    Example:
        >>> src = stream_source(pa.table({"a": list(range(5))}).to_reader())
        >>> [b.num_rows for b in scan_stream(src, filter=pc.field("a") > 0, batch_size=3)]
        [3, 1]
    """
    if columns is not None and isinstance(columns, str):
        raise ArgumentTypeError(f"columns must be a list of names, not a single string; pass [{columns!r}].")
    cols = tuple(src.schema.names if columns is None else columns)
    missing = [c for c in cols if c not in src.schema.names]
    if missing:
        raise ColumnNotFoundError(f"Unknown column(s) {missing}; available: {', '.join(src.schema.names)}")
    if limit is not None and limit < 0:
        raise PlanError(f"limit must be >= 0 (or None for every row), got {limit}")
    if limit == 0:
        return iter(())
    wanted = cols
    if filter is not None:  # the filter may read columns that are not kept
        wanted = tuple(src.schema.names)
    full = pa.schema([src.schema.field(c) for c in wanted])
    out = pa.schema([src.schema.field(c) for c in cols])
    return _scan(src, None if columns is None and filter is None else wanted, full, out, filter, limit, batch_size)


def _scan(src, ask, full, out, filter, limit, batch_size) -> Iterator[pa.RecordBatch]:
    remaining = limit
    batches = _batches(src.take(ask))
    try:
        for batch in batches:
            batch = _conform(batch, full, src.label)
            if filter is not None:
                kept = pa.Table.from_batches([batch]).filter(filter).select(out.names).combine_chunks()
                batch = kept.to_batches()[0] if kept.num_rows else None
            if batch is None or batch.num_rows == 0:
                continue
            if remaining is not None and batch.num_rows >= remaining:
                yield from _chunks(batch.slice(0, remaining), batch_size)
                return
            yield from _chunks(batch, batch_size)
            if remaining is not None:
                remaining -= batch.num_rows
    finally:
        batches.close()


def _conform(batch: pa.RecordBatch, schema: pa.Schema, label: str) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    missing = [n for n in schema.names if n not in batch.schema.names]
    if missing:
        raise SchemaMismatchError(f"The Arrow stream {label} sent a batch without column(s) {missing}, which its "
                                  f"schema declared; its batches have {batch.schema.names}.")

    def mismatch(name, error):
        return SchemaMismatchError(f"The Arrow stream {label} sent column {name!r} as {batch.schema.field(name).type}, "
                                   f"not its declared {schema.field(name).type}, and it cannot be cast: {error}")

    return cast_batch(batch, schema, mismatch)


def _chunks(batch: pa.RecordBatch, size: int) -> Iterable[pa.RecordBatch]:
    if batch.num_rows <= size:
        yield batch
        return
    for offset in range(0, batch.num_rows, size):
        yield batch.slice(offset, size)
