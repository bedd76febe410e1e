"""A job raises the collector's youngest threshold while it runs and puts back what it found."""

import gc
import threading

import inferframe as ifr
from inferframe.execution.gc_scope import YOUNG_THRESHOLD, job_gc


def test_a_job_runs_with_the_raised_threshold_and_restores_the_old_one():
    before = gc.get_threshold()
    seen = []

    @ifr.func(return_dtype=ifr.DataType.int64())
    def probe(x):
        seen.append(gc.get_threshold()[0])
        return x

    ifr.from_pydict({"a": [1, 2, 3]}).with_column("b", probe(ifr.col("a"))).collect()
    assert seen and all(t == YOUNG_THRESHOLD for t in seen)
    assert gc.get_threshold() == before


def test_overlapping_jobs_restore_only_when_the_last_one_ends():
    before = gc.get_threshold()
    first_in, release = threading.Event(), threading.Event()
    during_second = []

    def long_job():
        with job_gc():
            first_in.set()
            release.wait(10)

    t = threading.Thread(target=long_job)
    t.start()
    first_in.wait(10)
    with job_gc():
        during_second.append(gc.get_threshold()[0])
    after_second = gc.get_threshold()[0]  # the first job still runs
    release.set()
    t.join(10)
    assert during_second == [YOUNG_THRESHOLD] and after_second == YOUNG_THRESHOLD
    assert gc.get_threshold() == before


def test_a_threshold_the_user_set_is_respected():
    before = gc.get_threshold()
    try:
        gc.set_threshold(0)  # collection off: a job must not turn it back on
        with job_gc():
            assert gc.get_threshold()[0] == 0
        assert gc.get_threshold()[0] == 0
        gc.set_threshold(100)
        with job_gc():
            gc.set_threshold(123)  # changed during the job: the job's end leaves it
        assert gc.get_threshold()[0] == 123
    finally:
        gc.set_threshold(*before)
