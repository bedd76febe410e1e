"""``inferframe.File``: a file handed to a UDF, read only when the function asks for it.

Annotate a UDF parameter with ``File`` and each row's path or URL (or bytes) arrives as a File.

Example:
    >>> import inferframe as ifr
    >>> @ifr.func
    ... def size(f: ifr.File) -> int:
    ...     return len(f.read())
    >>> ifr.from_pydict({"p": [__file__]}).select(size(ifr.col("p"))).to_pydict()["p"][0] > 0
    True
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import IO, Iterator


class File:
    """A path or URL (local, file://, http(s)://, s3://, ... through fsspec), or bytes already read.

    Parameters:
        source: the path or URL, or the file's bytes.

    Example:
        >>> with File(__file__).to_tempfile() as tmp:
        ...     os.path.getsize(tmp.name) > 0
        True
    """

    def __init__(self, source: str | bytes | os.PathLike) -> None:
        if isinstance(source, (bytes, bytearray, memoryview)):
            self.path, self._data = None, bytes(source)
        else:
            self.path, self._data = os.fspath(source), None

    def open(self, mode: str = "rb") -> IO:
        """Open the file for reading."""
        if self._data is not None:
            import io

            return io.BytesIO(self._data) if "b" in mode else io.StringIO(self._data.decode())
        import fsspec

        return fsspec.open(self.path, mode).open()

    def read(self) -> bytes:
        """The whole file's bytes."""
        if self._data is None:
            with self.open() as f:
                self._data = f.read()
        return self._data

    @contextlib.contextmanager
    def to_tempfile(self) -> Iterator[IO]:
        """A local copy (the file itself when it is already local), for libraries that need a path: ``tmp.name``."""
        if self.path is not None and "://" not in self.path and os.path.exists(self.path):
            with open(self.path, "rb") as f:
                yield f
            return
        suffix = os.path.splitext(self.path or "")[1]
        with tempfile.NamedTemporaryFile(suffix=suffix) as tmp:
            tmp.write(self.read())
            tmp.flush()
            tmp.seek(0)
            yield tmp

    def __repr__(self) -> str:
        return f"File({self.path!r})" if self.path is not None else f"File(<{len(self._data)} bytes>)"

    def __eq__(self, other) -> bool:
        return isinstance(other, File) and (self.path, self._data) == (other.path, other._data)

    def __hash__(self) -> int:
        return hash((self.path, self._data))
