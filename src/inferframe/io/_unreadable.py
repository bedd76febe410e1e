"""Input files that are not data of the format read: found and named before the job runs where that is cheap.

A directory is read whole, less the names starting with ``.`` or ``_`` (``_SUCCESS``, ``.crc``), as
Spark and pyarrow read one. Any other file must be data: a ``README.txt`` among Parquet parts is an
:class:`~inferframe.errors.UnreadableFileError` naming it and the fix, never pyarrow's bare
``ArrowInvalid`` from the middle of a job.

Example::

    >>> import pathlib, tempfile
    >>> import pyarrow.fs as pafs
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = pathlib.Path(d, "README.txt").write_text("notes")
    ...     check_parquet_files(pafs.LocalFileSystem(), [f"{d}/README.txt"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    inferframe.errors.UnreadableFileError: '.../README.txt' is not a Parquet file ...
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs

from inferframe.errors import UnreadableFileError

__all__ = ["check_parquet_files", "unreadable"]

# Every Parquet file starts and ends with these 4 bytes (PARE: an encrypted footer).
_MAGIC = (b"PAR1", b"PARE")

FIX = ("If it is not data, move it out of the directory, or read only the data files with a glob "
       "(e.g. 'dir/*.{ext}'); names starting with '.' or '_' are skipped.")


def check_parquet_files(fs: pafs.FileSystem, paths: list[str]) -> None:
    """Raise UnreadableFileError naming the first of ``paths`` that is not a Parquet file (local files only).

    Reads 8 bytes of each local file (its first and last 4), so a stray file is named before the job
    runs, before any request is sent; remote files are checked when they are read.

    Parameters:
        fs: the filesystem of ``paths``.
        paths: the resolved files, as ``fs`` names them.
    """
    if fs.type_name != "local":
        return
    for path in paths:
        try:
            with open(path, "rb") as f:
                head = f.read(4)
                f.seek(max(0, f.seek(0, 2) - 4))
                tail = f.read(4)
        except OSError:
            continue  # the reader's own error (permission, gone) says it better
        if head not in _MAGIC or tail not in _MAGIC:
            what = "it is empty" if not head else "it does not start and end with Parquet's magic bytes 'PAR1'"
            raise UnreadableFileError(f"{path!r} is not a Parquet file ({what}). {FIX.format(ext='parquet')}")


def unreadable(context: str, error: pa.ArrowInvalid, format: str) -> UnreadableFileError:
    """The error for a file pyarrow could not read as ``format``; ``context`` names the file.

    Parameters:
        context: what was being done, naming the file (``Failed reading 'x.csv'``).
        error: pyarrow's error.
        format: ``parquet``, ``csv`` or ``json``.

    Example::

        >>> str(unreadable("Failed reading 'a.csv'", pa.ArrowInvalid("CSV parse error"), "csv"))[:38]
        "Failed reading 'a.csv': CSV parse erro"
    """
    ext = {"json": "jsonl"}.get(format, format)
    return UnreadableFileError(f"{context}: {error}. {FIX.format(ext=ext)}")
