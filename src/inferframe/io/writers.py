"""Write a stream of record batches as a directory of part files, atomically.

Files are first written into a hidden temporary directory inside ``root``
(``root/._inferframe_tmp_<machine>-<pid>-<uuid>/``, invisible to ``resolve_paths``
because of the leading dot) and moved into place only after the last batch was
written. Any error or ``KeyboardInterrupt`` before that point deletes the
temporary directory, so ``root`` looks exactly as it did before the call. The
writer's machine and pid in the name let the next write to ``root`` remove the
folder of a writer that was killed outright, and leave a live one's alone.

Nothing is replaced silently: by default (``mode="error"``) a ``root`` that already holds data is
refused before a single batch is read; ``"overwrite"`` and ``"append"`` say what to do with it.

Example::

    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> batches = [pa.record_batch({"a": [1, 2, 3]})]
    >>> paths = write_dataset(batches, batches[0].schema, f"{tmp.name}/out", "parquet", rows_per_file=2)
    >>> [os.path.basename(p) for p in paths], sorted(os.listdir(f"{tmp.name}/out"))
    (['part-00000.parquet', 'part-00001.parquet'], ['part-00000.parquet', 'part-00001.parquet'])
    >>> tmp.cleanup()
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import uuid
from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.fs as pafs

from inferframe.errors import (
    ArgumentTypeError, OutputExistsError, PathNotWritableError, PlanError, SchemaMismatchError,
)
from inferframe.io._batches import cast_batch
from inferframe.io._part_writers import (
    PartWriter,
    check_writable,
    file_extension,
    open_part_writer,
    stream_compression,
)
from inferframe.io.filesystems import display_path, filesystem_for, local_path, split_scheme
from inferframe.observe.owner import owner_tag, owner_gone

__all__ = ["PendingWrite", "write_dataset", "WRITE_MODES"]

# "error" first: the default, as Spark's DataFrameWriter ("errorifexists") and pyarrow.dataset.write_dataset
# (existing_data_behavior="error") do: a second write to one directory is a mistake until the user says otherwise.
WRITE_MODES = ("error", "overwrite", "append")

TMP_PREFIX = "._inferframe_tmp_"

# Part files any inferframe write may have produced, whatever format or codec.
_PART_NAME = re.compile(r"^part-(\d+)\.(?:parquet|csv|jsonl)(?:\.(?:gz|bz2|zst|lz4|br))?$")


def write_dataset(
    batches: Iterable[pa.RecordBatch | pa.Table],
    schema: pa.Schema,
    root: str,
    format: str,
    *,
    rows_per_file: int = 1_000_000,
    compression: str | None = None,
    filesystem: pafs.FileSystem | None = None,
    mode: str = "error",
) -> list[str]:
    """Stream ``batches`` into ``root/part-00000.<ext>``, ``part-00001.<ext>``, ...

    Memory stays bounded: each batch is written as it arrives (parquet buffers at
    most one row group, capped at 64 MiB). A new file starts every
    ``rows_per_file`` rows. Empty input still writes one file (parquet schema,
    csv header; an empty ``.jsonl``), so the schema survives.

    What happens to files already in ``root``:

    * files that are not ``part-<n>.<ext>`` files are never touched;
    * ``mode="error"`` (default): a ``root`` holding data (any entry whose name does
      not start with ``.`` or ``_``) raises :class:`~inferframe.errors.OutputExistsError`
      before any batch is read; an empty or missing ``root`` is written;
    * ``mode="overwrite"``: new parts replace same-named ones, and then
      leftover ``part-*`` files from earlier writes are deleted, so the parts
      are exactly the new data. Old parts are removed only after the new ones
      are in place.
    * ``mode="append"``: new parts are numbered after the highest part number
      in ``root`` when they are moved in, so nothing is replaced.

    Atomicity: nothing appears in ``root`` until all batches were written; a
    failure or interrupt before that leaves ``root`` unchanged (a ``root`` this
    call created is removed again). Each file then appears whole, by rename;
    a reader listing ``root`` during the short commit may see some new parts next
    to old ones, but never a half-written file. A process killed outright
    (SIGKILL, power loss) leaves its ``._inferframe_tmp_*`` directory behind;
    readers skip it, and the next write to ``root`` from the same machine removes
    it once its writer process is gone (a live concurrent writer's stays).

    Args:
        batches: record batches (or tables) matching ``schema``; consumed once.
        schema: schema of the output; batches are cast to it if their types differ.
        root: output directory, local path or URI.
        format: ``'parquet'``, ``'csv'`` or ``'json'`` (JSON lines, ``.jsonl``;
            nested values as JSON, timestamps as ISO strings, binary as base64).
        rows_per_file: maximum rows in one file.
        compression: parquet codec (default snappy), or for csv/json one of
            ``gzip``, ``bz2``, ``zstd``, ``lz4``, ``brotli`` (adds ``.gz`` etc.).
        filesystem: filesystem to write to; inferred from ``root`` when None.
        mode: ``'error'`` (default), ``'overwrite'`` or ``'append'``, see above.

    Returns:
        The final paths of the written files, in order (URIs for remote roots).

    Raises:
        PlanError: bad format, mode, compression, rows_per_file, or a batch that
            does not fit ``schema`` (SchemaMismatchError); CSV with nested columns.
        PathNotWritableError: ``root`` is an existing file, or cannot be created or
            written (read-only, no permission); an OSError, raised before any batch is read.
        OutputExistsError: ``mode="error"`` and ``root`` holds data; raised before any batch is read.

    Example::

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     [path] = write_dataset([pa.record_batch({"a": [1]})], pa.schema([("a", pa.int64())]), tmp, "csv")
        ...     open(path).read()
        '"a"\\n1\\n'
    """
    pending = PendingWrite(root, format, schema, rows_per_file=rows_per_file, compression=compression,
                           filesystem=filesystem, mode=mode)
    try:
        names = pending.write_parts(batches)
    except BaseException:
        pending.abort()
        raise
    return pending.commit([names])


class PendingWrite:
    """A dataset write in progress: parts go to a temporary directory in ``root``; ``commit`` puts them in place.

    The steps of ``write_dataset``, apart so that many workers (a Ray job) can each write their
    parts and one driver commits them all at once, in order, or ``abort``s. Parameters are those
    of ``write_dataset``. Picklable: workers get it as is.

    Example:
        >>> import os, tempfile
        >>> tmp = tempfile.mkdtemp()
        >>> w = PendingWrite(f"{tmp}/out", "csv", pa.schema([("a", pa.int64())]))
        >>> first = w.write_parts([pa.record_batch({"a": [1]})], prefix="w1-")   # in one worker
        >>> second = w.write_parts([pa.record_batch({"a": [2]})], prefix="w2-")  # in another
        >>> [os.path.basename(p) for p in w.commit([first, second])]
        ['part-00000.csv', 'part-00001.csv']
    """

    def __init__(self, root: str, format: str, schema: pa.Schema, *, rows_per_file: int = 1_000_000,
                 compression: str | None = None, filesystem: pafs.FileSystem | None = None,
                 mode: str = "error") -> None:
        if mode not in WRITE_MODES:
            raise PlanError(f"mode must be one of {WRITE_MODES}, got {mode!r}: 'error' refuses a directory that "
                            "holds data, 'overwrite' replaces its parts, 'append' adds parts next to them.")
        if not isinstance(rows_per_file, int) or rows_per_file < 1:
            raise PlanError(f"rows_per_file must be a positive integer, got {rows_per_file!r}")
        check_writable(format, schema, compression)
        self.format, self.schema, self.rows_per_file, self.compression, self.mode = (
            format, schema, rows_per_file, compression, mode)
        self.fs, self.root = _root(root, filesystem)
        info = self.fs.get_file_info(self.root)
        if info.type == pafs.FileType.File:
            raise PathNotWritableError(f"Cannot write a dataset to {root!r}: it is a file. Pass the path of a "
                                       "directory (it is created if missing).")
        self.created_root = info.type == pafs.FileType.NotFound
        self.tmp = _join(self.root, f"{TMP_PREFIX}{owner_tag()}-{uuid.uuid4().hex}")
        try:
            self.fs.create_dir(self.root, recursive=True)
            entries = self.fs.get_file_info(pafs.FileSelector(self.root))
        except OSError as e:
            raise _not_writable(root, e) from e
        if mode == "error":  # before anything is made in root, and before the plan runs
            _refuse_data(root, entries)
        try:
            self.existing = _existing_parts(entries)
            _remove_dead_writers(self.fs, entries)
            self.fs.create_dir(self.tmp, recursive=True)
        except OSError as e:
            raise _not_writable(root, e) from e
        self.first = _next_part(self.existing) if mode == "append" else 0

    def write_parts(self, batches: Iterable[pa.RecordBatch | pa.Table], prefix: str = "part-",
                    keep_empty: bool = True) -> list[str]:
        """Write ``batches`` as part files in the temporary directory; their names, in order.

        ``prefix`` keeps the names of different writers apart; with ``keep_empty=False`` no
        rows write no file (one writer of many).
        """
        return _write_parts(batches, self.schema, self.fs, self.tmp, self.format, self.rows_per_file,
                            self.compression, self.first if prefix == "part-" else 0, prefix, keep_empty)

    def commit(self, groups: list[list[str]]) -> list[str]:
        """Move the written parts (groups of names, in output order) into ``root`` as part-NNNNN files.

        With no part at all, one empty file keeps the schema. Returns the final paths.
        """
        names = [n for g in groups for n in g]
        try:
            if not names:
                names = self.write_parts([])
            ext = file_extension(self.format, self.compression)
            if self.mode == "append":  # numbered after the parts there now: another write may have added some
                self.first = _next_part(_existing_parts(self.fs.get_file_info(pafs.FileSelector(self.root))))
            final = [f"part-{self.first + i:05d}{ext}" for i in range(len(names))]
            for name, dest in zip(names, final):
                # A rename: readers see either the old file or the complete new one.
                self.fs.move(_join(self.tmp, name), _join(self.root, dest))
        except BaseException:
            self.abort()
            raise
        _discard(self.fs, self.tmp, None)
        if self.mode == "overwrite":
            for stale in sorted(set(self.existing) - set(final)):
                with contextlib.suppress(FileNotFoundError):
                    self.fs.delete_file(_join(self.root, stale))
        return [display_path(self.fs, _join(self.root, name)) for name in final]

    def abort(self) -> None:
        """Remove what was written (and a root this write created): ``root`` is as it was."""
        _discard(self.fs, self.tmp, self.root if self.created_root else None)


def _root(root: str, filesystem: pafs.FileSystem | None) -> tuple[pafs.FileSystem, str]:
    root = os.fspath(root)
    if filesystem is None:
        fs, path = filesystem_for(root)
    elif filesystem.type_name == "local":
        fs, path = filesystem, local_path(split_scheme(root)[1])
    else:
        fs, path = filesystem, split_scheme(root)[1]
    return fs, (path.rstrip("/") or "/")


def _join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name


def _existing_parts(entries: list[pafs.FileInfo]) -> dict[str, int]:
    """Map the name of each part file among ``entries`` (the listing of root) to its number."""
    out = {}
    for info in entries:
        m = _PART_NAME.match(info.base_name)
        if m and info.type == pafs.FileType.File:
            out[info.base_name] = int(m.group(1))
    return out


def _next_part(existing: dict[str, int]) -> int:
    """The number after the highest existing part's (0 with none)."""
    return max(existing.values()) + 1 if existing else 0


def _refuse_data(root: str, entries: list[pafs.FileInfo]) -> None:
    """Raise OutputExistsError if ``entries`` (the listing of ``root``) hold data: names not starting with ``.`` or ``_``.

    Hidden names are what readers skip (``_SUCCESS``, a killed writer's ``._inferframe_tmp_*``): not data.
    """
    found = sorted(info.base_name for info in entries if info.base_name[:1] not in (".", "_"))
    if not found:
        return
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    raise OutputExistsError(
        f"{root!r} already holds data ({shown}); nothing was written. Pass mode=\"overwrite\" to replace its "
        "parts (the old ones are removed only once the new ones are in place), mode=\"append\" to add new parts "
        "next to them, or write to an empty directory.", directory=str(root), files=found)


def _remove_dead_writers(fs: pafs.FileSystem, entries: list[pafs.FileInfo]) -> None:
    """Delete the temporary directories among ``entries`` whose writer process is gone (killed outright).

    A live writer's directory stays, and so does one whose owner cannot be judged (another
    machine's, or named before names carried their owner).
    """
    for info in entries:
        name = info.base_name
        if info.type != pafs.FileType.Directory or not name.startswith(TMP_PREFIX):
            continue
        owner = name[len(TMP_PREFIX):].rpartition("-")[0]  # '<machine>-<pid>', before '-<uuid>'
        if owner and owner_gone(owner):
            with contextlib.suppress(OSError):  # another writer may be removing it right now
                fs.delete_dir(info.path)


def _not_writable(root: str, error: OSError) -> PathNotWritableError:
    return PathNotWritableError(f"Cannot write a dataset to {root!r}: {_reason(error)}. Write to a directory you "
                                "may write to, or make this one writable.")


def _reason(error: OSError) -> str:
    """Why the filesystem refused, in words (pyarrow's message repeats the path and the errno)."""
    code = getattr(error, "errno", None)
    if code in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if code == errno.EROFS:
        return "the filesystem is read-only"
    return str(error)


def _write_parts(
    batches: Iterable[pa.RecordBatch | pa.Table],
    schema: pa.Schema,
    fs: pafs.FileSystem,
    directory: str,
    format: str,
    rows_per_file: int,
    compression: str | None,
    first: int,
    prefix: str = "part-",
    keep_empty: bool = True,
) -> list[str]:
    ext = file_extension(format, compression)
    names: list[str] = []
    sink: pa.NativeFile | None = None
    writer: PartWriter | None = None
    rows_in_file = 0

    def open_next() -> None:
        nonlocal sink, writer, rows_in_file
        name = f"{prefix}{first + len(names):05d}{ext}"
        names.append(name)
        sink = fs.open_output_stream(
            _join(directory, name), compression=stream_compression(format, compression)
        )
        writer = open_part_writer(format, sink, schema, compression)
        rows_in_file = 0

    def close_current() -> None:
        nonlocal sink, writer
        if writer is not None:
            writer.close()
        if sink is not None:
            sink.close()
        sink, writer = None, None

    try:
        for batch in _conformed(batches, schema):
            offset = 0
            while offset < batch.num_rows:
                # Open lazily so exactly-full files are not followed by an empty one.
                if writer is None or rows_in_file >= rows_per_file:
                    close_current()
                    open_next()
                take = min(rows_per_file - rows_in_file, batch.num_rows - offset)
                writer.write(batch.slice(offset, take))
                offset += take
                rows_in_file += take
        if not names and keep_empty:
            open_next()  # empty input: one zero-row file keeps the schema
        close_current()
    except BaseException:
        # Release file handles before the caller deletes the directory.
        with contextlib.suppress(Exception):
            if sink is not None:
                sink.close()
        raise
    return names


def _conformed(
    batches: Iterable[pa.RecordBatch | pa.Table], schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    for index, item in enumerate(batches):
        if isinstance(item, pa.Table):
            parts = item.to_batches()
        elif isinstance(item, pa.RecordBatch):
            parts = [item]
        else:
            raise ArgumentTypeError(
                f"Item {index} is a {type(item).__name__}, not a pyarrow RecordBatch or Table; "
                "pass an iterable of RecordBatches or Tables"
            )
        for batch in parts:
            yield _conform(batch, schema, index)


def _conform(batch: pa.RecordBatch, schema: pa.Schema, index: int) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    if batch.schema.names != schema.names:
        raise SchemaMismatchError(
            f"Batch {index} has columns {batch.schema.names}, expected {schema.names}; "
            "give every batch the same columns in the same order"
        )
    if batch.schema.types == schema.types:
        return pa.RecordBatch.from_arrays(batch.columns, schema=schema)
    return cast_batch(
        batch,
        schema,
        lambda name, e: SchemaMismatchError(
            f"Batch {index}: column {name!r} cannot be cast to the output schema's "
            f"{schema.field(name).type}: {e}"
        ),
    )


def _discard(fs: pafs.FileSystem, tmp: str, created_root: str | None) -> None:
    """Best-effort removal of the temp dir (and of a root this write created, if empty)."""
    with contextlib.suppress(Exception):
        fs.delete_dir(tmp)
    if created_root is not None:
        with contextlib.suppress(Exception):
            if not fs.get_file_info(pafs.FileSelector(created_root)):
                fs.delete_dir(created_root)
