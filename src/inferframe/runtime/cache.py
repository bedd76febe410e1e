"""A persistent, content-addressed response cache: a paid answer is never paid for twice.

The key is a SHA-256 of the canonical JSON of everything that determines the
answer: the provider's identity (kind and endpoint), the API path, the request
body (model, messages, parameters, schema) and an optional user
``prompt_version``. API keys are never part of it. Each answer is committed to
SQLite (WAL) the moment it arrives, so a crash loses nothing that was paid for. An entry keeps
what the answer was: its value, tokens and why generation stopped (``finish_reason``), so a
rerun served from the cache gives the same output.

Example:
    >>> import tempfile
    >>> cache = ResponseCache(tempfile.mkdtemp())
    >>> k = cache_key("openai:https://api.openai.com/v1", "chat", {"model": "m", "messages": []})
    >>> cache.put(k, "hi", 3, 1, "length")
    >>> cache.get(k)
    ('hi', 3, 1, 'length')
"""

from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

from inferframe.observe.sqlite_wal import connect_private, use_wal

# A stored answer: (value, input tokens, output tokens, finish reason or None).
Hit = tuple[Any, int, int, "str | None"]


class CachePolicy(str, enum.Enum):
    """How a call uses the response cache; the value is the string users pass as ``cache=``.

    Example:
        >>> CachePolicy("read_only").reads, CachePolicy.READ_ONLY.writes
        (True, False)
    """

    READ_WRITE = "read_write"
    READ_ONLY = "read_only"
    REFRESH = "refresh"  # send again and overwrite
    OFF = "off"

    @property
    def reads(self) -> bool:
        """Answers are looked up before sending."""
        return self in (CachePolicy.READ_WRITE, CachePolicy.READ_ONLY)

    @property
    def writes(self) -> bool:
        """New answers are stored."""
        return self in (CachePolicy.READ_WRITE, CachePolicy.REFRESH)


POLICIES = tuple(p.value for p in CachePolicy)

try:
    import orjson

    def _canonical(obj: Any) -> bytes:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)

    def _dumps(value: Any) -> str:
        # An embedding is 1,536+ floats: orjson writes and reads them ~15x faster than json.
        try:
            return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:  # what orjson refuses (ints over 64 bits, ...) json still writes
            return json.dumps(value, ensure_ascii=False)

    _loads = orjson.loads
except ImportError:  # pragma: no cover
    def _canonical(obj: Any) -> bytes:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    def _dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    _loads = json.loads


def json_numbers(value: Any) -> Any:
    """``value`` with every whole float written as an int: JSON has one kind of number.

    ``temperature=0`` from Python and ``--temperature 0`` from the command line (a float) are one
    request; without this their bodies serialise as ``0`` and ``0.0``, and so hash to two cache
    keys. Request options go through it once per call, when the plan is built, so the body sent and
    the key hashed hold the same number whoever wrote it (row texts are strings: untouched).

    Example:
        >>> json_numbers({"temperature": 0.0, "top_p": 0.5, "stop": ["0.0"], "extra": {"seed": 7.0}})
        {'temperature': 0, 'top_p': 0.5, 'stop': ['0.0'], 'extra': {'seed': 7}}
    """
    t = type(value)
    if t is float:
        return int(value) if value.is_integer() and abs(value) < 2 ** 63 else value
    if t is dict:
        return {k: json_numbers(v) for k, v in value.items()}
    if t is list or t is tuple:
        return t(json_numbers(v) for v in value)
    return value


def cache_key(identity: str, endpoint: str, body: dict, prompt_version: str | None = None) -> str:
    """The content address of one request: identical inputs, identical key; secrets never enter it."""
    doc = {"v": 1, "provider": identity, "endpoint": endpoint, "body": body}
    if prompt_version is not None:
        doc["prompt_version"] = prompt_version
    return hashlib.sha256(_canonical(doc)).hexdigest()


def cache_keys(identity: str, requests: list, prompt_version: str | None = None) -> list[str | None]:
    """``cache_key`` of every request (anything with ``endpoint`` and ``body``; None stays None), batched.

    The canonical document has sorted keys and ``body`` sorts first, so each key hashes
    ``{"body":`` + the body's canonical JSON + a tail shared by every request to one endpoint:
    the same bytes ``cache_key`` hashes, without building and sorting the document per row.

    Example:
        >>> from types import SimpleNamespace as R
        >>> rs = [R(endpoint="chat", body={"model": "m", "n": i}) for i in range(2)] + [None]
        >>> cache_keys("p", rs, "v2") == [cache_key("p", "chat", r.body, "v2") for r in rs[:2]] + [None]
        True
    """
    tails: dict[str, bytes] = {}
    sha256, canonical = hashlib.sha256, _canonical
    out: list[str | None] = []
    for r in requests:
        if r is None:
            out.append(None)
            continue
        tail = tails.get(r.endpoint)
        if tail is None:
            doc = {"v": 1, "provider": identity, "endpoint": r.endpoint, "body": None}
            if prompt_version is not None:
                doc["prompt_version"] = prompt_version
            whole = canonical(doc)
            head = b'{"body":null'
            assert whole.startswith(head), whole  # "body" sorts before every other field
            tail = tails[r.endpoint] = whole[len(head):]
        out.append(sha256(b'{"body":' + canonical(r.body) + tail).hexdigest())
    return out


