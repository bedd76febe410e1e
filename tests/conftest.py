"""Every test gets its own response cache, so cached answers never leak between tests.

(A simulator's port can be reused by a later test in the same session, and the cache key
includes the server's URL: one cache per session let a later test find an earlier test's answers.)
"""

import os
import tempfile

import pytest

os.environ["INFERFRAME_CACHE_DIR"] = tempfile.mkdtemp(prefix="inferframe-test-cache-")
os.environ.setdefault("INFERFRAME_PROGRESS", "0")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("INFERFRAME_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
