"""The one table of file suffixes to readers: which reader a named file asks for, and reading it.

Every reader of a file given by name uses it: the command line's INPUT, ``classify_text(examples="...")``
and ``evaluate(golden="...")``; so a file one of them accepts, the others accept too. A compressed file
(``reviews.csv.gz``) is read by the reader of its inner suffix; a ``.json`` file holding one array of
objects is read as well as JSON lines; a directory is read by the reader most of its files ask for.

Example:
    >>> reader_of("reviews.tsv.gz"), reader_of("golden.JSONL"), reader_of("notes.txt")
    ('tsv', 'json', None)
    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = pathlib.Path(d, "rows.json").write_text('[{"text": "fine", "label": "pos"}]')
    ...     read_table(f"{d}/rows.json").to_pylist()
    [{'text': 'fine', 'label': 'pos'}]
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from inferframe.errors import PathNotFoundError, PlanError

__all__ = ["COMPRESSIONS", "READERS", "SUFFIXES", "FileSpec", "file_spec", "read_table", "reader_of", "suffix_of"]

# suffix -> reader; "tsv" is the csv reader with a tab delimiter
SUFFIXES: dict[str, str] = {
    ".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "json",
    ".ndjson": "json",
}
READERS = ("parquet", "csv", "tsv", "json")
COMPRESSIONS = (".gz", ".bz2", ".zst", ".lz4")  # pyarrow decompresses csv and JSON lines by these names
_KNOWN = ("use a .csv or .parquet file, or .tsv, .pq, .json (JSON lines or an array of objects), .jsonl or .ndjson "
          f"(compressed too: {', '.join(COMPRESSIONS)})")
_GLOB_CHARS = set("*?[")


def suffix_of(name: str | os.PathLike) -> str:
    """The lower-case suffix of ``name`` that picks its reader, a compression suffix skipped.

    Example:
        >>> suffix_of("data/Reviews.CSV.gz"), suffix_of("dir/")
        ('.csv', '')
    """
    name = os.fspath(name).lower().rstrip("/")
    for ext in COMPRESSIONS:
        if name.endswith(ext):
            name = name[: -len(ext)]
    return os.path.splitext(name.rsplit("/", 1)[-1])[1]


def reader_of(name: str | os.PathLike) -> str | None:
    """The reader ``name`` asks for (``parquet``, ``csv``, ``tsv`` or ``json``), or None.

    Example:
        >>> reader_of("a.ndjson"), reader_of("a.xlsx")
        ('json', None)
    """
    return SUFFIXES.get(suffix_of(name))


@dataclass(frozen=True)
class FileSpec:
    """How to read one path: its reader, and for a directory the file names to keep.

    Parameters:
        path: the file, directory, glob or URI.
        reader: ``parquet``, ``csv``, ``tsv`` or ``json``.
        extensions: for a directory, the suffixes of the files to read (others are skipped).
        json_array: a local ``.json`` file that holds one array of objects rather than JSON lines.

    Example:
        >>> FileSpec("rows.tsv", "tsv").format, FileSpec("rows.tsv", "tsv").options
        ('csv', {'delimiter': '\\t'})
    """

    path: str
    reader: str
    extensions: tuple[str, ...] | None = None
    json_array: bool = False

    @property
    def format(self) -> str:
        """The io layer's format (``inferframe.io.open_source``): tsv is csv."""
        return "csv" if self.reader == "tsv" else self.reader

    @property
    def options(self) -> dict[str, Any]:
        """The keyword options of ``open_source`` (and ``read_csv``/``read_json``/``read_parquet``)."""
        options: dict[str, Any] = {"delimiter": "\t"} if self.reader == "tsv" else {}
        if self.extensions:
            options["extensions"] = list(self.extensions)
        return options

    def table(self) -> pa.Table:
        """Read every row into memory (for small inputs: examples, golden answers)."""
        if self.json_array:
            return pa.Table.from_pylist(_json_array(self.path))
        from inferframe.io.readers import open_source, scan, source_schema

        src = open_source(self.format, self.path, **self.options)
        return pa.Table.from_batches(list(scan(src)), schema=source_schema(src))


def file_spec(path: str | os.PathLike, reader: str | None = None, *, hint: str = "") -> FileSpec:
    """How to read ``path``: by ``reader`` when given, else by its name (a directory: by its files' names).

    Parameters:
        path: a file, directory, glob or URI.
        reader: ``parquet``, ``csv``, ``tsv`` or ``json`` whatever the name says; None: from the name.
        hint: appended to the message when the format cannot be told, e.g. how to name it.

    Raises:
        PathNotFoundError: a local path that does not exist.
        PlanError: an unknown reader, or a name that tells no format.

    Example:
        >>> file_spec("s3://bucket/reviews.csv.gz")
        FileSpec(path='s3://bucket/reviews.csv.gz', reader='csv', extensions=None, json_array=False)
    """
    path = os.fspath(path)
    is_glob, remote = bool(_GLOB_CHARS & set(path)), "://" in path
    if reader is not None and reader not in READERS:
        raise PlanError(f"unknown format {reader!r}; use {', '.join(READERS)}.")
    reader = reader or reader_of(path)
    if not is_glob and not remote and not os.path.exists(path):
        if reader is not None:  # the reader says which files match nothing, in its words
            return FileSpec(path, reader)
        if not suffix_of(path):  # perhaps a directory's name mistyped
            raise PathNotFoundError(f"no such file or directory: {path}")
    is_dir = not is_glob and (remote and reader is None or os.path.isdir(path))
    if reader is None and is_dir:
        reader = _most_common_reader(path, hint)
    if reader is None:
        raise PlanError(f"cannot tell the format of {path!r} from its name; {_KNOWN}.{hint}")
    if is_dir:
        return FileSpec(path, reader, extensions=_extensions(reader))
    json_array = reader == "json" and not remote and os.path.isfile(path) and _starts_with(path, b"[")
    return FileSpec(path, reader, json_array=json_array)


def read_table(path: str | os.PathLike, reader: str | None = None, *, hint: str = "") -> pa.Table:
    """Every row of ``path`` as an Arrow table, read as its name says (see :func:`file_spec`).

    Example:
        >>> import pathlib, tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = pathlib.Path(d, "g.tsv").write_text("id\\tgold\\n1\\tpos\\n")
        ...     read_table(pathlib.Path(d, "g.tsv")).to_pydict()
        {'id': [1], 'gold': ['pos']}
    """
    return file_spec(path, reader, hint=hint).table()


def _extensions(reader: str) -> tuple[str, ...]:
    plain = [s for s, r in SUFFIXES.items() if r == reader]
    return tuple(plain + [s + c for s in plain for c in COMPRESSIONS])


def _most_common_reader(path: str, hint: str) -> str:
    from inferframe.io.paths import resolve_paths

    _, files = resolve_paths(path)
    counts = Counter(r for r in map(reader_of, files) if r is not None)
    if not counts:
        raise PlanError(f"no file in {path} has a name that tells its format; {_KNOWN}.{hint}")
    return counts.most_common(1)[0][0]


def _starts_with(path: str, char: bytes) -> bool:
    with open(path, "rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head[:1] == char


def _json_array(path: str) -> list[dict]:
    with open(path, encoding="utf-8-sig") as f:
        rows = json.load(f)
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise PlanError(f"{path}: a JSON file must hold one object per line, or an array of objects.")
    return rows
