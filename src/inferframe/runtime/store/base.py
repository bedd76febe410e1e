"""What every response-cache store offers (one SQLite file, or PostgreSQL shared by a cluster), and
the JSON coding of stored answers that they share.

A store keeps answers by content key and the Batch API ledger (submitted batches, so a batch is
polled, not submitted again). Lookups come in batches: one round trip answers many keys.

Example:
    >>> dumps_value({"x": [1, 2.5]}), load_one('{"x": NaN}')["x"] != 0
    ('{"x":[1,2.5]}', True)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

# A stored answer: (value, input tokens, output tokens, finish reason or None).
Hit = tuple[Any, int, int, "str | None"]

try:
    import orjson

    def canonical_bytes(obj: Any) -> bytes:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)

    def dumps_value(value: Any) -> str:
        # An embedding is 1,536+ floats: orjson writes and reads them ~15x faster than json.
        try:
            return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:  # what orjson refuses (ints over 64 bits, ...) json still writes
            return json.dumps(value, ensure_ascii=False)

    _loads = orjson.loads
except ImportError:  # pragma: no cover
    def canonical_bytes(obj: Any) -> bytes:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    def dumps_value(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    _loads = json.loads


def load_one(text: str) -> Any:
    try:
        return _loads(text)
    except ValueError:  # NaN/Infinity, which json wrote and orjson does not read
        return json.loads(text)


def decode_rows(rows: list[tuple], at: int = 0) -> dict[str, Hit]:
    """{key: (value, input tokens, output tokens, finish reason)} of stored rows (key, value text, in, out, finish)
    starting at column ``at`` (SQLite's rows lead with their rowid)."""
    try:  # one parse for the whole batch: each stored value is a JSON text
        values = _loads("[" + ",".join([r[at + 1] for r in rows]) + "]")
    except ValueError:  # NaN/Infinity somewhere, which json wrote and orjson does not read
        values = [load_one(r[at + 1]) for r in rows]
    return {r[at]: (v, r[at + 2], r[at + 3], r[at + 4]) for r, v in zip(rows, values)}


def default_cache_dir() -> Path:
    """INFERFRAME_CACHE_DIR, else $XDG_CACHE_HOME/inferframe, else ~/.cache/inferframe."""
    env = os.environ.get("INFERFRAME_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "inferframe"


class CacheStore:
    """The interface of a response-cache store; ``ResponseCache`` (SQLite) and ``PostgresStore`` implement it.

    ``name`` says where the store is without any secret (a path, or ``postgresql://host:port/db``).
    """

    name: str = ""
    kind: str = ""

    def get(self, key: str) -> Hit | None:
        """One stored answer, or None."""
        return self.get_many([key])[0]

    def get_many(self, keys: list[str]) -> list[Hit | None]:  # pragma: no cover - interface
        """The stored answers of ``keys`` (None where none), in one round trip."""
        raise NotImplementedError

    def recheck(self, key: str) -> Hit | None:
        """An answer stored since the key's batch was looked up, where that costs no round trip to a server.

        A row looks again as it starts: an identical row may have been answered meanwhile (in this process).
        """
        return self.get(key)

    def reader(self) -> Any:
        """A reader for one job's batches (``get_many``)."""
        return self

    def put(self, key: str, value: Any, input_tokens: int, output_tokens: int,
            finish_reason: str | None = None) -> None:
        """Store one answer (and why its generation stopped, when known)."""
        self.put_many([(key, value, input_tokens, output_tokens, finish_reason)])

    def put_many(self, items: list[tuple]) -> None:  # pragma: no cover - interface
        """Store (key, value, input tokens, output tokens[, finish reason]) answers."""
        raise NotImplementedError

    def flush(self, timeout: float | None = None) -> int:
        """Wait until every answer put so far is stored; returns how many are still not (0: all)."""
        return 0

    # The Batch API ledger.
    def pending_batch(self, chunk: str) -> str | None:  # pragma: no cover - interface
        """The id of a submitted, not yet collected batch for this set of requests, if any."""
        raise NotImplementedError

    def record_batch(self, batch_id: str, chunk: str, endpoint: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def batch_collected(self, batch_id: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def __len__(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def schema_version(self) -> int:  # pragma: no cover - interface
        """How many schema migrations the store has run."""
        raise NotImplementedError

    def stats(self) -> dict:
        """Entries, batches, schema version and where the store is (no secret)."""
        return {"entries": len(self), "schema_version": self.schema_version(), "store": self.name}

    def export(self) -> Iterator[dict]:  # pragma: no cover - interface
        """Every stored answer as a dict (key, value, input_tokens, output_tokens, finish_reason, created)."""
        raise NotImplementedError

    def clear(self) -> None:  # pragma: no cover - interface
        """Delete every answer."""
        raise NotImplementedError

    def close(self) -> None:
        pass
