"""Describe file sources at plan time and stream them as Arrow record batches.

A :class:`ScanSource` is an immutable, picklable description (format, resolved
files, filesystem, options). :func:`open_source` builds one and fails early if
no file matches; :func:`source_schema` and :func:`estimate_rows` answer planner
questions from metadata; :func:`scan` streams batches with projection, filter
and limit pushed as far down as the format allows.

Schema rules: the scan's schema is the explicit ``schema`` option, or else the
schema of the first file (parquet footer; for csv/json the types inferred from
its first block). Every other file is read as that schema: missing columns
become nulls, extra columns are dropped, other types are cast, and a column
that cannot be cast raises :class:`~inferframe.io.errors.SchemaMismatchError`
naming both files.

Example::

    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> pq.write_table(pa.table({"id": [5, 11, 12], "s": ["a", "b", "c"]}), f"{tmp.name}/part-0.parquet")
    >>> src = open_source("parquet", f"{tmp.name}/*.parquet")
    >>> for batch in scan(src, columns=["id"], filter=pc.field("id") > 10, limit=5):
    ...     print(batch.to_pydict())
    {'id': [11, 12]}
    >>> tmp.cleanup()
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from inferframe.errors import ArgumentTypeError, ColumnNotFoundError, PlanError
from inferframe.io._batches import cast_batch
from inferframe.io._formats import FORMATS, file_format, normalize_options, option
from inferframe.io._unreadable import check_parquet_files, unreadable
from inferframe.io.arrow_stream import StreamSource, scan_stream

if TYPE_CHECKING:  # imported where files are scanned: pyarrow.dataset imports pandas, 0.17 s of every start
    import pyarrow.dataset as ds
from inferframe.io.errors import SchemaMismatchError
from inferframe.io.filesystems import display_path
from inferframe.io.paths import PathLike, resolve_file_infos

__all__ = [
    "GLOB_SCHEMA",
    "ScanSource",
    "open_source",
    "source_schema",
    "scan",
    "estimate_rows",
]

#: Columns of a ``glob`` source: one row per matched file.
GLOB_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("mtime", pa.timestamp("us", tz="UTC")),
    ]
)

# Listing metadata a glob source carries from plan time (not user options).
_SIZES = "file_sizes"
_MTIMES = "file_mtimes_ns"

_DEFAULT_READAHEAD = 16  # pyarrow's default batch readahead


@dataclass(frozen=True)
class ScanSource:
    """Immutable, picklable description of files to scan.

    Attributes:
        format: ``'parquet'``, ``'csv'``, ``'json'`` (JSON lines) or ``'glob'``.
        paths: resolved files, as ``filesystem`` names them, sorted.
        filesystem: a ``pyarrow.fs.FileSystem`` (these pickle).
        options: sorted ``(key, value)`` pairs, e.g. ``(("delimiter", "|"),)``. For
            ``glob`` sources :func:`open_source` also stores the listing's
            ``file_sizes`` and ``file_mtimes_ns`` here, so a scan needs no
            per-file request.

    Example::

        >>> src = ScanSource("csv", ("/tmp/a.csv",), pafs.LocalFileSystem())
        >>> src.format, src.options
        ('csv', ())
    """

    format: str
    paths: tuple[str, ...]
    filesystem: Any
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise PlanError(f"Unknown format {self.format!r}; expected one of {FORMATS}.")
        # Lists would make the frozen source unhashable and mutable from outside.
        object.__setattr__(self, "paths", tuple(self.paths))
        object.__setattr__(self, "options", tuple(tuple(kv) for kv in self.options))


def open_source(
    format: str,
    path: PathLike | Sequence[PathLike],
    *,
    filesystem: pafs.FileSystem | None = None,
    extensions: Iterable[str] | None = None,
    **options: Any,
) -> ScanSource:
    """Resolve ``path`` now and return a :class:`ScanSource` for ``format``.

    Args:
        format: ``'parquet'``, ``'csv'``, ``'json'`` (JSON lines) or ``'glob'``.
        path: file, directory, glob, URI, or a list of them (see ``resolve_paths``).
        filesystem: use this filesystem instead of inferring it from the path.
        extensions: only keep directory/glob matches with these extensions.
        **options: format options, e.g. ``delimiter="|"``, ``has_header=False``,
            ``schema=pa.schema(...)`` (see ``inferframe.io._formats``).

    Raises:
        PathNotFoundError: nothing matches (a FileNotFoundError); raised at plan time, not mid-query.
        PlanError / ArgumentTypeError: unknown format, option or protocol; an option of the wrong type.

    Example::

        >>> import pathlib, tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = pathlib.Path(tmp, "a.csv").write_text("x;y\\n1;2\\n")
        ...     src = open_source("csv", f"{tmp}/*.csv", delimiter=";")
        ...     source_schema(src).names
        ['x', 'y']
        >>> src.format, src.options
        ('csv', (('delimiter', ';'),))
    """
    opts = normalize_options(format, options)
    fs, infos = resolve_file_infos(path, extensions=extensions, filesystem=filesystem)
    if format == "glob":
        listing = (
            (_MTIMES, tuple(info.mtime_ns for info in infos)),
            (_SIZES, tuple(info.size for info in infos)),
        )
        opts = tuple(sorted(opts + listing, key=lambda kv: kv[0]))
    elif format == "parquet":  # a stray README.txt is named now, not mid-job
        check_parquet_files(fs, [info.path for info in infos])
    return ScanSource(format, tuple(info.path for info in infos), fs, opts)


def source_schema(src: ScanSource) -> pa.Schema:
    """Return the schema every batch of ``scan(src)`` conforms to (before projection).

    Reads only the first file's parquet footer, or the first block of the first
    csv/json file; free for ``glob`` sources or an explicit ``schema`` option.

    Args:
        src: the source to describe (a ``StreamSource``: its declared schema).

    Example::

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     pq.write_table(pa.table({"id": [1]}), f"{tmp}/a.parquet")
        ...     source_schema(open_source("parquet", tmp)).names, source_schema(open_source("glob", tmp)).names
        (['id'], ['path', 'size', 'mtime'])
    """
    if isinstance(src, StreamSource):
        return src.schema
    explicit = option(src.options, "schema")
    if explicit is not None:
        return explicit
    if src.format == "glob":
        return GLOB_SCHEMA
    if not src.paths:
        raise PlanError("The source has no files and no explicit schema to scan with; "
                        "pass schema= or at least one file.")
    first = src.paths[0]
    try:
        if src.format == "parquet":
            schema = pq.read_schema(first, filesystem=src.filesystem)
        else:
            fragment = file_format(src.format, src.options).make_fragment(
                first, filesystem=src.filesystem
            )
            schema = fragment.physical_schema
    except (pa.ArrowException, OSError) as e:
        _reraise(e, f"Could not read the schema of {_show(src, first)}", src.format)
    # Writer metadata (pandas index info, ...) describes the file, not the scan.
    return schema.remove_metadata()


def estimate_rows(src: ScanSource) -> int | None:
    """Return the exact row count when metadata holds it, else None.

    Parquet sums footer row counts (footers only, fetched in parallel); ``glob``
    has one row per file; csv/json return None rather than read the data.

    Args:
        src: the source to count (a ``StreamSource``: the row count it knows, if any).

    Example::

        >>> import pathlib, tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     pq.write_table(pa.table({"id": [1, 2, 3]}), f"{tmp}/a.parquet")
        ...     _ = pathlib.Path(tmp, "b.csv").write_text("id\\n1\\n")
        ...     parquet, csv = open_source("parquet", f"{tmp}/a.parquet"), open_source("csv", f"{tmp}/b.csv")
        ...     estimate_rows(parquet), estimate_rows(csv)
        (3, None)
    """
    if isinstance(src, StreamSource):
        return src.rows
    if src.format == "glob":
        return len(src.paths)
    if src.format != "parquet":
        return None

    def count(path: str) -> int:
        try:
            return pq.read_metadata(path, filesystem=src.filesystem).num_rows
        except (pa.ArrowException, OSError) as e:
            _reraise(e, f"Could not read the parquet footer of {_show(src, path)}", src.format)

    if len(src.paths) == 1:
        return count(src.paths[0])
    with ThreadPoolExecutor(max_workers=min(16, len(src.paths))) as pool:
        return sum(pool.map(count, src.paths))


def scan(
    src: ScanSource,
    *,
    columns: list[str] | None = None,
    filter: pc.Expression | None = None,
    limit: int | None = None,
    batch_size: int = 65536,
) -> Iterator[pa.RecordBatch]:
    """Stream ``src`` as record batches, pushing projection, filter and limit down.

    Files are read one after another in ``src.paths`` order, block by block (parquet
    row groups pruned by statistics), so memory stays bounded whatever the file
    size. Reading stops as soon as ``limit`` rows have been produced. Empty
    batches are skipped, so a scan may yield nothing; the schema is then
    ``source_schema(src)`` projected to ``columns``.

    Args:
        src: the source to read (an Arrow stream's ``StreamSource`` is read by ``arrow_stream.scan_stream``).
        columns: columns to return, in this order; None means all.
        filter: boolean ``pyarrow.compute`` expression; may use columns not in ``columns``.
        limit: stop after this many rows.
        batch_size: maximum rows per yielded batch.

    Returns:
        An iterator of batches that all share the projected schema. Arguments are
        checked when ``scan`` is called, not on the first ``next()``.

    Example::

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     pq.write_table(pa.table({"id": list(range(250))}), f"{tmp}/a.parquet")
        ...     [b.num_rows for b in scan(open_source("parquet", tmp), limit=100, batch_size=40)]
        [40, 40, 20]
    """
    if isinstance(src, StreamSource):  # an Arrow stream (io.arrow_stream), not files
        return scan_stream(src, columns=columns, filter=filter, limit=limit, batch_size=batch_size)
    if limit is not None and limit < 0:
        raise PlanError(f"limit must be >= 0 (or None for every row), got {limit}")
    if batch_size < 1:
        raise PlanError(f"batch_size must be >= 1, got {batch_size}")
    if filter is not None and not isinstance(filter, pc.Expression):
        raise ArgumentTypeError(f"filter must be a pyarrow.compute.Expression, not {type(filter).__name__}")
    target = source_schema(src)
    cols = _check_columns(target, columns)
    projected = pa.schema([target.field(name) for name in cols])
    if limit == 0:
        return iter(())
    if src.format == "glob":
        batches = _scan_listing(src, target, cols, filter, batch_size)
    else:
        batches = _scan_files(src, target, cols, filter, limit, batch_size)
    return _limit(_aligned(batches, projected), limit, batch_size)


def _check_columns(schema: pa.Schema, columns: Sequence[str] | None) -> list[str]:
    if columns is None:
        return list(schema.names)
    if isinstance(columns, str):
        raise ArgumentTypeError(f"columns must be a list of names, not a single string; pass [{columns!r}].")
    cols = list(columns)
    missing = [c for c in cols if c not in schema.names]
    if missing:
        raise ColumnNotFoundError(
            f"Unknown column(s) {missing}; available: {', '.join(schema.names)}"
        )
    if len(set(cols)) != len(cols):
        raise PlanError(f"columns lists a name twice: {cols}; name each column once.")
    return cols


def _scan_files(
    src: ScanSource,
    target: pa.Schema,
    cols: list[str],
    filter: pc.Expression | None,
    limit: int | None,
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    fmt = file_format(src.format, src.options)
    # A limit that fits in one batch gains nothing from decoding batches ahead.
    readahead = 0 if limit is not None and limit <= batch_size else _DEFAULT_READAHEAD
    for path in src.paths:
        try:
            fragment = fmt.make_fragment(path, filesystem=src.filesystem)
            if src.format != "parquet":
                scanner = fragment.scanner(
                    schema=target,
                    columns=cols,
                    filter=filter,
                    batch_size=batch_size,
                    batch_readahead=readahead,
                )
                yield from scanner.to_batches()
            elif _needs_cast(fragment.physical_schema, target):
                yield from _scan_with_cast(src, fragment, path, target, cols, filter, batch_size)
            else:
                # One scanner per row group: a whole-file scanner pre-buffers and
                # decodes far ahead (peak memory about the file size in pyarrow
                # 25/26), while this bounds it to about one row group. Statistics
                # drop row groups the filter excludes before any data is read.
                for piece in fragment.split_by_row_group(filter, schema=target):
                    scanner = piece.scanner(
                        schema=target,
                        columns=cols,
                        filter=filter,
                        batch_size=batch_size,
                        batch_readahead=readahead,
                    )
                    yield from scanner.to_batches()
        except (pa.ArrowException, OSError) as e:
            _reraise(e, _read_context(src, path), src.format)


def _needs_cast(physical: pa.Schema, target: pa.Schema) -> bool:
    names = set(physical.names)
    return any(
        field.name in names and physical.field(field.name).type != field.type
        for field in target
    )


def _scan_with_cast(
    src: ScanSource,
    fragment: ds.Fragment,
    path: str,
    target: pa.Schema,
    cols: list[str],
    filter: pc.Expression | None,
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    """Read a parquet file whose types differ from ``target``, casting batch by batch.

    pyarrow's scanner can cast too, but evaluates pushed-down filters against the
    file's own types (``int_col > 3`` fails on a string column) and reports cast
    errors without saying which file or column broke, so this path does it by hand.
    """
    physical = fragment.physical_schema
    # The filter may reference any target column, so read them all when filtering.
    wanted = target.names if filter is not None else cols
    read = [name for name in wanted if name in physical.names]
    schema = target if filter is not None else pa.schema([target.field(c) for c in cols])
    for piece in fragment.split_by_row_group():
        for batch in piece.scanner(columns=read, batch_size=batch_size).to_batches():
            batch = cast_batch(
                batch, schema, lambda name, e: _mismatch(src, path, name, physical, e)
            )
            if filter is not None:
                batch = batch.filter(filter).select(cols)
            yield batch


def _mismatch(
    src: ScanSource, path: str, name: str, physical: pa.Schema, error: Exception
) -> SchemaMismatchError:
    wanted = source_schema(src).field(name).type
    origin = (
        "the explicit schema"
        if option(src.options, "schema") is not None
        else _show(src, src.paths[0])
    )
    return SchemaMismatchError(
        f"Column {name!r} is {physical.field(name).type} in {_show(src, path)} but "
        f"{wanted} in {origin}, which sets the scan's schema, and the values cannot be "
        f"cast ({error}). Read these files separately, or pass schema=... with a type "
        "both can be cast to."
    )


def _scan_listing(
    src: ScanSource,
    target: pa.Schema,
    cols: list[str],
    filter: pc.Expression | None,
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    mtimes_ns = option(src.options, _MTIMES) or (None,) * len(src.paths)
    sizes = option(src.options, _SIZES) or (None,) * len(src.paths)
    mtimes_us = [None if t is None else t // 1000 for t in mtimes_ns]
    table = pa.table(
        [
            pa.array([display_path(src.filesystem, p) for p in src.paths], pa.string()),
            pa.array(sizes, pa.int64()),
            pa.array(mtimes_us, target.field("mtime").type),
        ],
        schema=target,
    )
    import pyarrow.dataset as ds

    scanner = ds.dataset(table).scanner(columns=cols, filter=filter, batch_size=batch_size)
    return scanner.to_batches()


def _aligned(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Give every batch exactly ``schema`` (metadata and nullability included)."""
    for batch in batches:
        if not batch.schema.equals(schema, check_metadata=True):
            if batch.schema.types == schema.types and batch.schema.names == schema.names:
                batch = pa.RecordBatch.from_arrays(batch.columns, schema=schema)
            else:
                batch = cast_batch(batch, schema)
        yield batch


def _limit(
    batches: Iterator[pa.RecordBatch], limit: int | None, batch_size: int
) -> Iterator[pa.RecordBatch]:
    remaining = limit
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if remaining is not None and batch.num_rows >= remaining:
            yield from _chunks(batch.slice(0, remaining), batch_size)
            # Return before pulling another batch so no further data is read.
            return
        yield from _chunks(batch, batch_size)
        if remaining is not None:
            remaining -= batch.num_rows


def _chunks(batch: pa.RecordBatch, batch_size: int) -> Iterator[pa.RecordBatch]:
    if batch.num_rows <= batch_size:
        yield batch
        return
    for offset in range(0, batch.num_rows, batch_size):
        yield batch.slice(offset, batch_size)


def _read_context(src: ScanSource, path: str) -> str:
    text = f"Failed reading {_show(src, path)}"
    if src.format in ("csv", "json") and option(src.options, "schema") is None:
        text += (
            f" (column types were inferred from the first block of {_show(src, src.paths[0])};"
            " pass schema=pa.schema([...]) to open_source() to set them)"
        )
    return text


def _show(src: ScanSource, path: str) -> str:
    return repr(display_path(src.filesystem, path))


def _reraise(error: BaseException, context: str, format: str = "") -> Any:
    """Raise ``error`` again with ``context`` prepended, keeping its type when possible (data pyarrow cannot read:
    an UnreadableFileError)."""
    if isinstance(error, pa.ArrowInvalid):
        raise unreadable(context, error, format) from error
    try:
        wrapped = type(error)(f"{context}: {error}")
    except Exception:
        wrapped = None
    if wrapped is None or isinstance(error, (KeyError, SchemaMismatchError)):
        raise error
    raise wrapped from error
