"""SQLite files that several processes open at once (the response cache, the run history): WAL mode,
and private to the user (directory 0700, files 0600, whatever the umask; a directory that was already
there and that other users can open is made private when it is the library's own, else warned about)."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

from inferframe.errors import warn_user

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dir(directory: str | os.PathLike) -> Path:
    """Create ``directory`` (and any missing parent) 0700, whatever the umask; an existing one is left as it is.

    The cache and the run history hold a sample of inputs and answers: other users must not read them.
    ``mkdir(mode=0o700)`` alone is masked by the umask (0o277 would leave it unwritable), so each
    directory made here is set to 0700 after it is made.

    Parameters:
        directory: the directory to make.

    Example:
        >>> import tempfile, stat
        >>> d = private_dir(os.path.join(tempfile.mkdtemp(), "a", "b"))
        >>> oct(stat.S_IMODE(d.stat().st_mode)), oct(stat.S_IMODE(d.parent.stat().st_mode))
        ('0o700', '0o700')
    """
    path = Path(directory).expanduser()
    missing = []
    for p in (path, *path.parents):
        if p.exists():
            break
        missing.append(p)
    for p in reversed(missing):
        try:
            p.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:  # made by another process meanwhile: its creator set its mode
            continue
        os.chmod(p, PRIVATE_DIR)
    if not path.is_dir():
        path.mkdir()  # raises the clear OSError: a file is in the way
    return path


def library_dir() -> Path:
    """The directory the library picks when none is named: ``$XDG_CACHE_HOME/inferframe``, else ``~/.cache/inferframe``.

    Example:
        >>> library_dir().name
        'inferframe'
    """
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inferframe"


def keep_private(directory: str | os.PathLike) -> None:
    """Make an existing ``directory`` that other users can open private, or warn: it will hold inputs and answers.

    The library's own directory (``library_dir()``, e.g. left 0755 by an older install's ``mkdir -p``) is
    set to 0700 when this user owns it. A directory the user named keeps its mode (it is their choice),
    and a warning at their line says how to make it private. A private one (no group or other bits) is
    left alone, silently.

    Parameters:
        directory: the cache or run-history directory, which exists.

    Example:
        >>> import tempfile, warnings
        >>> d = tempfile.mkdtemp()
        >>> os.chmod(d, 0o755)
        >>> with warnings.catch_warnings(record=True) as seen:
        ...     warnings.simplefilter("always")
        ...     keep_private(d)
        >>> "chmod 700" in str(seen[0].message), oct(stat.S_IMODE(os.stat(d).st_mode))
        (True, '0o755')
    """
    path = Path(directory).expanduser()
    try:
        st = path.stat()
    except OSError:
        return
    mode = stat.S_IMODE(st.st_mode)
    if not mode & 0o077:
        return
    mine = st.st_uid == os.getuid()
    if mine and path.resolve() == library_dir().resolve():
        try:
            os.chmod(path, PRIVATE_DIR)
            return
        except OSError:
            pass  # a read-only mount: say so below
    fix = f"chmod 700 {path}" if mine else "ask its owner to make it private, or name a directory of your own"
    warn_user(f"The cache directory {path} can be opened by other users (mode {oct(mode)}), and it holds your "
              f"inputs and answers. Make it private: {fix}.")


def connect_private(path: str | os.PathLike, **kwargs: Any) -> sqlite3.Connection:
    """Open the SQLite file ``path``, creating it (and its directory) private to the user first.

    A fresh file is made 0600 before SQLite opens it, so it is never readable by others, not even
    for a moment; SQLite gives its -wal and -shm files the database file's mode. An existing file
    keeps its mode.

    Parameters:
        path: the database file.
        kwargs: passed to ``sqlite3.connect``.

    Example:
        >>> import tempfile, stat
        >>> f = os.path.join(tempfile.mkdtemp(), "new", "x.sqlite")
        >>> db = connect_private(f)
        >>> oct(stat.S_IMODE(os.stat(f).st_mode))
        '0o600'
    """
    path = Path(path)
    private_dir(path.parent)
    keep_private(path.parent)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        pass
    else:
        try:
            os.fchmod(fd, PRIVATE_FILE)  # the umask may have taken the owner's bits too
        finally:
            os.close(fd)
    return sqlite3.connect(str(path), **kwargs)


def use_wal(db: sqlite3.Connection, patience_s: float = 30.0) -> None:
    """Put the file in WAL mode once, waiting out other openers.

    SQLite answers "database is locked" at once, without its busy timeout, to a journal-mode change while
    another connection holds a lock (two Ray workers opening a fresh cache together): wait and retry.

    Parameters:
        db: an open connection.
        patience_s: how long to keep retrying before the lock error is raised.

    Example:
        >>> import sqlite3, tempfile, os
        >>> db = sqlite3.connect(os.path.join(tempfile.mkdtemp(), "x.sqlite"))
        >>> use_wal(db)
        >>> db.execute("PRAGMA journal_mode").fetchone()[0]
        'wal'
    """
    deadline = time.monotonic() + patience_s
    while True:
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                return
            db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
