"""Run history: one row per job with AI calls, in a SQLite file next to the response cache.

Each run records what it called (providers, models, prompt versions: never a key), its totals
(rows, tokens, cost, retries, 429s, errors by kind, cache hits, truncated rows, input tokens the
provider's prompt cache served and the dollars they saved), latency
percentiles and histogram, rows/s over time, the output distribution of each AI column, any
drift against the earlier runs of the same pipeline, and a reproducible review sample of rows.
Only what the user's data and counters already hold is stored.

A run is stored when it starts (status ``running``) and again every few seconds with what it has
done so far, so a process killed outright leaves its run behind; ``runs()`` shows such a run, whose
process is gone, as ``interrupted``. A finished run is ``ok`` or ``failed`` (``interrupted`` too when
it was stopped by Ctrl-C or its consumer).

Example:
    >>> import tempfile
    >>> h = RunHistory(tempfile.mkdtemp())
    >>> h.record({"run_id": "r1", "started": 1.0, "ended": 2.0, "fingerprint": "f", "rows": 3}, [{"q": "a"}])
    >>> [r["run_id"] for r in h.runs()], h.sample("r1")
    (['r1'], [{'q': 'a'}])
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

from inferframe.observe.owner import owner_gone
from inferframe.observe.sqlite_wal import connect_private, use_wal

FILE_NAME = "runs.sqlite"

# The runs table's columns as the first schema made them; later migrations add to these.
_V1_SCALARS = ("run_id", "started", "ended", "fingerprint", "status", "rows", "requests", "input_tokens", "output_tokens",
               "cost", "retries", "rate_limited", "errors", "cache_hits", "truncated", "latency_p50_s", "latency_p90_s",
               "latency_p99_s")
# Added by _v2: the provider's prompt cache (input tokens it served, dollars saved).
_V2_SCALARS = (("cached_tokens", "INTEGER"), ("cache_saved", "REAL"))
# Columns of the runs table; nested values are stored as JSON text.
SCALARS = _V1_SCALARS + tuple(c for c, _ in _V2_SCALARS)
NESTED = ("calls", "prompt_versions", "errors_by_kind", "latency_hist", "timeline", "distributions", "drift",
          "evaluation")


def _v1(db: sqlite3.Connection) -> None:
    cols = ", ".join([f"{c} {'TEXT PRIMARY KEY' if c == 'run_id' else ''}" for c in _V1_SCALARS] +
                     [f"{c} TEXT" for c in NESTED])
    db.execute(f"CREATE TABLE IF NOT EXISTS runs ({cols})")
    db.execute("CREATE INDEX IF NOT EXISTS runs_by_pipeline ON runs (fingerprint, started)")
    db.execute("CREATE TABLE IF NOT EXISTS samples (run_id TEXT, n INTEGER, row TEXT, PRIMARY KEY (run_id, n))")


def _v2(db: sqlite3.Connection) -> None:
    """Prompt-cache columns; a run stored before them reads as 0 cached tokens and $0 saved."""
    have = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    for name, kind in _V2_SCALARS:
        if name not in have:
            db.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind} DEFAULT 0")


def _v3(db: sqlite3.Connection) -> None:
    """The process that records a running run (see ``observe.owner``): a run left running by a dead one was interrupted."""
    if "owner" not in {row[1] for row in db.execute("PRAGMA table_info(runs)")}:
        db.execute("ALTER TABLE runs ADD COLUMN owner TEXT")


# Schema changes are appended here, one small function each; user_version records how many ran.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_v1, _v2, _v3)

# A running run stores what it has done every few seconds (its ``ended`` is the last time); one silent for
# this long is taken as interrupted even where its process cannot be judged (another machine).
STALE_S = 600.0


class RunHistory:
    """The run history of one directory (by default the response cache's).

    Parameters:
        directory: where ``runs.sqlite`` lives.
    """

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / FILE_NAME
        self._lock = threading.Lock()
        # It holds a sample of inputs and answers: directory 0700, file 0600 (and its -wal/-shm), whatever the umask.
        self._db = connect_private(self.path, check_same_thread=False, timeout=30)
        use_wal(self._db)
        self._migrate()

    def _migrate(self) -> None:
        """Bring the schema up to date; each step under SQLite's write lock, so two jobs opening it at once
        (two threads, two processes) run it once ("duplicate column" and "database is locked" otherwise)."""
        if self._db.execute("PRAGMA user_version").fetchone()[0] >= len(MIGRATIONS):
            return
        for i, migrate in enumerate(MIGRATIONS):
            self._db.commit()  # leave any implicit transaction: BEGIN IMMEDIATE must open its own
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if self._db.execute("PRAGMA user_version").fetchone()[0] <= i:  # read under the write lock
                    migrate(self._db)
                    self._db.execute(f"PRAGMA user_version = {i + 1}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def record(self, run: dict, sample: list[dict], first: int = 0) -> None:
        """Store one run (finished, or running with what it has done so far) and its review sample.

        ``first``: rows of ``sample`` before it are already stored (a running run stores its sample as
        it grows). ``run["owner"]``, for a running run, is its process's ``observe.owner.owner_tag()``.
        """
        values = ([run.get(c) for c in SCALARS] + [json.dumps(run.get(c), default=str) for c in NESTED] +
                  [run.get("owner")])
        marks = ",".join("?" * len(values))
        with self._lock, self._db:
            self._db.execute(f"INSERT OR REPLACE INTO runs ({','.join(SCALARS + NESTED)},owner) VALUES ({marks})",
                             values)
            self._db.executemany("INSERT OR REPLACE INTO samples VALUES (?, ?, ?)",
                                 [(run["run_id"], i, json.dumps(r, default=str))
                                  for i, r in enumerate(sample[first:], start=first)])

    def update(self, run_id: str, **fields: Any) -> None:
        """Change nested fields of a stored run (e.g. its evaluation)."""
        with self._lock, self._db:
            for k, v in fields.items():
                if k not in NESTED:
                    raise ValueError(f"{k!r} is not a stored field of a run; one of {NESTED}")
                self._db.execute(f"UPDATE runs SET {k} = ? WHERE run_id = ?", (json.dumps(v, default=str), run_id))

    def runs(self, fingerprint: str | None = None, limit: int | None = None) -> list[dict]:
        """Stored runs, newest first (of one pipeline when ``fingerprint`` is given).

        A run still ``running`` whose process is gone (or that stored nothing for ``STALE_S``) is
        ``interrupted``, and stored so from then on.
        """
        sql = f"SELECT {','.join(SCALARS + NESTED)},owner FROM runs"
        args: list = []
        if fingerprint is not None:
            sql += " WHERE fingerprint = ?"
            args.append(fingerprint)
        sql += " ORDER BY started DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
        out = []
        for row in rows:
            d = dict(zip(SCALARS, row[:len(SCALARS)]))
            d.update({k: json.loads(v) if v is not None else None for k, v in zip(NESTED, row[len(SCALARS):-1])})
            if d["status"] == "running" and _interrupted(row[-1], d.get("ended") or d.get("started")):
                d["status"] = "interrupted"
                with self._lock, self._db:  # only if it is still running: it may have just finished
                    self._db.execute("UPDATE runs SET status = 'interrupted' WHERE run_id = ? AND status = 'running'",
                                     (d["run_id"],))
            out.append(d)
        return out

    def sample(self, run_id: str) -> list[dict]:
        """The review sample of one run, in row order."""
        with self._lock:
            rows = self._db.execute("SELECT row FROM samples WHERE run_id = ? ORDER BY n", (run_id,)).fetchall()
        return [json.loads(r[0]) for r in rows]


def _interrupted(owner: str | None, last_stored: float | None) -> bool:
    """A running run's process is gone, or it has stored nothing for too long."""
    return bool(owner and owner_gone(owner)) or (last_stored is not None and time.time() - last_stored > STALE_S)


# --- output distributions ---------------------------------------------------------------------

MAX_CATEGORIES = 20  # a column (or struct field) with more distinct values is described by numbers, not shares


def shares(counts: dict[str, int]) -> dict[str, float]:
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()} if total else {}


