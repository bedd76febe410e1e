"""Rows of a source counted up front where that is cheap: the progress bar's total.

Parquet footers and glob listings hold their row counts (``estimate_rows``). A CSV or JSON-lines
file holds none, but on a local disk its lines are counted without parsing (a byte count of
newlines, 1 MiB at a time: about a second for the largest file counted), so a job over a
2,000-row CSV shows ``12/2000 rows`` and an ETA instead of ``ETA --:--:--``. The count is for
display only: a planner that needs an exact figure uses ``estimate_rows``.

Not counted (no total, as before): remote files (counting would download them), more than
``MAX_COUNTED_BYTES`` in all, other encodings than UTF-8 and ASCII, and values that may hold
newlines (``newlines_in_values=True``: only a parse tells rows from lines).

Example:
    >>> import pathlib, tempfile
    >>> from inferframe.io import open_source
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = pathlib.Path(tmp, "a.csv").write_text("id,text\\n1,a\\n2,b\\n\\n3,c")
    ...     _ = pathlib.Path(tmp, "b.jsonl").write_text('{"id": 1}\\n{"id": 2}\\n')
    ...     progress_rows(open_source("csv", f"{tmp}/a.csv")), progress_rows(open_source("json", f"{tmp}/b.jsonl"))
    (3, 2)
"""

from __future__ import annotations

import pyarrow.fs as pafs

from inferframe.io._formats import option
from inferframe.io.arrow_stream import StreamSource
from inferframe.io.readers import ScanSource, estimate_rows

__all__ = ["MAX_COUNTED_BYTES", "progress_rows"]

# Counting reads the file once more; the operating system's page cache then serves the job's own read.
MAX_COUNTED_BYTES = 512 * 1024 * 1024
_CHUNK = 1 << 20
_TEXT_ENCODINGS = ("utf8", "utf-8", "ascii")


def progress_rows(src: ScanSource | StreamSource) -> int | None:
    """Rows of ``src`` for a progress bar: from metadata, else by counting a local text file's lines; None when not cheap.

    Example:
        >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile
        >>> from inferframe.io import open_source
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     pq.write_table(pa.table({"id": [1, 2, 3]}), f"{tmp}/a.parquet")
        ...     progress_rows(open_source("parquet", tmp))
        3
    """
    known = estimate_rows(src)
    if known is not None or isinstance(src, StreamSource) or src.format not in ("csv", "json"):
        return known
    if not isinstance(src.filesystem, pafs.LocalFileSystem) or option(src.options, "newlines_in_values"):
        return None
    if str(option(src.options, "encoding", "utf8")).lower() not in _TEXT_ENCODINGS:
        return None
    infos = src.filesystem.get_file_info(list(src.paths))
    if sum(i.size or 0 for i in infos) > MAX_COUNTED_BYTES:
        return None
    rows = 0
    for path in src.paths:
        lines = _lines(path)
        if src.format == "csv":
            # The header (unless column names are given or generated) and skipped rows are no rows.
            header = option(src.options, "has_header", True) and not option(src.options, "column_names")
            lines -= int(bool(header)) + option(src.options, "skip_rows", 0)
        rows += max(0, lines)
    return rows


def _lines(path: str) -> int:
    """Non-blank lines of a local file (pyarrow's readers skip blank ones), the last one with or without its newline."""
    lines = blank = 0
    last = b"\n"  # a file that starts with a newline starts with a blank line
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            lines += chunk.count(b"\n")
            # Blank lines: a newline right after a newline (runs of three or more are rare; they count once per pair).
            blank += (last + chunk[:1]).count(b"\n\n") + chunk.count(b"\n\n") + chunk.count(b"\n\r\n")
            last = chunk[-1:]
    if last not in (b"\n", b""):
        lines += 1  # a last line without its newline
    return lines - blank
