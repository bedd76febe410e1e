"""The response cache's stores: one SQLite file on one machine, PostgreSQL shared by a cluster.

A job's config names its store without a secret: a directory, and for PostgreSQL a handle
(``RuntimeConfig.cache_store``) whose URL lives in ``inferframe.providers.secrets`` like an API key
and reaches worker processes through their environment; the layer that builds the runtime turns
the handle into the URL (``inferframe.session.cache_url_of``). ``open_store`` gives the process's
one handle on each store.

Example:
    >>> import tempfile
    >>> store = open_store(tempfile.mkdtemp())
    >>> store.kind, open_store(store.directory) is store
    ('sqlite', True)
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from inferframe.runtime.store.base import CacheStore, default_cache_dir
from inferframe.runtime.store.url import is_store_url, safe_name

__all__ = ["CacheStore", "default_cache_dir", "flush_open_stores", "is_store_url", "open_store", "safe_name"]

_open: dict[str, CacheStore] = {}
_open_lock = threading.Lock()


def open_store(directory: str | os.PathLike | None = None, url: str | None = None) -> CacheStore:
    """The process's shared handle on a store: the PostgreSQL one at ``url``, else the SQLite file in
    ``directory`` (default: default_cache_dir()).

    The PostgreSQL store keeps answers it could not write yet beside ``directory`` if it stays down
    (see ``PostgresStore``).
    """
    path = str(Path(directory).expanduser() if directory is not None else default_cache_dir())
    if url:
        with _open_lock:
            found = _open.get(url)
            if found is None:
                from inferframe.runtime.store.postgres import PostgresStore

                found = _open[url] = PostgresStore(url, spill_dir=path)
            return found
    with _open_lock:
        found = _open.get(path)
        if found is None:
            from inferframe.runtime.store.sqlite import ResponseCache

            found = _open[path] = ResponseCache(path)
        return found


def flush_open_stores(timeout: float | None = 30.0) -> int:
    """Wait until every answer this process put into its open stores is stored; how many are still not.

    A cluster task calls it before it reports success: an answer it paid for must not live only in
    the memory of a worker that may be gone the next moment (PostgreSQL commits a round trip later).

    Example:
        >>> flush_open_stores(timeout=1)
        0
    """
    with _open_lock:
        stores = list(_open.values())
    return sum(store.flush(timeout=timeout) for store in stores)