# Answers needed in a run (and in the earlier runs together) before its shares are compared.
MIN_DRIFT_ROWS = 30


def drift(current: dict, earlier: list[dict], *, sigmas: float = 2.0, min_change: float = 0.02,
          min_rows: int = MIN_DRIFT_ROWS) -> list[dict]:
    """Category shares of ``current`` that moved beyond ``sigmas`` against the pooled ``earlier`` runs.

    Each distribution is ``{column: {"rows": n, "categories": {value: count}}}``. A share moves when
    it differs from the earlier runs' pooled share by more than ``sigmas`` standard errors of the
    difference of two proportions, and by at least ``min_change`` (so a huge run does not flag noise).
    The population stability index of each column is reported with each move. A column with fewer
    than ``min_rows`` answers in this run or in the earlier ones is not compared: the normal
    approximation behind the sigmas does not hold there (one answer of 5 is "20%, 11 sigma" against
    300 answers that never gave it).

    Example:
        >>> before = [{"label": {"rows": 1000, "categories": {"pos": 700, "neg": 300}}}]
        >>> now = {"label": {"rows": 1000, "categories": {"pos": 450, "neg": 550}}}
        >>> [(d["column"], d["value"], round(d["before"], 2), round(d["after"], 2)) for d in drift(now, before)]
        [('label', 'neg', 0.3, 0.55), ('label', 'pos', 0.7, 0.45)]
        >>> drift({"label": {"rows": 1000, "categories": {"pos": 690, "neg": 310}}}, before)
        []
        >>> drift({"label": {"rows": 5, "categories": {"pos": 1, "neg": 4}}}, before)   # too few answers to tell
        []
    """
    moves = []
    for column, dist in current.items():
        cats = dist.get("categories")
        if not cats:
            continue
        pooled: dict[str, int] = {}
        n0 = 0
        for run in earlier:
            d = (run or {}).get(column) or {}
            for k, v in (d.get("categories") or {}).items():
                pooled[k] = pooled.get(k, 0) + v
            n0 += sum((d.get("categories") or {}).values())
        n1 = sum(cats.values())
        if n0 < min_rows or n1 < min_rows:
            continue
        p0s, p1s = shares(pooled), shares(cats)
        keys = sorted(set(p0s) | set(p1s))
        psi = sum((max(p1s.get(k, 0), 1e-4) - max(p0s.get(k, 0), 1e-4)) *
                  math.log(max(p1s.get(k, 0), 1e-4) / max(p0s.get(k, 0), 1e-4)) for k in keys)
        for k in keys:
            p0, p1 = p0s.get(k, 0.0), p1s.get(k, 0.0)
            p = (p0 * n0 + p1 * n1) / (n0 + n1)
            sigma = math.sqrt(max(p * (1 - p), 1e-12) * (1 / n0 + 1 / n1))
            if abs(p1 - p0) > sigmas * sigma and abs(p1 - p0) >= min_change:
                moves.append({"column": column, "value": k, "before": p0, "after": p1, "sigmas": abs(p1 - p0) / sigma,
                              "psi": psi, "runs_before": len(earlier)})
    return moves
