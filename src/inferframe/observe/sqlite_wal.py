"""WAL mode for SQLite files that several processes open at once (the response cache, the run history)."""

from __future__ import annotations

import sqlite3
import time


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
