"""A Spark Python worker's spending reports (``spark_plan.WorkerServices``): the periodic one sends only what changed
since any report, so nothing reaches the driver after a batch's final report unless it spent more."""

import threading
import time

from inferframe.observe.stats import RunStats
from inferframe.runners.spark_plan import REPORT_SECONDS, WorkerServices


class _Link:
    """The driver's service, as a worker's link calls it: records the reports."""

    timeout_s = 5.0

    def __init__(self) -> None:
        self.reports: list[list[dict]] = []
        self.lock = threading.Lock()

    def unreachable(self, why: str) -> Exception:
        return RuntimeError(why)

    def call(self, method: str, *args):
        if method == "env":
            return {}
        if method == "report":
            with self.lock:
                self.reports.append(args[1])
        return None


def test_a_batchs_final_report_is_not_sent_again_by_the_periodic_one():
    link = _Link()
    worker = WorkerServices(link)
    try:
        stats = RunStats(label="prompt[m]")
        worker.services.counters.add(stats)
        for _ in range(3):  # spending while the batch runs: the periodic reports carry it
            stats.requests += 5
            time.sleep(REPORT_SECONDS * 1.5)
        stats.requests += 1
        worker.report()  # the batch's end (spark_columns: before its values go back to Spark)
        sent = len(link.reports)
        assert link.reports[-1][0]["requests"] == 16
        time.sleep(REPORT_SECONDS * 4)  # before, the loop sent the same 16 again after the batch's report
        assert len(link.reports) == sent, link.reports[sent:]
        stats.requests += 1  # spent more (a late retry's answer): that is sent
        time.sleep(REPORT_SECONDS * 3)
        assert [r[0]["requests"] for r in link.reports[sent:]] == [17]
    finally:
        worker.close()
