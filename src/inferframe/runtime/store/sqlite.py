"""The response cache in one SQLite file (WAL): the default store, for one machine.

Each answer is committed the moment it arrives, so a crash loses nothing that was paid for. WAL
needs every process on one host: a directory on a network file system is refused
(``refuse_network_fs``), and a cluster shares a PostgreSQL store instead.

Example:
    >>> import tempfile
    >>> cache = ResponseCache(tempfile.mkdtemp())
    >>> cache.put("k", "hi", 3, 1, "length")
    >>> cache.get("k"), cache.schema_version()
    (('hi', 3, 1, 'length'), 3)
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from inferframe.errors import PlanError
from inferframe.observe.sqlite_wal import connect_private, use_wal
from inferframe.runtime.store.base import CacheStore, Hit, dumps_value, load_one, decode_rows, default_cache_dir

# File systems where SQLite's WAL cannot work: its shared memory needs every process on one host.
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb", "smb2", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "9p", "afs")
# FUSE file systems that are local disks (a container's root): not refused.
LOCAL_FUSE = ("fuse.fuse-overlayfs",)


def mount_of(directory: str | os.PathLike, mounts: str | os.PathLike = "/proc/mounts") -> tuple[str, str] | None:
    """(mount point, file system type) that holds ``directory`` per the ``mounts`` file; None if unknown.

    Example:
        >>> import tempfile
        >>> f = os.path.join(tempfile.mkdtemp(), "mounts")
        >>> _ = open(f, "w").write("/dev/vda / ext4 rw 0 0\\nfs:/share /mnt/share nfs4 rw 0 0\\n")
        >>> mount_of("/mnt/share/cache/x", f), mount_of("/home/me", f)
        (('/mnt/share', 'nfs4'), ('/', 'ext4'))
    """
    try:
        text = Path(mounts).read_text()
    except OSError:
        return None
    path = os.path.realpath(os.path.abspath(os.path.expanduser(str(directory))))
    best: tuple[str, str] | None = None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, parts[2])
    return best


def refuse_network_fs(directory: str | os.PathLike, mounts: str | os.PathLike = "/proc/mounts") -> None:
    """Raise a PlanError where ``directory`` is on a network file system (nfs, cifs, smb, fuse.*...).

    Example:
        >>> import tempfile
        >>> f = os.path.join(tempfile.mkdtemp(), "mounts")
        >>> _ = open(f, "w").write("/dev/vda / ext4 rw 0 0\\nfs:/share /mnt/share nfs rw 0 0\\n")
        >>> refuse_network_fs("/home/me/cache", f)
        >>> refuse_network_fs("/mnt/share/cache", f)
        Traceback (most recent call last):
        ...
        inferframe.errors.PlanError: the response cache directory /mnt/share/cache is on a network file system (nfs at /mnt/share), where SQLite's WAL cannot work: answers would be lost or the file corrupted. Share a PostgreSQL store instead: cache_url="postgresql://user:password@host:5432/db" (or INFERFRAME_CACHE_URL, ifr.set_cache(url=...)), or use a local cache_dir.
    """
    found = mount_of(directory, mounts)
    if found is None:
        return
    point, fs = found
    if fs in NETWORK_FS or (fs.startswith("fuse.") and fs not in LOCAL_FUSE) or fs == "fuse":
        raise PlanError(
            f"the response cache directory {directory} is on a network file system ({fs} at {point}), where "
            "SQLite's WAL cannot work: answers would be lost or the file corrupted. Share a PostgreSQL store "
            'instead: cache_url="postgresql://user:password@host:5432/db" (or INFERFRAME_CACHE_URL, '
            "ifr.set_cache(url=...)), or use a local cache_dir.")


def _v1(db: sqlite3.Connection) -> None:
    db.execute(
        "CREATE TABLE responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, input_tokens INTEGER NOT NULL,"
        " output_tokens INTEGER NOT NULL, created REAL NOT NULL)"
    )


def _v2(db: sqlite3.Connection) -> None:
    # The Batch API ledger: a batch submitted by any process is polled, not submitted again.
    db.execute(
        "CREATE TABLE batches (id TEXT PRIMARY KEY, chunk TEXT NOT NULL, endpoint TEXT NOT NULL,"
        " collected INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL)"
    )
    db.execute("CREATE INDEX batches_chunk ON batches (chunk, collected)")


def _v3(db: sqlite3.Connection) -> None:
    # Why the answer stopped ("stop", "length"): a cached rerun reports what the first answer had.
    # Entries stored before it read as None.
    db.execute("ALTER TABLE responses ADD COLUMN finish_reason TEXT")


_IN_CHUNK = 500  # keys per query: under SQLite's oldest limit of 999 bound parameters
_COLUMNS = "rowid, key, value, input_tokens, output_tokens, finish_reason"
_AFTER = f"SELECT {_COLUMNS} FROM responses WHERE rowid >= ? ORDER BY rowid LIMIT ?"


@functools.lru_cache(maxsize=None)
def _select_in(n: int) -> str:
    return f"SELECT {_COLUMNS} FROM responses WHERE key IN ({','.join('?' * n)})"


# Schema changes are appended here, one small function each; user_version records how many ran.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2, _v3)


class ResponseCache(CacheStore):
    """One SQLite file of answers, shared by every job (and process) that points at the directory.

    Parameters:
        directory: where ``responses.sqlite`` lives; created private to the user (0700, file 0600).
    """

    kind = "sqlite"

    def __init__(self, directory: str | os.PathLike | None = None, mounts: str | os.PathLike = "/proc/mounts") -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.path = self.directory / "responses.sqlite"
        self.name = str(self.path)
        refuse_network_fs(self.directory, mounts)
        self._lock = threading.Lock()
        # Created 0700/0600 before SQLite opens it, whatever the umask (its -wal/-shm files follow).
        self._db = connect_private(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        use_wal(self._db)
        # NORMAL in WAL mode survives a crash of this process (only power loss can drop the last commits).
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._migrate()

    def _migrate(self) -> None:
        with self._lock:
            if self._db.execute("PRAGMA user_version").fetchone()[0] >= len(MIGRATIONS):
                return
            for i, step in enumerate(MIGRATIONS):
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    # Read under the write lock: another process opening the cache may have just run it.
                    if self._db.execute("PRAGMA user_version").fetchone()[0] <= i:
                        step(self._db)
                        self._db.execute(f"PRAGMA user_version = {i + 1}")
                    self._db.execute("COMMIT")
                except Exception:
                    self._db.execute("ROLLBACK")
                    raise

    def get(self, key: str) -> Hit | None:
        """(value, input tokens, output tokens, finish reason) of a stored answer, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT value, input_tokens, output_tokens, finish_reason FROM responses WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        return load_one(row[0]), row[1], row[2], row[3]

    def get_many(self, keys: list[str]) -> list[Hit | None]:
        """``get`` for many keys in one query per 500 keys: (value, input tokens, output tokens, finish reason) or None.

        Example:
            >>> import tempfile
            >>> cache = ResponseCache(tempfile.mkdtemp())
            >>> cache.put("a", {"x": 1}, 3, 1)
            >>> cache.get_many(["b", "a", "a"])
            [None, ({'x': 1}, 3, 1, None), ({'x': 1}, 3, 1, None)]
        """
        rows = self._by_key(list(dict.fromkeys(keys)))
        if not rows:
            return [None] * len(keys)
        found = decode_rows(rows, 1)
        return [found.get(k) for k in keys]

    def _by_key(self, keys: list[str]) -> list[tuple]:
        """The stored rows (rowid, key, value text, in, out) of distinct ``keys``, in no particular order."""
        rows: list[tuple] = []
        with self._lock:
            for i in range(0, len(keys), _IN_CHUNK):
                part = keys[i:i + _IN_CHUNK]
                rows += self._db.execute(_select_in(len(part)), part).fetchall()
        return rows

    def _after(self, rowid: int, n: int) -> list[tuple]:
        """Up to ``n`` stored rows from ``rowid`` on, in the order they were stored."""
        with self._lock:
            return self._db.execute(_AFTER, (rowid, n)).fetchall()

    def reader(self) -> "CacheReader":
        """A reader for one job's batches: see CacheReader."""
        return CacheReader(self)

    def put(self, key: str, value: Any, input_tokens: int, output_tokens: int,
            finish_reason: str | None = None) -> None:
        """Store one answer (and why its generation stopped, when known) and commit it at once."""
        self.put_many([(key, value, input_tokens, output_tokens, finish_reason)])

    def put_many(self, items: list[tuple]) -> None:
        """Store (key, value, input tokens, output tokens[, finish reason]) answers and commit them together."""
        now = time.time()
        rows = [(it[0], dumps_value(it[1]), int(it[2]), int(it[3]), it[4] if len(it) > 4 else None, now) for it in items]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO responses (key, value, input_tokens, output_tokens, finish_reason, created)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def pending_batch(self, chunk: str) -> str | None:
        """The id of a submitted, not yet collected batch for this set of requests, if any."""
        with self._lock:
            row = self._db.execute(
                "SELECT id FROM batches WHERE chunk = ? AND collected = 0 ORDER BY created DESC LIMIT 1", (chunk,)
            ).fetchone()
        return row[0] if row else None

    def record_batch(self, batch_id: str, chunk: str, endpoint: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO batches (id, chunk, endpoint, collected, created) VALUES (?, ?, ?, 0, ?)",
                             (batch_id, chunk, endpoint, time.time()))

    def batch_collected(self, batch_id: str) -> None:
        with self._lock:
            self._db.execute("UPDATE batches SET collected = 1 WHERE id = ?", (batch_id,))

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def schema_version(self) -> int:
        with self._lock:
            return self._db.execute("PRAGMA user_version").fetchone()[0]

    def stats(self) -> dict:
        with self._lock:
            batches = self._db.execute("SELECT COUNT(*) FROM batches WHERE collected = 0").fetchone()[0]
        return {**super().stats(), "pending_batches": batches}

    def export(self) -> Iterator[dict]:
        """Every stored answer in the order stored (see ``CacheStore.export``)."""
        rowid = 0
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT rowid, key, value, input_tokens, output_tokens, finish_reason, created FROM responses"
                    " WHERE rowid > ? ORDER BY rowid LIMIT 1000", (rowid,)).fetchall()
            if not rows:
                return
            for r in rows:
                yield {"key": r[1], "value": load_one(r[2]), "input_tokens": r[3], "output_tokens": r[4],
                       "finish_reason": r[5], "created": r[6]}
            rowid = rows[-1][0]

    def clear(self) -> None:
        """Delete every answer and give the space back to the disk (``inferframe cache clear``)."""
        with self._lock:
            self._db.execute("DELETE FROM responses")
            # VACUUM cannot run while another connection reads the file; the rows are gone either way
            with contextlib.suppress(sqlite3.OperationalError):
                self._db.execute("VACUUM")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __reduce__(self):
        return (ResponseCache, (str(self.directory),))