class KeyTemplate:
    """``cache_key`` of bodies that differ only in one string: the canonical JSON around it is made once.

    A cached rerun of a text prompt is mostly key making; splicing each row's text into the
    bytes around a placeholder gives the very bytes ``cache_key`` hashes, without building a
    body per row.

    Parameters:
        identity, endpoint, prompt_version: as for ``cache_key``.
        body: the body with ``KeyTemplate.SLOT`` where the row's string goes (exactly once).

    Example:
        >>> t = KeyTemplate("p", "chat", {"model": "m", "messages": [{"content": KeyTemplate.SLOT}]})
        >>> t.keys(["hi", None]) == [cache_key("p", "chat", {"model": "m", "messages": [{"content": "hi"}]}), None]
        True
    """

    SLOT = "\x00inferframe-row-text\x00"

    def __init__(self, identity: str, endpoint: str, body: dict, prompt_version: str | None = None) -> None:
        doc = {"v": 1, "provider": identity, "endpoint": endpoint, "body": body}
        if prompt_version is not None:
            doc["prompt_version"] = prompt_version
        parts = _canonical(doc).split(_canonical(self.SLOT))
        if len(parts) != 2:
            raise ValueError(f"the body must hold the slot exactly once, not {len(parts) - 1} times")
        self.head, self.tail = parts

    def keys(self, texts: list[str | None]) -> list[str | None]:
        """The key of each text's body (None stays None)."""
        sha256, canonical, head, tail = hashlib.sha256, _canonical, self.head, self.tail
        return [None if t is None else sha256(head + canonical(t) + tail).hexdigest() for t in texts]


def default_cache_dir() -> Path:
    """INFERFRAME_CACHE_DIR, else $XDG_CACHE_HOME/inferframe, else ~/.cache/inferframe."""
    env = os.environ.get("INFERFRAME_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "inferframe"


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


def _load_one(text: str) -> Any:
    try:
        return _loads(text)
    except ValueError:  # NaN/Infinity, which json wrote and orjson does not read
        return json.loads(text)


_IN_CHUNK = 500  # keys per query: under SQLite's oldest limit of 999 bound parameters
_COLUMNS = "rowid, key, value, input_tokens, output_tokens, finish_reason"
_AFTER = f"SELECT {_COLUMNS} FROM responses WHERE rowid >= ? ORDER BY rowid LIMIT ?"


@functools.lru_cache(maxsize=None)
def _select_in(n: int) -> str:
    return f"SELECT {_COLUMNS} FROM responses WHERE key IN ({','.join('?' * n)})"


def _decoded(rows: list[tuple]) -> dict[str, Hit]:
    """{key: (value, input tokens, output tokens, finish reason)} of stored rows (rowid, key, value, in, out, finish)."""
    try:  # one parse for the whole batch: each stored value is a JSON text
        values = _loads("[" + ",".join([r[2] for r in rows]) + "]")
    except ValueError:  # NaN/Infinity somewhere, which json wrote and orjson does not read
        values = [_load_one(r[2]) for r in rows]
    return {r[1]: (v, r[3], r[4], r[5]) for r, v in zip(rows, values)}


# Schema changes are appended here, one small function each; user_version records how many ran.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2, _v3)


class ResponseCache:
    """One SQLite file of answers, shared by every job (and process) that points at the directory.

    Parameters:
        directory: where ``responses.sqlite`` lives; created private to the user (0700, file 0600).
    """

    def __init__(self, directory: str | os.PathLike | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.path = self.directory / "responses.sqlite"
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
        return _load_one(row[0]), row[1], row[2], row[3]

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
        found = _decoded(rows)
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
        rows = [(it[0], _dumps(it[1]), int(it[2]), int(it[3]), it[4] if len(it) > 4 else None, now) for it in items]
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
            missing = self._read_on(missing, got, max(len(got) + len(missing), 64))
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
        found = _decoded(list(got.values()))
        return [found.get(k) for k in keys]

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


_open: dict[str, ResponseCache] = {}
_open_lock = threading.Lock()


def open_cache(directory: str | os.PathLike | None = None) -> ResponseCache:
    """The process's shared handle on the cache in ``directory`` (default: default_cache_dir())."""
    path = str(Path(directory).expanduser() if directory is not None else default_cache_dir())
    with _open_lock:
        cache = _open.get(path)
        if cache is None:
            cache = _open[path] = ResponseCache(path)
        return cache
