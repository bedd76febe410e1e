"""The response cache and the run history are opened by several processes at once (Ray workers on a fresh cache)."""

import multiprocessing
import pathlib

import pytest

from inferframe.observe.history import RunHistory
from inferframe.runtime.cache import ResponseCache

OPENERS = {"cache": ResponseCache, "history": RunHistory}


def _open(kind, directory, barrier, results):
    barrier.wait()
    try:
        OPENERS[kind](directory)
        results.put("ok")
    except Exception as e:  # the test reports what went wrong in the child
        results.put(f"{type(e).__name__}: {e}")


@pytest.mark.parametrize("kind", sorted(OPENERS))
def test_processes_opening_a_fresh_file_together_all_succeed(kind, tmp_path):
    """A journal-mode change is refused at once ("database is locked") while another opener holds a lock:
    each opener waits its turn instead of failing its job. 20 rounds of 6 processes; before the fix about one
    round in eight had a failure."""
    ctx = multiprocessing.get_context("fork")
    failures = []
    for round_ in range(20):
        directory = str(tmp_path / str(round_))
        pathlib.Path(directory).mkdir()
        barrier, results = ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=_open, args=(kind, directory, barrier, results)) for _ in range(6)]
        for p in procs:
            p.start()
        outcomes = [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join()
        failures += [o for o in outcomes if o != "ok"]
    assert failures == []