class CacheReader:
    """Looks up one job's batches of keys, reading on in the order the answers were stored.

    A rerun asks for its rows in about the order its first run stored them (give or take the
    rows that were in flight together). So once a batch is found by key, the rows stored after
    it are read in rowid order, a batch's worth at a time (a sequential scan), into a bounded
    window that answers the next batches: in a cache of a million answers that costs a
    fraction of a lookup by key, which descends the key index and then the table for every
    key. Keys the window does not hold after a few reads are looked up by key; reading on
    stops for a batch at a read with none of its keys, so a cache shared by many jobs costs a
    few wasted reads per batch. Answers are read at most a window ahead of their use.

    Parameters:
        cache: the cache to read.
        max_rows / max_bytes: the window's bound (the rows read on and not yet pushed out).

    Example:
        >>> import tempfile
        >>> cache = ResponseCache(tempfile.mkdtemp())
        >>> cache.put_many([(f"k{i}", f"answer {i}", 1, 1) for i in range(1000)])
        >>> reader = cache.reader()
        >>> reader.get_many(["k0", "k2", "nope"])  # by key: the reader learns where the job's rows are
        [('answer 0', 1, 1, None), ('answer 2', 1, 1, None), None]
        >>> [hit[0] for hit in reader.get_many([f"k{i}" for i in range(1, 300)])][-1]  # read on from there
        'answer 299'
        >>> reader.by_key  # keys looked up by key: those of the first batch only
        3
    """

    rounds = 4  # reads on per batch, at most
    min_read = 64  # rows read on at once, at least (a store across a network reads more per round trip)

    def __init__(self, cache: ResponseCache, max_rows: int = 8192, max_bytes: int = 8 << 20) -> None:
        self.cache = cache
        self.max_rows, self.max_bytes = max_rows, max_bytes
        self.window: dict[str, tuple] = {}  # key -> stored row, oldest first
        self.bytes = 0
        self.next_rowid: int | None = None
        self.by_key = self.read_on = 0  # keys looked up by key, rows read on (for tests and benches)

    def get_many(self, keys: list[str]) -> list[Hit | None]:
        """``ResponseCache.get_many``, answered from the window where it can be."""
        window = self.window
        got: dict[str, tuple] = {}
        missing: list[str] = []
        for k in dict.fromkeys(keys):
            row = window.get(k)
            if row is None:
                missing.append(k)
            else:
                got[k] = row
        wanted = len(missing)
        if missing and self.next_rowid is not None:
            missing = self._read_on(missing, got, self._read_size(len(got) + len(missing)))
            if len(missing) == wanted:
                self.next_rowid = None  # none of them stored next: not stored, or elsewhere (found by key below)
        if missing:
            self.by_key += len(missing)
            rows = self.cache._by_key(missing)
            for r in rows:
                got[r[1]] = r
            if rows and (self.next_rowid is None or len(missing) * 2 > wanted):
                self._move_to(rows)
        if not got:
            return [None] * len(keys)
        found = decode_rows(list(got.values()), 1)
        return [found.get(k) for k in keys]

    def _read_size(self, batch: int) -> int:
        """Rows to read on at once: ``min_read`` or the batch, but no more than a quarter of the window's bytes."""
        n = max(batch, self.min_read)
        if self.window and n > batch:
            row_bytes = max(1, self.bytes // len(self.window))
            n = max(batch, min(n, self.max_rows // 2, self.max_bytes // (4 * row_bytes)))
        return n

    def _move_to(self, rows: list[tuple]) -> None:
        """Read on after this batch's answers (found by key) next time; keep their neighbours."""
        lo, hi = min(r[0] for r in rows), max(r[0] for r in rows)
        if hi - lo + 1 > len(rows) and hi - lo < 4 * len(rows):
            among = self.cache._after(lo, hi - lo + 1)  # rows stored among them: other batches' answers
            self.read_on += len(among)
            self._keep(among)
        self._keep(rows)
        self.next_rowid = hi + 1

    def _read_on(self, missing: list[str], got: dict[str, tuple], n: int) -> list[str]:
        # A batch's worth at a time keeps the window ahead of the batches as they come.
        want = set(missing)
        for _ in range(self.rounds):
            rows = self.cache._after(self.next_rowid, n)
            if not rows:
                break  # the end of the table
            self.next_rowid = rows[-1][0] + 1
            self.read_on += len(rows)
            self._keep(rows)
            found = len(want)
            for r in rows:
                if r[1] in want:
                    got[r[1]] = r
                    want.discard(r[1])
            if not want or len(want) == found:
                break
        return [k for k in missing if k in want]

    def _keep(self, rows: list[tuple]) -> None:
        window = self.window
        for r in rows:
            window[r[1]] = r
        self.bytes += sum([len(r[2]) for r in rows])  # a row read again counts twice until the next trim
        if len(window) > self.max_rows or self.bytes > self.max_bytes:
            # Push out the oldest rows, down to half the bounds: a copy now and then, about one per row read.
            keep_rows, keep_bytes = self.max_rows // 2, self.max_bytes // 2
            kept, size = [], 0
            for r in reversed(window.values()):
                if len(kept) >= keep_rows or size + len(r[2]) > keep_bytes:
                    break
                kept.append(r)
                size += len(r[2])
            self.window = {r[1]: r for r in reversed(kept)}
            self.bytes = size
