"""One trace across a cluster: a Ray worker's or Spark Python worker's spans join the driver's job trace (issue 47).

The driver's job span travels to the workers as W3C trace context (``traceparent``, ``tracestate``: the
standard ``propagate.inject``/``extract``, so ``OTEL_PROPAGATORS`` decides the format), in the picklable
``WorkerTracing`` a runner ships with the job's tasks, next to the request spans' ratio and
``set_tracing(worker_setup=...)``. A worker records into its own tracer provider: the one its process
already has (started under ``opentelemetry-instrument``, or configured by the user's code), else the
one ``worker_setup`` configures there, once per process. A worker without either records nothing.

In the worker, each task (a Ray batch, a Spark partition) gets one ``inferframe.stage {label}`` span per AI
stage it ran, a child of the driver's job span, with the task's share of the stage's totals and the
worker's name (``inferframe.worker``); its request spans are its children. The spans are flushed at the end
of each task: Ray ends an actor without running its exit handlers, so a batching processor's last spans
would be lost otherwise.

Example:
    >>> shipped = WorkerTracing({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, 1.0)
    >>> import pickle; pickle.loads(pickle.dumps(shipped)) == shipped
    True
"""

from __future__ import annotations

import threading
import types
import warnings
from typing import Any, Callable

from inferframe.observe.otel import StageTrace, WorkerTracing, providers
from inferframe.observe.otel_genai import GenAIMeters, capture_content

# A stage's counters that are summed per task (a snapshot's fields, ``observe.stats.RunStats``).
TASK_FIELDS = ("rows_done", "cache_hits", "requests", "retries", "rate_limited", "errors", "input_tokens",
               "output_tokens", "cost")
_setup_lock = threading.Lock()
_setup_ran = [False]  # this process ran a worker_setup already (a list: set once, read by every job)


def worker_providers(setup: Callable[[], Any] | None) -> tuple[Any, Any] | None:
    """This worker process's (tracer provider, meter provider); ``setup`` runs first when it has none."""
    chosen = providers(None)
    if chosen is None and setup is not None:
        with _setup_lock:
            if not _setup_ran[0]:
                _setup_ran[0] = True  # once per process, whether or not it configured anything
                try:
                    setup()
                except Exception as e:  # tracing never stops a job that pays per row: this worker records nothing
                    # The class only: a set-up's message may quote an exporter's headers (a token).
                    warnings.warn(f"set_tracing(worker_setup=...) raised {type(e).__name__}: this worker records "
                                  f"no spans", RuntimeWarning, stacklevel=2)
        chosen = providers(None)
    return chosen


def worker_trace(shipped: WorkerTracing | None, counters: Any, source: str) -> "TaskTrace | None":
    """The worker's recorder for one job (None: the job is not traced, or this worker has no provider).

    ``counters``: the worker's ``RunCounters`` (each task's share of a stage is their difference);
    ``source``: the worker's name, on its spans.
    """
    if shipped is None:
        return None
    chosen = worker_providers(shipped.setup)
    if chosen is None or chosen[0] is None and chosen[1] is None:
        return None
    return TaskTrace(shipped, chosen, counters, source)


class TaskTrace:
    """A worker's side of a job's trace: a ``JobTrace`` for its AI operators, with no job span of its own.

    The runner calls ``task_started`` and ``task_done`` around each task; the stages' spans open at their
    first answer in a task and end, with the task's totals, in ``task_done``.
    """

    def __init__(self, shipped: WorkerTracing, chosen: tuple[Any, Any], counters: Any, source: str) -> None:
        from opentelemetry import propagate

        tp, mp = chosen
        self.provider = tp
        self.tracer = tp.get_tracer("inferframe") if tp is not None else None
        self.meters = GenAIMeters(mp.get_meter("inferframe")) if mp is not None else None
        self.capture = capture_content()
        self.context = propagate.extract(shipped.carrier)  # the driver's job span, the parent of every stage here
        self.ratio = shipped.ratio if self.tracer is not None else 0.0
        self.counters, self.source = counters, source
        self._stages: dict[str, TaskStage] = {}
        self._before: dict[str, dict] = {}
        self._lock = threading.Lock()

    def stage(self, label: str, endpoint: str, provider: Any, model: str | None) -> "TaskStage":
        """The stage of AI call ``label`` in this worker (its operator's, built once per worker and job)."""
        with self._lock:
            stage = self._stages.get(label)
            if stage is None:
                stage = self._stages[label] = TaskStage(self, label, endpoint, provider, model)
            return stage

    def task_started(self) -> None:
        """A task begins: its stages' totals count from here."""
        self._before = {s["label"]: s for s in self.counters.snapshot()}

    def task_done(self) -> None:
        """A task ended: each stage's span ends with the task's share, and the spans leave this process now."""
        after = {s["label"]: s for s in self.counters.snapshot()}
        with self._lock:
            stages = list(self._stages.items())
        for label, stage in stages:
            now, before = after.get(label, {}), self._before.get(label, {})
            stage.task_done({k: now.get(k, 0) - before.get(k, 0) for k in TASK_FIELDS})
        self._before = after
        flush = getattr(self.provider, "force_flush", None)  # the SDK's; an API-only provider has none
        if flush is not None:
            flush()


class TaskStage(StageTrace):
    """One AI stage in a worker: a span per task, opened by its first answer, ended by ``task_done``."""

    def __init__(self, job: TaskTrace, label: str, endpoint: str, provider: Any, model: str | None) -> None:
        super().__init__(job, label, endpoint, provider, model, lazy=True)
        self._open_lock = threading.Lock()
        self._waits_before = (0, 0.0)

    def open(self) -> None:
        super().open()
        self.span.set_attribute("inferframe.worker", self.job.source)

    def answered(self, request: Any, outcome: Any, attempt: int, seconds: float) -> None:
        if self.span is None and self.job.tracer is not None:
            with self._open_lock:  # answers arrive on the runtime's loop; a batch span may open on another thread
                if self.span is None:
                    self.open()
        super().answered(request, outcome, attempt, seconds)

    def task_done(self, delta: dict) -> None:
        """End this task's span with its share of the stage's totals (``delta``: ``TASK_FIELDS``)."""
        waits, wait_s = self.waits()
        share = (waits - self._waits_before[0], wait_s - self._waits_before[1])
        self._waits_before = (waits, wait_s)
        with self._open_lock:
            if self.span is None and self.job.tracer is not None and delta["rows_done"] > 0:
                self.open()  # a task of cache hits only: its rows, on a span of its own
            stats = types.SimpleNamespace(**delta, answers=None, answers_raw=None)
            self.finish(stats, share)
            self.span, self.context = None, self.job.context
