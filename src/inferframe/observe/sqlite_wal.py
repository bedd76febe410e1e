"""SQLite files that several processes open at once (the response cache, the run history): WAL mode,
and private to the user (directory 0700, files 0600, whatever the umask)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

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
