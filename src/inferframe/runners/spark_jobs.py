"""The driver's side of a Spark job: the service its tasks reach (keys, leases, counters) and the merge of their counters.

``Job`` is one job of the Spark runner; ``session_service`` / ``session_job`` the one service of a
SparkContext's lazy DataFrames, AI columns and Spark SQL functions.
"""

from __future__ import annotations

import functools
import itertools
import re
import threading
import uuid
import weakref
from typing import Any

from inferframe.observe.stats import RunCounters
from inferframe.providers import secrets
from inferframe.runners import spark_plan as sp
from inferframe.runners.spark_connect import ConnectActivity, connect_host, is_connect, stopped
from inferframe.runners.spark_python import ensure_executor_python
from inferframe.runners.spark_service import JobService


def _driver_host(spark) -> str:
    # Spark's local master runs every task on this machine: the loopback suffices; a cluster reaches the driver's host.
    on_this_machine = re.match(r"local(\[|$)", spark.sparkContext.master) is not None
    return "127.0.0.1" if on_this_machine else spark.conf.get("spark.driver.host")


def _running(context_ref: weakref.ref) -> bool:
    """Whether the SparkContext is still there and not stopped (``stop()`` drops its Java context)."""
    context = context_ref()
    return context is not None and getattr(context, "_jsc", None) is not None


# SparkContext -> the service of the lazy Spark DataFrames made on it (one per session, not one per DataFrame).
_SESSION_SERVICES: "weakref.WeakKeyDictionary[Any, JobService]" = weakref.WeakKeyDictionary()
_SESSION_LOCK = threading.Lock()


def session_service(spark) -> JobService:
    """The one service of ``spark``'s lazy DataFrames (``to_spark``, ``inferframe.spark.with_columns``).

    Such a DataFrame may run any time later, and again: its service cannot end with a job. One per
    SparkContext (per session over Spark Connect, which has no SparkContext: ``spark_connect``) serves
    them all (one budget per endpoint and model for all of them), hands workers the keys registered at
    the time they ask, and ends by itself once the SparkContext (the Connect session) is stopped.
    """
    connect = is_connect(spark)
    owner = spark if connect else spark.sparkContext
    with _SESSION_LOCK:
        found = _SESSION_SERVICES.get(owner)
        if found is None or not found.open:
            host = connect_host(spark) if connect else _driver_host(spark)
            ended = functools.partial(stopped, weakref.ref(owner)) if connect else None
            alive = (lambda: not ended()) if connect else functools.partial(_running, weakref.ref(owner))
            found = _SESSION_SERVICES[owner] = JobService(secrets.worker_env, host=host, alive=alive,
                                                          name="inferframe-spark-session")
        return found


def session_job(spark) -> tuple[str, Any]:
    """The session's one job id and its service's link, for AI columns inside Spark's plans (``spark_columns``).

    Every AI column and Spark SQL function of a SparkContext (a Connect session) shares them: a Python
    worker keeps one set of services (clients, the leased budget) for all of them. The service publishes
    each Spark SQL execution's totals as ``last_run()`` while its tasks report, and stores it in the run
    history once Spark runs no job (a classic session's status tracker; a Connect client's progress handler).
    """
    from inferframe.observe.progress import publish_last
    from inferframe.runners.spark_columns import SessionRuns, record_run

    ensure_executor_python(spark)  # before the UDFs are made: each takes the executors' Python then
    service = session_service(spark)
    with _SESSION_LOCK:
        if service.on_change is None:
            if is_connect(spark):
                activity = ConnectActivity(spark)
                spark.registerProgressHandler(activity)
                service.on_change = activity.watching(SessionRuns(publish_last, busy=activity.busy, record=record_run))
            else:
                tracker = spark.sparkContext.statusTracker()
                service.on_change = SessionRuns(publish_last, busy=lambda: bool(tracker.getActiveJobsIds()),
                                                record=record_run)
            service.job_id = uuid.uuid4().hex[:12]
    return service.job_id, service.link()


class Job:
    """One job's state on the driver: the service for its tasks, and the merge of their counters into ``counters``."""

    def __init__(self, spark, counters: RunCounters) -> None:
        self.spark, self.counters = spark, counters
        self.id = uuid.uuid4().hex[:12]
        self.stage_ids = (f"{self.id}-s{i}" for i in itertools.count())

    @classmethod
    def lazy(cls, spark) -> "Job":
        """A job for a lazy Spark DataFrame: its tasks reach the session's service; no counters are merged."""
        job = cls(spark, RunCounters())
        job.service = session_service(spark)
        job.link = job.service.link()
        return job

    def __enter__(self) -> "Job":
        self.service = JobService(secrets.worker_env(), host=_driver_host(self.spark))
        self.link = self.service.link()
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="inferframe-spark-counters", daemon=True)
        self._poller.start()
        return self

    def _merge(self) -> None:
        for source, snaps in self.service.counter_reports().items():
            self.counters.merge(source, snaps)  # spending, per Python worker
        rows = self.service.row_counts()
        if rows:
            self.counters.merge("spark:rows", [{**dict.fromkeys(sp.ROW_FIELDS, 0), **r} for r in rows])

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            self._merge()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._poller.join(timeout=5)
        self._merge()
        self.service.close()
