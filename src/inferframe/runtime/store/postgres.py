"""The response cache in PostgreSQL: one store that every node of a cluster shares (psycopg 3).

Promises, as the SQLite file keeps them on one machine:

* Each answer is stored as it arrives: ``put`` hands it to a writer thread that commits whatever
  has arrived in one statement, a round trip after the answer (group commit: the event loop never
  waits on the network). ``recheck`` and ``get_many`` see an answer from the moment it is put.
* A batch of keys is one round trip (``key = ANY(array)``).
* Many processes on many nodes write at once: an upsert (``INSERT ... ON CONFLICT``); a statement
  the server aborts as a deadlock (two writers upserting shared keys in other orders) is sent again.
* The schema is versioned (``inferframe_schema``) and migrated by a list of small functions under
  an advisory lock, so two processes opening a fresh database do not race.
* Failures: unreachable at start is a ``ServiceError`` naming the host (never the password) before
  any request. Lost mid-run, the answers not yet written stay in memory and the writer retries
  (backoff to 5 s) until the store is back; lookups retry for ``read_patience`` seconds and then
  stop the job with a ``ServiceError`` (what finished is kept). If the store is still down when the
  process ends, the unwritten answers are saved to a local SQLite file beside the cache directory
  (``<cache_dir>/unsent``, named in a warning) and written to the store the next time a process
  with that cache directory opens it: a paid answer is never silently dropped.

The URL holds a password: it is kept only in the connection and never in a repr, a pickle
(which holds the secret handle) or a message (``name`` is the URL without user or password).

Example (needs a running PostgreSQL, as in tests/store):
    >>> store = PostgresStore("postgresql://me:pw@127.0.0.1:1/db", connect_timeout=1)  # doctest: +SKIP
    Traceback (most recent call last):
    inferframe.errors.ServiceError: the cache store postgresql://127.0.0.1:1/db is unreachable ...
"""

from __future__ import annotations

import atexit
import collections
import itertools
import logging
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterator

from inferframe.errors import PlanError, ServiceError, warn_user
from inferframe.runtime.store.base import CacheStore, Hit, dumps_value, load_one, decode_rows
from inferframe.runtime.store.sqlite import CacheReader
from inferframe.runtime.store.url import host_of, safe_name

log = logging.getLogger("inferframe.cache")

_COLUMNS = "key, value, input_tokens, output_tokens, finish_reason"
# Rows as the SQLite file gives them to CacheReader: (position in the order stored, key, value, in, out, finish).
_SELECT = f"SELECT seq, {_COLUMNS} FROM inferframe_responses WHERE key = ANY(%s)"
_AFTER = f"SELECT seq, {_COLUMNS} FROM inferframe_responses WHERE seq >= %s ORDER BY seq LIMIT %s"
_UPSERT = (
    f"INSERT INTO inferframe_responses ({_COLUMNS}, created)"
    " SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::bigint[], %s::text[], %s::float8[])"
    " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, input_tokens = EXCLUDED.input_tokens,"
    " output_tokens = EXCLUDED.output_tokens, finish_reason = EXCLUDED.finish_reason, created = EXCLUDED.created"
)
_WRITER_IDLE = 1.0  # seconds an idle writer thread waits for answers before it leaves
_LOCK_ID = 0x1F3A_C0DE  # the advisory lock that serialises migrations
_RECENT = 65536  # answers this process put, kept for ``recheck`` (bounded: a huge run stays flat)
_WRITE_CHUNK = 5000  # answers per statement at most


def _v1(cur: Any) -> None:
    # seq: the order answers were stored in, which a rerun reads on in (CacheReader): a range scan
    # costs a fraction of a lookup by key per row.
    cur.execute("CREATE TABLE inferframe_responses (key text PRIMARY KEY, value text NOT NULL,"
                " input_tokens bigint NOT NULL, output_tokens bigint NOT NULL, finish_reason text,"
                " created double precision NOT NULL, seq bigserial UNIQUE)")


