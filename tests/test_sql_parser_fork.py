"""The SQL planner's one DuckDB connection (sql/tree.py ``_Parser``): kept between queries, closed before a fork.

A fork made after a query was planned (``os.fork``, multiprocessing's fork, a subprocess with a
``preexec_fn`` such as llama-server's launcher) must not inherit an open DuckDB connection: the
child plans its own queries and exits normally, and the parent goes on planning.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import subprocess
import sys
import threading
import time

import inferframe as ifr

tree = importlib.import_module("inferframe.sql.tree")  # (inferframe.sql is also the name of the function sql())


def _plan_and_run() -> list[int]:
    df = ifr.from_pydict({"a": [3, 1, 2]})
    return ifr.sql("WITH t AS (SELECT a + 1 AS b FROM df) SELECT b FROM t ORDER BY b", df=df).to_pydict()["b"]


def _wait(pid: int, timeout_s: float = 120.0) -> int:
    """The child's wait status; a child still running after ``timeout_s`` is killed and fails the test."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError(f"the forked child did not finish within {timeout_s} s")


def _fork_after_planning(said) -> None:
    """In a fresh process: plan, fork, the child plans its own and exits, the parent plans on; what it saw to ``said``."""
    seen = {"before": _plan_and_run(), "kept": tree._PARSER._con is not None}
    pid = os.fork()
    if pid == 0:  # the child: plans a query of its own, then leaves without running the parent's exit hooks
        try:
            os._exit(0 if _plan_and_run() == [2, 3, 4] else 3)
        except BaseException:
            os._exit(4)
    status = _wait(pid)
    seen["child"] = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    seen["closed"] = tree._PARSER._con is None
    seen["after"] = _plan_and_run()
    seen["reopened"] = tree._PARSER._con is not None
    said.put(seen)


def test_a_query_planned_before_a_fork_leaves_the_child_and_the_parent_planning():
    # The fork is made in a fresh process: this test process may hold an earlier test's threads (a Ray driver's),
    # and a child forked while one of them held a lock can hang for reasons of its own (tests/test_sqlite_wal.py).
    spawn = multiprocessing.get_context("spawn")
    said = spawn.Queue()
    parent = spawn.Process(target=_fork_after_planning, args=(said,))
    parent.start()
    seen = said.get(timeout=300)
    parent.join()
    assert seen["before"] == [2, 3, 4] and seen["kept"]  # kept between queries
    assert seen["child"] == 0  # the child planned and ran its own query
    assert seen["closed"]  # closed before the fork; opened again by the next query
    assert seen["after"] == [2, 3, 4] and seen["reopened"]


def test_a_subprocess_with_a_preexec_fn_closes_it_first_and_both_sides_go_on():
    assert _plan_and_run() == [2, 3, 4]
    ran = subprocess.run([sys.executable, "-c", "print('child')"], preexec_fn=lambda: None,
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout == "child\n"
    assert tree._PARSER._con is None
    assert _plan_and_run() == [2, 3, 4]


def test_queries_planned_on_several_threads_at_once_each_get_their_own_answer():
    found: dict[int, list] = {}

    def plan(i: int) -> None:
        df = ifr.from_pydict({"a": [i, i + 1]})
        found[i] = ifr.sql(f"SELECT a * {i} AS p FROM df WHERE a > {i - 1}", df=df).to_pydict()["p"]

    threads = [threading.Thread(target=plan, args=(i,)) for i in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert found == {i: [i * i, i * (i + 1)] for i in range(1, 9)}
