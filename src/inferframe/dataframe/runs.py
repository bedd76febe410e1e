"""The run history as DataFrames: ``runs()`` and ``run_sample()``.

Example:
    >>> import tempfile
    >>> import inferframe as ifr
    >>> runs(directory=tempfile.mkdtemp()).to_pydict()["run_id"]
    []
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc


def _history(directory: str | None):
    from inferframe.observe.history import RunHistory
    from inferframe.session import current

    return RunHistory(current().history_dir(directory))


def runs(limit: int | None = 100, *, directory: str | None = None):
    """The run history as a DataFrame, newest first: one row per job with AI calls.

    Columns: run_id, started/ended (UTC timestamps), fingerprint, status, rows, requests, tokens,
    cost, retries, rate_limited, errors, cache_hits, truncated, latency percentiles, cached_tokens
    (input the provider's prompt cache served) and cache_saved (dollars), models, and
    JSON text for the nested records (calls, errors_by_kind, timeline, distributions, drift, evaluation).

    Parameters:
        limit: at most this many runs (None: all).
        directory: the history's directory (default: ``set_history``'s, else the response cache's).

    Example:
        >>> import tempfile
        >>> runs(directory=tempfile.mkdtemp()).column_names[:3]
        ['run_id', 'started', 'ended']
    """
    from inferframe.dataframe.constructors import from_arrow
    from inferframe.observe.history import NESTED, SCALARS

    rows = _history(directory).runs(limit=limit)
    cols: dict[str, list] = {c: [r[c] for r in rows] for c in SCALARS}
    cols["models"] = [", ".join(sorted({f"{c['provider']}:{c['model']}" if c.get("provider") else str(c.get("model"))
                                         for c in (r["calls"] or [])})) for r in rows]
    for c in NESTED:
        cols[c] = [json.dumps(r[c]) if r[c] is not None else None for r in rows]
    types = {"started": pa.float64(), "ended": pa.float64(), "cost": pa.float64(), "cache_saved": pa.float64(),
             "latency_p50_s": pa.float64(),
             "latency_p90_s": pa.float64(), "latency_p99_s": pa.float64(), "run_id": pa.string(), "fingerprint": pa.string(),
             "status": pa.string(), "models": pa.string()}
    arrays = {}
    for name, values in cols.items():
        t = types.get(name, pa.string() if name in NESTED else pa.int64())
        arr = pa.array(values, t)
        if name in ("started", "ended"):
            arr = pc.round(pc.multiply(arr, 1_000_000)).cast(pa.int64()).cast(pa.timestamp("us", tz="UTC"))
        arrays[name] = arr
    return from_arrow(pa.table(arrays))


def run_sample(run_id: str | None = None, *, directory: str | None = None):
    """The review sample of a run (default: the newest) as a DataFrame: its input and output columns, ``_run_id``.

    Example:
        >>> import tempfile
        >>> run_sample(directory=tempfile.mkdtemp()).count_rows()
        0
    """
    from inferframe.dataframe.constructors import from_arrow, from_pylist

    history = _history(directory)
    if run_id is None:
        newest = history.runs(limit=1)
        if not newest:
            return from_arrow(pa.table({"_run_id": pa.array([], pa.string())}))
        run_id = newest[0]["run_id"]
    rows = history.sample(run_id)
    if not rows:
        return from_arrow(pa.table({"_run_id": pa.array([], pa.string())}))
    return from_pylist(rows)
