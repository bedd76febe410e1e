"""Expand user paths (files, directories, globs, URIs) into a sorted list of files.

Rules:

* a file is taken as is (even if its name starts with ``.`` or ``_``);
* a directory is listed recursively, skipping every file or folder whose name
  starts with ``.`` or ``_`` (``_SUCCESS``, ``.crc``, in-progress writes);
* a glob (``*``, ``**``, ``?``, ``[...]``) is matched below its literal prefix,
  and wildcards do not match hidden names either;
* every entry of a list must match at least one file, so a typo is never silent.

Example::

    >>> import pathlib, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> root = pathlib.Path(tmp.name)
    >>> for name in ["2024/part-0.parquet", "2024/_SUCCESS", "2024/.part-1.parquet.crc", "notes.txt"]:
    ...     (root / name).parent.mkdir(exist_ok=True)
    ...     _ = (root / name).write_bytes(b"")
    >>> fs, files = resolve_paths(f"{tmp.name}/**/*.parquet")
    >>> [f[len(tmp.name):] for f in files]
    ['/2024/part-0.parquet']
    >>> [f[len(tmp.name):] for f in resolve_paths(tmp.name)[1]]  # a directory: hidden names skipped
    ['/2024/part-0.parquet', '/notes.txt']
    >>> tmp.cleanup()
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Union

import pyarrow.fs as pafs

from inferframe.errors import ArgumentTypeError, PathNotFoundError, PlanError
from inferframe.io._glob import glob_to_regex, has_glob, is_hidden, split_glob
from inferframe.io.filesystems import filesystem_for, local_path, split_scheme

__all__ = ["PathLike", "resolve_paths", "resolve_file_infos"]

PathLike = Union[str, "os.PathLike[str]"]


def resolve_paths(
    path: PathLike | Sequence[PathLike],
    *,
    extensions: Iterable[str] | None = None,
    filesystem: pafs.FileSystem | None = None,
) -> tuple[pafs.FileSystem, list[str]]:
    """Resolve ``path`` into ``(filesystem, sorted list of file paths)``.

    Args:
        path: a local path, ``os.PathLike``, URI (``s3://``, ``gs://``, ``hf://``, any
            fsspec protocol), glob, or a list of those (all on one filesystem).
        extensions: keep only files from directories/globs whose name ends with one of
            these (``"parquet"`` or ``".parquet"``, case-insensitive). Files named
            explicitly are always kept.
        filesystem: use this filesystem instead of inferring one from the scheme.

    Returns:
        The filesystem and the de-duplicated, sorted paths as that filesystem names
        them (absolute for local files, ``bucket/key`` for s3).

    Raises:
        PathNotFoundError: an entry matches no file; the message names it (a PlanError and a
            FileNotFoundError).
        PlanError: unknown protocol, missing optional package, or mixed filesystems.

    Example::

        >>> import pathlib, tempfile
        >>> tmp = tempfile.TemporaryDirectory()
        >>> for name in ["a.csv", "more/b.csv", "more/c.CSV"]:
        ...     (pathlib.Path(tmp.name) / name).parent.mkdir(exist_ok=True)
        ...     _ = (pathlib.Path(tmp.name) / name).write_bytes(b"")
        >>> fs, files = resolve_paths([f"{tmp.name}/a.csv", f"{tmp.name}/more"], extensions=["csv"])
        >>> fs.type_name, [f[len(tmp.name):] for f in files]
        ('local', ['/a.csv', '/more/b.csv', '/more/c.CSV'])
        >>> resolve_paths(f"{tmp.name}/*.json")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        inferframe.errors.PathNotFoundError: No files match '...*.json' ...
        >>> tmp.cleanup()
    """
    fs, infos = resolve_file_infos(path, extensions=extensions, filesystem=filesystem)
    return fs, [info.path for info in infos]


def resolve_file_infos(
    path: PathLike | Sequence[PathLike],
    *,
    extensions: Iterable[str] | None = None,
    filesystem: pafs.FileSystem | None = None,
) -> tuple[pafs.FileSystem, list[pafs.FileInfo]]:
    """Like :func:`resolve_paths`, but return ``FileInfo`` (size, mtime) per file.

    Listing already fetched sizes and mtimes, so callers that need them (glob
    listings) avoid one extra request per file.

    Args:
        path: see :func:`resolve_paths`.
        extensions: see :func:`resolve_paths`.
        filesystem: see :func:`resolve_paths`.

    Example::

        >>> import pathlib, tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     _ = pathlib.Path(tmp, "a.bin").write_bytes(b"x" * 1024)
        ...     fs, infos = resolve_file_infos(tmp)
        >>> infos[0].base_name, infos[0].size
        ('a.bin', 1024)
    """
    entries = _as_entries(path)
    exts = _normalize_extensions(extensions)
    chosen = filesystem
    found: dict[str, pafs.FileInfo] = {}
    for entry in entries:
        fs, infos = _resolve_entry(entry, exts, filesystem)
        if chosen is None:
            chosen = fs
        elif fs is not chosen and not chosen.equals(fs):
            raise PlanError(
                f"All paths must be on one filesystem, but {entry!r} is on "
                f"'{fs.type_name}' while earlier paths are on '{chosen.type_name}'. "
                "Read them separately and concatenate the results."
            )
        for info in infos:
            found.setdefault(info.path, info)
    assert chosen is not None  # _as_entries guarantees at least one entry
    return chosen, [found[p] for p in sorted(found)]


def _as_entries(path: object) -> list[str]:
    if isinstance(path, (str, os.PathLike)):
        items: list[object] = [path]
    elif isinstance(path, (list, tuple)):
        items = list(path)
    else:
        raise ArgumentTypeError(
            f"path must be a str, os.PathLike or a list of them, not {type(path).__name__}; "
            "pass e.g. 'data/*.parquet' or ['a.csv', 'b.csv']."
        )
    if not items:
        raise PlanError("No paths given: pass at least one file, directory or glob.")
    out = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise ArgumentTypeError(f"path entries must be str or os.PathLike, not {type(item).__name__}; "
                                    "pass each file, directory or glob as text.")
        text = os.fspath(item)
        if not isinstance(text, str):
            raise ArgumentTypeError(f"path entries must be text, not {type(text).__name__}; decode bytes paths first.")
        if not text:
            raise PlanError("Empty path: pass a file, directory or glob.")
        out.append(text)
    return out


def _normalize_extensions(extensions: Iterable[str] | None) -> tuple[str, ...] | None:
    if extensions is None:
        return None
    if isinstance(extensions, str):
        extensions = [extensions]
    exts = tuple(e.lower() if e.startswith(".") else "." + e.lower() for e in extensions)
    if not exts:
        raise PlanError("extensions must name at least one extension (e.g. ['.csv']), or be None for every file.")
    return exts


def _resolve_entry(
    entry: str, exts: tuple[str, ...] | None, filesystem: pafs.FileSystem | None
) -> tuple[pafs.FileSystem, list[pafs.FileInfo]]:
    scheme, rest = split_scheme(entry)
    if has_glob(rest):
        literal = _literal_file(entry, scheme, filesystem)
        if literal is not None:
            return literal
        return _resolve_glob(entry, scheme, rest, exts, filesystem)

    fs, fs_path = _locate(entry, scheme, rest, filesystem)
    info = fs.get_file_info(fs_path)
    if info.type == pafs.FileType.File:
        return fs, [info]
    if info.type == pafs.FileType.Directory:
        infos = _list_dir(fs, fs_path, exts)
        if not infos:
            raise PathNotFoundError(
                f"Directory {entry!r} contains no readable files{_ext_note(exts)}. "
                "Files and folders whose names start with '.' or '_' are skipped."
            )
        return fs, infos
    raise PathNotFoundError(
        f"No such file or directory: {entry!r}{_where(scheme)}. Check the path."
    )


def _locate(
    entry: str, scheme: str | None, rest: str, filesystem: pafs.FileSystem | None
) -> tuple[pafs.FileSystem, str]:
    if filesystem is None:
        return filesystem_for(entry)
    if filesystem.type_name == "local":
        return filesystem, local_path(rest)
    return filesystem, rest


def _literal_file(
    entry: str, scheme: str | None, filesystem: pafs.FileSystem | None
) -> tuple[pafs.FileSystem, list[pafs.FileInfo]] | None:
    # Local names may legitimately contain '[' or '?'; an existing file wins over the glob.
    if scheme is not None or (filesystem is not None and filesystem.type_name != "local"):
        return None
    fs, fs_path = _locate(entry, None, entry, filesystem)
    info = fs.get_file_info(fs_path)
    return (fs, [info]) if info.type == pafs.FileType.File else None


def _resolve_glob(
    entry: str,
    scheme: str | None,
    rest: str,
    exts: tuple[str, ...] | None,
    filesystem: pafs.FileSystem | None,
) -> tuple[pafs.FileSystem, list[pafs.FileInfo]]:
    base, pattern = split_glob(rest)
    if scheme is not None and not base:
        raise PlanError(
            f"Glob wildcards in the bucket or host of {entry!r} are not supported; "
            "put them after the first '/'."
        )
    base_entry = f"{scheme}://{base}" if scheme is not None else (base or ".")
    fs, base_path = _locate(base_entry, scheme, base or ".", filesystem)
    regex = glob_to_regex(pattern)
    recursive = "/" in pattern.strip("/") or "**" in pattern
    selector = pafs.FileSelector(base_path, recursive=recursive, allow_not_found=True)
    prefix = base_path if base_path.endswith("/") else base_path + "/"
    infos = []
    for info in fs.get_file_info(selector):
        if info.type != pafs.FileType.File or not info.path.startswith(prefix):
            continue
        if regex.fullmatch(info.path[len(prefix) :]) and _ext_ok(info.path, exts):
            infos.append(info)
    if not infos:
        raise PathNotFoundError(
            f"No files match {entry!r}{_where(scheme)}{_ext_note(exts)}. Check the path or "
            "glob; wildcards skip names starting with '.' or '_'."
        )
    return fs, infos


def _list_dir(
    fs: pafs.FileSystem, dir_path: str, exts: tuple[str, ...] | None
) -> list[pafs.FileInfo]:
    selector = pafs.FileSelector(dir_path, recursive=True)
    prefix = dir_path if dir_path.endswith("/") else dir_path + "/"
    out = []
    for info in fs.get_file_info(selector):
        if info.type != pafs.FileType.File or not info.path.startswith(prefix):
            continue
        if not is_hidden(info.path[len(prefix) :]) and _ext_ok(info.path, exts):
            out.append(info)
    return out


def _ext_ok(path: str, exts: tuple[str, ...] | None) -> bool:
    return exts is None or path.lower().endswith(exts)


def _ext_note(exts: tuple[str, ...] | None) -> str:
    return "" if exts is None else f" (only names ending in {', '.join(exts)} count)"


def _where(scheme: str | None) -> str:
    return f" (checked from cwd {os.getcwd()})" if scheme is None else ""
