"""Every test gets its own response cache, so cached answers never leak between tests.

(A simulator's port can be reused by a later test in the same session, and the cache key
includes the server's URL: one cache per session let a later test find an earlier test's answers.)
"""

import ast
import os
import tempfile

import pytest

os.environ["INFERFRAME_CACHE_DIR"] = tempfile.mkdtemp(prefix="inferframe-test-cache-")

# CPython 3.11 keeps one AST-constructor recursion counter per interpreter: a parse that overlaps AST work on
# another thread (Ray's background threads, left by tests/ray) fails with "SystemError: AST constructor
# recursion depth mismatch (before=126, after=71)" (cpython gh-106905; seen once in a full run). The tests
# that read the package's source with ast.parse parse again: the source did not change, the race passed.
_ast_parse = ast.parse


def _parse_past_the_race(*args, **kwargs):
    for attempt in range(5):
        try:
            return _ast_parse(*args, **kwargs)
        except SystemError as e:
            if "recursion depth mismatch" not in str(e) or attempt == 4:
                raise


ast.parse = _parse_past_the_race
os.environ.setdefault("INFERFRAME_PROGRESS", "0")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("INFERFRAME_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    """Each test starts as a new process would: no rate limits learned by an earlier test's jobs
    (a shared simulator reconfigured between tests would otherwise hand on its old limits)."""
    from inferframe.runtime import coordinator

    coordinator._EARLIER.clear()
    yield


@pytest.fixture(autouse=True)
def _sigint_stays_pythons():
    """A test that leaves SIGINT to another handler would keep Ctrl-C tests after it from seeing it:
    the handler is put back, and a warning names the test that changed it."""
    import signal
    import warnings

    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before:
        signal.signal(signal.SIGINT, before)
        warnings.warn(f"SIGINT's handler was changed to {after!r} during this test; put back", stacklevel=1)
