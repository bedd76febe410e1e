"""Map a local path or URI to a pyarrow filesystem plus the path inside it.

pyarrow's native filesystems (local, s3, gs, hdfs, abfs) are used when they
know the scheme; anything else (``hf://``, ``memory://``, ...) is served by
fsspec through :class:`pyarrow.fs.FSSpecHandler`. Both pickle, so a
filesystem can travel with a scan to another process.

Example::

    >>> fs, path = filesystem_for("file:///tmp/data.parquet")
    >>> type(fs).__name__, path
    ('LocalFileSystem', '/tmp/data.parquet')
"""

from __future__ import annotations

import os
import re

import pyarrow as pa
import pyarrow.fs as pafs

from inferframe.errors import PlanError

__all__ = ["split_scheme", "filesystem_for", "local_path", "display_path"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")

# The pip package behind each common fsspec protocol, for install hints.
_PACKAGE_FOR_PROTOCOL = {
    "hf": "huggingface_hub",
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "az": "adlfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "adl": "adlfs",
    "http": "aiohttp",
    "https": "aiohttp",
    "sftp": "paramiko",
    "ssh": "paramiko",
    "smb": "smbprotocol",
    "oci": "ocifs",
    "dropbox": "dropboxdrivefs",
}


def split_scheme(path: str) -> tuple[str | None, str]:
    """Split ``scheme://rest`` into ``(scheme, rest)``; plain paths give ``(None, path)``.

    Args:
        path: a local path or URI.

    Example::

        >>> split_scheme("s3://bucket/key"), split_scheme("data/x.csv")
        (('s3', 'bucket/key'), (None, 'data/x.csv'))
    """
    m = _SCHEME.match(path)
    if m is None:
        return None, path
    return m.group(1).lower(), path[m.end() :]


def local_path(path: str) -> str:
    """Return the absolute, ``~``-expanded form of a local path (posix separators).

    Args:
        path: a relative or absolute local path.

    Example::

        >>> local_path("/tmp/../tmp/x")
        '/tmp/x'
    """
    out = os.path.abspath(os.path.expanduser(path))
    # pyarrow filesystems always speak '/', also on Windows.
    return out.replace(os.sep, "/") if os.sep != "/" else out


def filesystem_for(uri: str) -> tuple[pafs.FileSystem, str]:
    """Return ``(filesystem, path_inside_it)`` for a local path or a URI.

    Args:
        uri: a local path, ``file://`` URI, or any URI pyarrow or fsspec understands.
            Must not contain glob wildcards (resolve those against the base directory).

    Raises:
        PlanError: the scheme is unknown, or needs a package that is not installed.

    Example::

        >>> filesystem_for("data/x.csv")[1].endswith("/data/x.csv")
        True
    """
    scheme, rest = split_scheme(uri)
    if scheme is None:
        return pafs.LocalFileSystem(), local_path(uri)
    if scheme == "file":
        # Bypass URI parsing so spaces and '%' in local names need no escaping.
        return pafs.LocalFileSystem(), local_path(rest)
    try:
        return pafs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # Unknown to (or not compiled into) pyarrow: let fsspec try.
        pass
    except ImportError as e:
        # pyarrow itself routes hf:// to fsspec and reports missing packages this way.
        raise _missing_package_error(uri, scheme, str(e)) from e
    return _fsspec_filesystem_for(uri, scheme)


def _fsspec_filesystem_for(uri: str, scheme: str) -> tuple[pafs.FileSystem, str]:
    try:
        import fsspec
    except ImportError as e:
        raise PlanError(
            f"Cannot open {uri!r}: pyarrow has no built-in filesystem for '{scheme}://' "
            "and fsspec is not installed. Install it with `pip install fsspec` "
            "(plus the package for this protocol)."
        ) from e
    try:
        fs, path = fsspec.core.url_to_fs(uri)
    except ImportError as e:
        raise _missing_package_error(uri, scheme, str(e)) from e
    except ValueError as e:
        if "Protocol not known" not in str(e):
            raise
        raise PlanError(
            f"Unknown filesystem protocol '{scheme}://' in {uri!r}: neither pyarrow nor "
            "fsspec recognise it. Check the spelling, or install the fsspec "
            "implementation that provides it (for example `pip install s3fs` for s3://, "
            "`pip install huggingface_hub` for hf://)."
        ) from e
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


def _missing_package_error(uri: str, scheme: str, detail: str) -> PlanError:
    package = _PACKAGE_FOR_PROTOCOL.get(scheme)
    hint = f"`pip install {package}`" if package else "the package named above"
    return PlanError(
        f"Cannot open {uri!r}: the '{scheme}://' filesystem needs an optional package "
        f"that is not installed ({detail}). Install it with {hint}."
    )


def display_path(filesystem: pafs.FileSystem, path: str) -> str:
    """Return the user-facing form of ``path``: a URI for remote filesystems, else the path.

    Args:
        filesystem: the filesystem ``path`` lives in.
        path: a path as that filesystem names it (``bucket/key`` for s3).

    Example::

        >>> display_path(pafs.LocalFileSystem(), "/tmp/x.csv")
        '/tmp/x.csv'
    """
    kind = filesystem.type_name
    if kind == "local":
        return path
    if kind == "s3":
        return "s3://" + path
    if kind == "gcs":
        return "gs://" + path
    if kind == "abfs":
        return "abfs://" + path
    if isinstance(filesystem, pafs.PyFileSystem):
        handler = filesystem.handler
        if isinstance(handler, pafs.FSSpecHandler):
            return handler.fs.unstrip_protocol(path)
    return path
