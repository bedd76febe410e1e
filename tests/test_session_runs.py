"""Spark SQL functions' runs (``runners.spark_columns.SessionRuns``): a task's report that comes after its run was
stored still counts in ``last_run()``.

Found in a full run over Spark Connect: a Connect client's progress events name no action, so an action's end
could be seen between the two tasks' reports of the next one; the second report was dropped as late and
``last_run()`` said 11 requests for 20 sent. A real JobService holds the reports; no Spark is needed here.
"""

from __future__ import annotations

from inferframe.observe.stats import RunCounters, RunStats
from inferframe.runners.spark_columns import SessionRuns
from inferframe.runners.spark_service import JobService


def _snapshot(requests: int) -> list[dict]:
    stats = RunStats(label="classify_text[gpt-5-mini]")
    stats.requests = requests
    counters = RunCounters()
    counters.add(stats)
    return counters.snapshot()


def test_a_report_after_the_run_was_stored_still_counts_in_last_run():
    published, stored = [], []
    with JobService() as service:
        runs = SessionRuns(published.append, record=lambda counters, started: stored.append(counters))
        service.on_change = runs
        service.report("x7|worker-a", _snapshot(11))
        runs._store_all()  # an action's end seen before the other task reported (what the watch thread does)
        service.report("x7|worker-b", _snapshot(9))
    assert sum(t["requests"] for t in published[-1]) == 20, published[-1]
    assert len(stored) == 1  # stored once; the late report updates what last_run() says