def _v2(cur: Any) -> None:
    # The Batch API ledger: a batch submitted by any process on any node is polled, not submitted again.
    cur.execute("CREATE TABLE inferframe_batches (id text PRIMARY KEY, chunk text NOT NULL, endpoint text NOT NULL,"
                " collected boolean NOT NULL DEFAULT false, created double precision NOT NULL)")
    cur.execute("CREATE INDEX inferframe_batches_chunk ON inferframe_batches (chunk, collected)")


# Schema changes are appended here, one small function each; inferframe_schema.version records how many ran.
MIGRATIONS: tuple[Callable[[Any], None], ...] = (_v1, _v2)


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise PlanError("a PostgreSQL cache store needs psycopg 3: pip install 'inferframe[postgres]' "
                        "(or pip install 'psycopg[binary]').") from None
    return psycopg


class PostgresStore(CacheStore):
    """Answers and the Batch API ledger in PostgreSQL, shared by every process that has the URL.

    Parameters:
        url: ``postgresql://user:password@host:5432/db`` (a secret: kept only in the connection).
        spill_dir: the local cache directory where answers go if the store stays down to the end.
        connect_timeout: seconds to wait for the server at start.
        read_patience: seconds a lookup keeps retrying a lost store before the job stops.
    """

    kind = "postgresql"

    def __init__(self, url: str, spill_dir: str | None = None, *, connect_timeout: float = 10.0, read_patience: float = 30.0) -> None:
        self.name = safe_name(url)
        self.host = host_of(url)
        self._url = url
        self._secret = urllib.parse.urlsplit(url).password if "://" in url else None
        self.spill_dir = spill_dir
        self.connect_timeout, self.read_patience = connect_timeout, read_patience
        self._lock = threading.Lock()  # the lookup connection
        self._cond = threading.Condition()  # guards _pending, _recent and the writer's state
        self._pending: dict[str, tuple] = {}  # key -> row not yet committed
        self._recent: collections.OrderedDict[str, tuple] = collections.OrderedDict()
        self._writer: threading.Thread | None = None
        self._closing = False
        self.down_since: float | None = None  # when the writer lost the store (None: writing)
        self.write_retries = 0
        self._db = self._connect(first=True)
        self._migrate()
        self._wdb = None
        self._upload_spill()
        atexit.register(self.close)

    # -- connections -------------------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        if self._secret:
            text = text.replace(self._secret, "***")
        return text.replace(self._url, self.name)

    def _connect(self, first: bool = False):
        psycopg = _psycopg()
        try:
            return psycopg.connect(self._url, autocommit=True, connect_timeout=max(1, int(self.connect_timeout)),
                                   application_name="inferframe")
        except psycopg.Error as e:
            first_line = self._scrub(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
            when = "" if first else " (lost mid-run)"
            raise ServiceError(
                f"the cache store {self.name} is unreachable{when}: host {self.host}: {first_line}. Check that "
                "PostgreSQL runs there and the URL's user, password and database (cache_url= / "
                "INFERFRAME_CACHE_URL), or use a local cache_dir.") from None

    def _migrate(self) -> None:
        with self._lock, self._db.transaction(), self._db.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))  # held to the commit: one migrator at once
            cur.execute("CREATE TABLE IF NOT EXISTS inferframe_schema (version integer NOT NULL)")
            cur.execute("SELECT version FROM inferframe_schema")
            row = cur.fetchone()
            if row is None:
                cur.execute("INSERT INTO inferframe_schema VALUES (0)")
            version = row[0] if row else 0
            if version > len(MIGRATIONS):
                raise PlanError(f"the cache store {self.name} has schema version {version}, newer than this "
                                f"inferframe knows ({len(MIGRATIONS)}): upgrade inferframe.")
            for i in range(version, len(MIGRATIONS)):
                MIGRATIONS[i](cur)
            cur.execute("UPDATE inferframe_schema SET version = %s", (len(MIGRATIONS),))

    def _query(self, fn: Callable[[Any], Any]) -> Any:
        """Run ``fn(cursor)`` on the lookup connection, reconnecting while the store is lost (``read_patience``)."""
        psycopg = _psycopg()
        deadline = time.monotonic() + self.read_patience
        delay = 0.05
        while True:
            try:
                with self._lock:
                    if self._db.closed:
                        self._db = self._connect()
                    with self._db.cursor() as cur:
                        return fn(cur)
            except (psycopg.OperationalError, psycopg.InterfaceError, ServiceError) as e:
                if time.monotonic() > deadline:
                    unwritten = len(self._pending)
                    raise ServiceError(
                        f"the cache store {self.name} (host {self.host}) was lost and did not come back in "
                        f"{self.read_patience:.0f} s: {self._scrub(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)}; "
                        f"{unwritten} answers not yet written are kept and written when it is back (or saved "
                        "beside the local cache directory at exit).") from None
                with self._lock:
                    if not self._db.closed:
                        self._db.close()
                time.sleep(delay)
                delay = min(2.0, delay * 2)

    # -- lookups ------------------------------------------------------------------------------------
    def get_many(self, keys: list[str]) -> list[Hit | None]:
        """The stored answers of ``keys`` in one round trip (answers put here and not yet written included).

        Example (needs PostgreSQL):
            >>> store.put("a", {"x": 1}, 3, 1); store.get_many(["b", "a"])  # doctest: +SKIP
            [None, ({'x': 1}, 3, 1, None)]
        """
        found: dict[str, Hit] = {}
        ask = list(dict.fromkeys(keys))
        if self._pending:
            with self._cond:
                mine = [self._pending[k] for k in ask if k in self._pending]
            if mine:
                found.update(decode_rows(mine))
                ask = [k for k in ask if k not in found]
        if ask:
            rows = self._by_key(ask)
            if rows:
                found.update(decode_rows(rows, 1))
        if not found:
            return [None] * len(keys)
        return [found.get(k) for k in keys]

    def _by_key(self, keys: list[str]) -> list[tuple]:
        """The stored rows (seq, key, value text, in, out, finish) of distinct ``keys``, in one round trip."""
        return self._query(lambda cur: cur.execute(_SELECT, (keys,)).fetchall())

    def _after(self, seq: int, n: int) -> list[tuple]:
        """Up to ``n`` stored rows from ``seq`` on, in the order they were stored."""
        return self._query(lambda cur: cur.execute(_AFTER, (seq, n)).fetchall())

    def reader(self) -> "_Reader":
        """A reader for one job's batches: reads on in the order answers were stored (see CacheReader)."""
        return _Reader(self)

    def recheck(self, key: str) -> Hit | None:
        """An answer this process put since the key's batch was looked up; no round trip."""
        with self._cond:
            row = self._pending.get(key) or self._recent.get(key)
        return None if row is None else (load_one(row[1]), row[2], row[3], row[4])

    # -- writes -------------------------------------------------------------------------------------
    def put_many(self, items: list[tuple]) -> None:
        """Hand answers to the writer thread, which commits them a round trip later (see the module)."""
        now = time.time()
        rows = [(it[0], dumps_value(it[1]), int(it[2]), int(it[3]), it[4] if len(it) > 4 else None, now) for it in items]
        with self._cond:
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._write_loop, name="inferframe-cache-writer", daemon=True)
                self._writer.start()
            for r in rows:
                self._pending[r[0]] = r
            self._cond.notify_all()

    def _write_loop(self) -> None:
        psycopg = _psycopg()
        delay = 0.05
        while True:
            with self._cond:
                # An idle writer leaves (put_many starts another): a store a job left open holds no thread.
                idle_until = time.monotonic() + _WRITER_IDLE
                while not self._pending and not self._closing and time.monotonic() < idle_until:
                    self._cond.wait(max(0.0, idle_until - time.monotonic()))
                if not self._pending:
                    self._writer = None
                    return
                # In arrival order: a rerun reads on in the order stored (seq).
                batch = list(itertools.islice(self._pending.values(), _WRITE_CHUNK))
            try:
                if self._wdb is None or self._wdb.closed:
                    self._wdb = psycopg.connect(self._url, autocommit=True, application_name="inferframe-writer",
                                                connect_timeout=max(1, int(self.connect_timeout)))
                self._wdb.execute(_UPSERT, [list(c) for c in zip(*batch)])
            except psycopg.errors.DeadlockDetected:
                # Two writers upserting shared keys in other orders: the server aborted this statement.
                self.write_retries += 1
                continue
            except psycopg.Error as e:
                with self._cond:
                    if self.down_since is None:
                        self.down_since = time.monotonic()
                        log.warning("the cache store %s is unreachable (%s): %d answers kept in memory, retrying",
                                    self.name, self._scrub(str(e).strip().splitlines()[0] if str(e).strip() else ""),
                                    len(self._pending))
                    self.write_retries += 1
                    if self._closing:
                        return  # close() saves what is left
                if self._wdb is not None and not self._wdb.closed:
                    self._wdb.close()
                time.sleep(delay)
                delay = min(5.0, delay * 2)
                continue
            delay = 0.05
            with self._cond:
                if self.down_since is not None:
                    log.warning("the cache store %s is back: writing the answers kept in memory", self.name)
                self.down_since = None
                for r in batch:
                    if self._pending.get(r[0]) is r:  # not put again meanwhile
                        del self._pending[r[0]]
                    self._recent[r[0]] = r
                    self._recent.move_to_end(r[0])
                while len(self._recent) > _RECENT:
                    self._recent.popitem(last=False)
                self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> int:
        """Wait until every answer put so far is committed (or ``timeout`` seconds); how many are not."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending and (self._writer is not None and self._writer.is_alive()):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._cond.wait(left if left is not None else 1.0)
            return len(self._pending)

    @property
    def unwritten(self) -> int:
        """Answers put and not yet committed."""
        return len(self._pending)

    # -- the Batch API ledger ---------------------------------------------------------------------
    def pending_batch(self, chunk: str) -> str | None:
        row = self._query(lambda cur: cur.execute(
            "SELECT id FROM inferframe_batches WHERE chunk = %s AND NOT collected ORDER BY created DESC LIMIT 1",
            (chunk,)).fetchone())
        return row[0] if row else None

    def record_batch(self, batch_id: str, chunk: str, endpoint: str) -> None:
        self._query(lambda cur: cur.execute(
            "INSERT INTO inferframe_batches (id, chunk, endpoint, collected, created) VALUES (%s, %s, %s, false, %s)"
            " ON CONFLICT (id) DO UPDATE SET chunk = EXCLUDED.chunk, endpoint = EXCLUDED.endpoint, collected = false",
            (batch_id, chunk, endpoint, time.time())))

    def batch_collected(self, batch_id: str) -> None:
        self.flush(timeout=self.read_patience)  # its answers are stored before the batch is marked done
        self._query(lambda cur: cur.execute("UPDATE inferframe_batches SET collected = true WHERE id = %s", (batch_id,)))

    # -- tools --------------------------------------------------------------------------------------
    def __len__(self) -> int:
        self.flush(timeout=self.read_patience)
        return self._query(lambda cur: cur.execute("SELECT COUNT(*) FROM inferframe_responses").fetchone()[0])

    def schema_version(self) -> int:
        return self._query(lambda cur: cur.execute("SELECT version FROM inferframe_schema").fetchone()[0])

    def stats(self) -> dict:
        batches = self._query(lambda cur: cur.execute(
            "SELECT COUNT(*) FROM inferframe_batches WHERE NOT collected").fetchone()[0])
        size = self._query(lambda cur: cur.execute(
            "SELECT pg_total_relation_size('inferframe_responses')").fetchone()[0])
        return {**super().stats(), "pending_batches": batches, "bytes": size, "unwritten": self.unwritten}

    def check_write(self) -> None:
        """Write and delete one row (``inferframe doctor``); raises where the user may not write."""
        def probe(cur: Any) -> None:
            with cur.connection.transaction():
                cur.execute(f"INSERT INTO inferframe_responses ({_COLUMNS}, created) VALUES"
                            " ('inferframe-doctor-probe', 'null', 0, 0, NULL, 0) ON CONFLICT (key) DO NOTHING")
                cur.execute("DELETE FROM inferframe_responses WHERE key = 'inferframe-doctor-probe'")
        self._query(probe)

    def export(self) -> Iterator[dict]:
        """Every stored answer in the order stored (a server-side cursor: memory stays flat)."""
        self.flush(timeout=self.read_patience)
        with self._lock, self._db.transaction(), self._db.cursor(name="inferframe_export") as cur:
            cur.itersize = 2000
            cur.execute(f"SELECT {_COLUMNS}, created FROM inferframe_responses ORDER BY created, key")
            for r in cur:
                yield {"key": r[0], "value": load_one(r[1]), "input_tokens": r[2], "output_tokens": r[3],
                       "finish_reason": r[4], "created": r[5]}

    def clear(self) -> None:
        self.flush(timeout=self.read_patience)
        self._query(lambda cur: cur.execute("TRUNCATE inferframe_responses"))
        with self._cond:
            self._recent.clear()

    # -- the end ------------------------------------------------------------------------------------
    def _spill_path(self) -> Path | None:
        return Path(self.spill_dir) / "unsent" if self.spill_dir else None

    def _upload_spill(self) -> None:
        """Write answers an earlier process could not (the store was down at its exit), then drop the file."""
        where = self._spill_path()
        if where is None or not (where / "responses.sqlite").exists():
            return
        from inferframe.runtime.store.sqlite import ResponseCache

        spill = ResponseCache(where)
        try:
            rows = [(d["key"], d["value"], d["input_tokens"], d["output_tokens"], d["finish_reason"])
                    for d in spill.export()]
        finally:
            spill.close()
        if rows:
            self.put_many(rows)
            if self.flush(timeout=self.read_patience):
                return  # still not all written: the file stays for the next process
        for f in where.glob("responses.sqlite*"):
            f.unlink(missing_ok=True)
        log.warning("wrote %d answers saved while the cache store %s was down", len(rows), self.name)

    def close(self, timeout: float = 10.0) -> None:
        """Write what is pending (for ``timeout`` seconds); what the store still refuses goes to a local file."""
        if self._closing:
            return
        left = self.flush(timeout=timeout) if self._pending else 0
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            rows = list(self._pending.values())
        if left and rows and self._spill_path() is not None:
            from inferframe.runtime.store.sqlite import ResponseCache

            spill = ResponseCache(self._spill_path())
            try:
                spill.put_many([(r[0], load_one(r[1]), r[2], r[3], r[4]) for r in rows])
            finally:
                spill.close()
            warn_user(f"the cache store {self.name} stayed unreachable: {len(rows)} paid answers were saved to "
                          f"{self._spill_path()} and are written to the store when a process with this cache "
                          "directory next opens it.", RuntimeWarning)
        for db in (self._db, self._wdb):
            if db is not None and not db.closed:
                try:
                    db.close()
                except Exception:  # closing a broken connection: nothing left to lose
                    pass

    def __repr__(self) -> str:
        return f"PostgresStore({self.name!r})"

    def __reduce__(self):
        raise TypeError("a PostgresStore does not pickle: its URL is a secret. A plan carries the store's handle "
                        "(RuntimeConfig.cache_store); each process opens the store itself.")


class _Reader(CacheReader):
    """CacheReader on the store, which also answers from this process's answers not yet written."""

    # A read is a round trip, and its answer waits for the GIL behind the job's other threads: a
    # rerun reads on thousands of rows per trip rather than one batch's (781 trips of 128 rows took
    # half of a 100k-row rerun here).
    min_read = 4096

    def get_many(self, keys: list[str]) -> list[Hit | None]:
        hits = super().get_many(keys)
        store = self.cache
        if store._pending and None in hits:
            hits = [h if h is not None else store.recheck(k) for k, h in zip(keys, hits)]
        return hits
