"""Every test gets its own response cache, so cached answers never leak between tests.

(A simulator's port can be reused by a later test in the same session, and the cache key
includes the server's URL: one cache per session let a later test find an earlier test's answers.)
"""

import ast
import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from group_scope import close_group  # tests/group_scope.py: what a group started stops when it ends
from suite_order import DURATIONS, group_of, longest_first  # tests/suite_order.py: what the scheduler orders by

os.environ["INFERFRAME_CACHE_DIR"] = tempfile.mkdtemp(prefix="inferframe-test-cache-")
# Gone when the process ends: every pytest process made one and left it, and a machine's /tmp filled up.
atexit.register(shutil.rmtree, os.environ["INFERFRAME_CACHE_DIR"], ignore_errors=True)

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


# Files whose tests run the real model, a cluster or fresh interpreters (20 s or more each, measured with
# --durations=0): marked ``slow``, so `pytest -m "not slow"` is the inner loop of a few minutes. CI runs all.
SLOW_FILES = (
    "tests/test_local_prompt.py", "tests/test_local_structured.py", "tests/test_readme.py",
    "tests/test_embed_local_server.py", "tests/test_embed_inprocess.py", "tests/test_doctor.py",
    "tests/providers/test_http_transport.py", "tests/providers/test_http_soak.py", "tests/test_calibration.py",
    "tests/providers/test_local_server.py", "tests/test_classify_scoring.py", "tests/test_seed002.py",
    "tests/test_quiet_output.py", "tests/test_first_hour.py", "tests/ai/test_plan_state.py",
    "tests/test_prefix_order.py", "tests/test_examples_seed002.py", "tests/test_structured_budget.py",
    "tests/test_promise_readme_examples.py", "tests/test_classify_cascade.py", "tests/test_local_server_restart.py",
    "tests/test_otel_backend.py", "tests/test_promise_structured_quality.py", "tests/test_semantic_search_example.py",
    "tests/test_classify_embedding.py", "tests/test_llama_variants.py", "tests/test_suite_groups.py",
    "tests/test_openmp_wait.py",
)


def pytest_collection_modifyitems(config, items):
    """Each group's tests together, longest group first (``DURATIONS``): with ``--dist loadgroup`` the
    scheduler hands out groups in this order, so the long ones (tests/ray, tests/spark, the README) start first."""
    import json

    durations = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    for item in items:
        item.group = group_of(_where(item))
    items[:] = longest_first(items, durations)


def _where(item) -> str:
    path = Path(str(item.fspath))
    root = Path(str(item.config.rootpath))
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_posix()


def pytest_itemcollected(item):
    """``slow`` on the tests of SLOW_FILES, tests/ray and tests/spark: `pytest -m "not slow"` leaves them out.

    Each test also gets its ``xdist_group`` (``group_of``), which the scheduler below uses.
    """
    where = _where(item)
    if where in SLOW_FILES or where.startswith(("tests/ray/", "tests/spark/")):
        item.add_marker(pytest.mark.slow)
    item.add_marker(pytest.mark.xdist_group(group_of(where)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last test of a group (its module fixtures torn down first), the clusters it started stop
    (``group_scope``): the next test belongs to another group, or none is left."""
    try:
        return (yield)
    finally:
        if nextitem is None or getattr(nextitem, "group", None) != getattr(item, "group", None):
            close_group()


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: `pytest -p no:xdist` has no such hook
def pytest_xdist_make_scheduler(config, log):
    """`pytest -n 2 --dist loadgroup` (the README's command): a file's tests run in one process (its module
    fixtures are made once), and all of tests/ray, all of tests/spark (but the files that start JVMs of their
    own, ``suite_order.OWN_JVMS``), in one process each, so a run starts one Ray cluster and one Spark session
    (two clusters on two cores starved each other).

    Why our own scheduler: xdist 3.8 marks a group by appending "@group" to ``item._nodeid``, which pytest 9.2
    no longer reads (``nodeid`` comes from ``_id``), so ``--dist loadgroup`` silently became ``--dist load``:
    one file's tests in both processes, two Ray clusters (CI: 51 minutes, three Ray tests timed out).
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    config.option.loadscopereorder = False  # the groups come in pytest_collection_modifyitems' order, longest first
    from xdist.scheduler import LoadScopeScheduling

    class FileGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid.split("::", 1)[0])

    return FileGroups(config, log)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("INFERFRAME_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    """Each test starts as a new process would: no rate limits learned by an earlier test's jobs
    (a shared simulator reconfigured between tests would otherwise hand on its old limits)."""
    from inferframe.runtime import coordinator

    coordinator._EARLIER.clear()
    coordinator._EARLIER_CAPACITY.clear()
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
