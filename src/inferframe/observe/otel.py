"""OpenTelemetry traces and metrics of a job, through the standard API only (issue 47).

Nothing here runs, and nothing OpenTelemetry is imported, unless a tracer or meter provider is configured:
``providers()`` is asked once per job and answers None at the cost of a ``sys.modules`` lookup when the
process never imported ``opentelemetry`` (a user who configured the SDK in code, or ran under
``opentelemetry-instrument``, has). ``ifr.set_tracing`` can turn it off, or hand providers in explicitly.

The span tree:

* ``inferframe.job``: the plan's fingerprint, run id, runner, rows, cost and outcome. Always recorded,
  whatever the sampler's ratio: see ``start_job_span``.
* ``inferframe.stage {label}``, a child of the job, one per AI stage (operator, model, provider): its rows,
  cache hits, requests, retries, 429s, waits on the limits and their seconds, tokens and cost; a
  low-information verdict is a span event.
* ``inferframe.batch {model}``, a child of its stage: one Batch API run (its requests).
* ``"{gen_ai.operation.name} {gen_ai.request.model}"``, a child of its stage: one per attempt sent (a retry is
  one more span, ``inferframe.attempt`` counts), each kept alone at the configured sampler's ratio
  (``request_ratio``): ``OTEL_TRACES_SAMPLER=parentbased_traceidratio`` with ``OTEL_TRACES_SAMPLER_ARG=0.01``
  keeps 1% of the requests and every job and stage span.

Example:
    >>> providers(False) is None
    True
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import sys
import threading
import time
from typing import Any, Callable

from inferframe.observe.otel_genai import (GenAIMeters, RequestMetricAttrs, base_attributes, capture_content,
                                           request_attributes)
from inferframe.observe.quality import same_answer

# The job span is started again (a new trace id each time) until the sampler keeps it, at most this many times:
# a ratio sampler keeps a root at its ratio, so 1% needs 100 tries on average and this many fail once in e^20.
JOB_TRIES = 2000
# Samplers that keep nothing: no job span is tried again under them.
_OFF = ("always_off", "parentbased_always_off")
_NOOP_PROVIDERS = ("ProxyTracerProvider", "NoOpTracerProvider", "_ProxyMeterProvider", "NoOpMeterProvider")


def providers(setting: Any = None) -> tuple[Any, Any] | None:
    """(tracer provider, meter provider) a job records into; None: nothing is recorded (asked once per job).

    Parameters:
        setting: the session's ``tracing`` (``ifr.set_tracing``): None automatic (the global providers, when
            set), False off, or a ``TracingSetting`` with providers of its own.
    """
    if setting is False or getattr(setting, "enabled", True) is False:
        return None
    chosen = getattr(setting, "providers", None)
    if chosen is not None and any(chosen):
        return chosen
    if "opentelemetry" not in sys.modules:  # never imported: nobody configured a provider, and nothing is imported
        return None
    from opentelemetry import metrics, trace

    tp, mp = trace.get_tracer_provider(), metrics.get_meter_provider()
    tp = None if type(tp).__name__ in _NOOP_PROVIDERS else tp
    mp = None if type(mp).__name__ in _NOOP_PROVIDERS else mp
    return (tp, mp) if tp is not None or mp is not None else None


def start_job_span(tracer: Any, attributes: dict) -> Any:
    """The job's span, kept by the configured sampler; a child of the caller's current span when there is one.

    A ratio sampler (``traceidratio``, ``parentbased_traceidratio``) keeps a root span when its random trace
    id falls under the ratio. The job span is started again, each time with a new trace id, until the
    sampler keeps one (``JOB_TRIES`` at most): every job, and every stage under it, is recorded at any
    ratio, while each request span is kept at the ratio (``request_ratio``). A span the sampler drops is
    never exported. Under a parent span of the user's, or a sampler that keeps nothing, the first decision stands.
    """
    from opentelemetry import context, trace

    parent = context.get_current()
    decided = trace.get_current_span(parent).get_span_context().is_valid
    tries = 1 if decided or os.environ.get("OTEL_TRACES_SAMPLER", "").strip().lower() in _OFF else JOB_TRIES
    for _ in range(tries):
        span = tracer.start_span("inferframe.job", context=parent, attributes=attributes)
        if span.get_span_context().trace_flags.sampled:
            return span
        span.end()
    return span


def request_ratio(tracer_provider: Any) -> float:
    """The share of request spans to keep: the configured sampler's ratio, 1.0 when it has none.

    A request span is a child of its stage span, which a parent-based sampler always keeps (and a plain
    ``traceidratio`` one too: it shares the job's trace id), so the ratio is applied here, one draw per request,
    and a request not drawn costs no span at all. The ratio is the SDK sampler's own (its ``get_description()``,
    ``TraceIdRatioBased{0.01}`` whether set in code or by ``OTEL_TRACES_SAMPLER``), else the standard variables.

    Example:
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        >>> request_ratio(TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.01)))), request_ratio(TracerProvider())
        (0.01, 1.0)
    """
    sampler = getattr(tracer_provider, "sampler", None)
    describe = getattr(sampler, "get_description", None)
    if describe is not None:
        found = re.search(r"TraceIdRatioBased\{([^}]*)\}", describe())
        return min(1.0, max(0.0, float(found.group(1)))) if found else 1.0
    name = os.environ.get("OTEL_TRACES_SAMPLER", "").strip().lower()
    if name in ("traceidratio", "parentbased_traceidratio"):
        try:
            return min(1.0, max(0.0, float(os.environ.get("OTEL_TRACES_SAMPLER_ARG", "1"))))
        except ValueError:
            return 1.0  # the SDK's own fallback for an unreadable ratio
    return 1.0


@dataclasses.dataclass(frozen=True)
class WorkerTracing:
    """What the driver ships to the workers of a traced job (``JobTrace.for_workers``), read by ``observe.otel_workers``.

    No secret in it: a trace context, a ratio and the user's set-up function.

    Parameters:
        carrier: the job span's W3C trace context, as ``propagate.inject`` wrote it.
        ratio: the share of request spans to keep (the driver's sampler decides for the whole job).
        setup: ``set_tracing(worker_setup=...)``: run once in a worker process that has no provider.
    """

    carrier: dict
    ratio: float
    setup: Callable[[], Any] | None = None


class JobTrace:
    """One job's spans and metrics: the job span, a stage span per AI call, the request spans under them.

    Parameters:
        chosen: (tracer provider, meter provider) from ``providers()``; either may be None.
        attributes: the job span's attributes known at its start (fingerprint, runner).

    Example:
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        >>> exporter = InMemorySpanExporter(); tp = TracerProvider(); tp.add_span_processor(SimpleSpanProcessor(exporter))
        >>> job = JobTrace((tp, None), {"inferframe.plan.fingerprint": "f"})
        >>> job.finish([], None)
        >>> [(s.name, s.attributes["inferframe.outcome"]) for s in exporter.get_finished_spans()]
        [('inferframe.job', 'ok')]
    """

    def __init__(self, chosen: tuple[Any, Any], attributes: dict, worker_setup: Any = None) -> None:
        from opentelemetry import trace

        tp, mp = chosen
        # The instrumentation scope: inferframe (its version is not read here, below the package's top).
        self.tracer = tp.get_tracer("inferframe") if tp is not None else None
        self.meters = GenAIMeters(mp.get_meter("inferframe")) if mp is not None else None
        self.capture = capture_content()
        self.span = start_job_span(self.tracer, attributes) if self.tracer is not None else None
        self.context = trace.set_span_in_context(self.span) if self.span is not None else None
        # Request spans kept per request: none when the job span was dropped (a sampler that keeps nothing).
        self.ratio = request_ratio(tp) if self.span is not None and self.span.is_recording() else 0.0
        self.rows = 0
        self.worker_setup = worker_setup  # ``set_tracing(worker_setup=...)``: shipped to the workers (``for_workers``)
        self._stages: dict[str, StageTrace] = {}
        self._lock = threading.Lock()  # operators of one job start on the runner's threads

    def stage(self, label: str, endpoint: str, provider: Any, model: str | None) -> "StageTrace":
        """The stage of AI call ``label`` (made by its first operator; later instances share it)."""
        with self._lock:
            stage = self._stages.get(label)
            if stage is None:
                stage = self._stages[label] = StageTrace(self, label, endpoint, provider, model)
            return stage

    def for_workers(self) -> Any:
        """What a runner ships to its workers so that their spans join this job's trace (None: nothing to join).

        The job span's W3C trace context (``propagate.inject``: ``traceparent``, ``tracestate``), the
        request spans' ratio and ``worker_setup`` (``WorkerTracing``).
        """
        if self.span is None or not self.span.is_recording():
            return None
        from opentelemetry import propagate

        carrier: dict = {}
        propagate.inject(carrier, context=self.context)
        return WorkerTracing(carrier, self.ratio, self.worker_setup)

    def set_run_id(self, run_id: str | None) -> None:
        """The run history's id of this job (None: history is off)."""
        if self.span is not None and run_id:
            self.span.set_attribute("inferframe.run_id", run_id)

    def finish(self, runs: list, error: BaseException | None, status: str | None = None) -> None:
        """End every stage span with its totals (``runs``: the job's ``RunStats``), then the job span.

        ``status``: ``ok``, ``failed`` or ``interrupted`` (None: from ``error``). Only the error's class is
        recorded: its message may quote a row.
        """
        by_label = {r.label: r for r in runs}
        rows = cost = 0
        for label, stage in self._stages.items():
            stats = by_label.get(label)
            if stats is not None:
                rows = max(rows, stats.rows_done)
                cost += stats.cost
            stage.finish(stats)
        for label, stats in by_label.items():
            if label not in self._stages:  # counted by a worker process: its stage had no span here
                cost += stats.cost
                rows = max(rows, stats.rows_done)
        status = status or ("ok" if error is None else "failed")
        if self.span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        span = self.span
        span.set_attributes({"inferframe.rows": self.rows or rows, "inferframe.cost": float(cost),
                             "inferframe.outcome": status})
        if error is not None:
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, type(error).__qualname__))
        span.end()


class StageTrace:
    """One AI stage's span, its requests' spans (its children, kept at the sampler's ratio) and its metrics."""

    def __init__(self, job: Any, label: str, endpoint: str, provider: Any, model: str | None,
                 lazy: bool = False) -> None:
        self.job, self.label = job, label
        self.base = base_attributes(endpoint, getattr(provider, "name", None) or "unknown", model,
                                    getattr(provider, "base_url", None))
        self.name = f"{self.base['gen_ai.operation.name']} {model or ''}".rstrip()
        self.metric_attrs = RequestMetricAttrs({**self.base, "inferframe.stage": label})
        self.runtimes: list = []
        self.span, self.context = None, job.context
        self.tracer, self.meters, self.capture, self.ratio = job.tracer, job.meters, job.capture, job.ratio
        if self.tracer is not None:
            from opentelemetry import trace

            self.kind = trace.SpanKind.CLIENT  # read once: answered() runs per request
            if not lazy:  # a worker's stage opens its span per task, at its first answer (otel_workers)
                self.open()
        if self.ratio <= 0.0:
            self.tracer = None  # no request span: only the stage's totals and the metrics

    def open(self) -> None:
        """Start this stage's span, a child of the job's, and the parent of its request spans."""
        from opentelemetry import trace

        self.span = self.job.tracer.start_span(f"inferframe.stage {self.label}", context=self.job.context,
                                               attributes={**self.base, "inferframe.stage": self.label})
        self.context = trace.set_span_in_context(self.span)

    def watch(self, runtime: Any) -> None:
        """Count ``runtime``'s waits on the limits into this stage, and hand it every answered attempt."""
        self.runtimes.append(runtime)
        runtime.tracing = self

    def answered(self, request: Any, outcome: Any, attempt: int, seconds: float) -> None:
        """One answered attempt: its metrics, and its span (recorded when the sampler keeps it)."""
        if self.meters is not None:
            self.meters.request(self.metric_attrs, outcome, seconds)
        tracer = self.tracer
        if tracer is None or (self.ratio < 1.0 and random.random() >= self.ratio):
            return  # a request not drawn costs one random number: no span is made
        end = time.time_ns()
        span = tracer.start_span(self.name, context=self.context, kind=self.kind, attributes=self.base,
                                 start_time=end - int(seconds * 1e9))
        if span.is_recording():  # the attributes are built only for a span the sampler kept
            span.set_attributes(request_attributes(request.body, outcome, attempt, self.capture,
                                                   request.max_output_tokens))
            if outcome.error_kind is not None:
                from opentelemetry.trace import Status, StatusCode

                span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end)

    def batch(self, endpoint: str, requests: int) -> Any:
        """A span for one Batch API run of ``requests`` lines (the caller ends it); None without a tracer."""
        if self.span is None:
            return None
        return self.job.tracer.start_span(f"inferframe.batch {self.base.get('gen_ai.request.model', '')}".rstrip(),
                                          context=self.context,
                                          attributes={**self.base, "inferframe.batch.requests": requests})

    def batch_ended(self, span: Any, outcomes: dict | None) -> None:
        """End a Batch API run's span with its lines' tokens and failures (``outcomes`` None: it raised)."""
        if outcomes is None:
            from opentelemetry.trace import Status, StatusCode

            span.set_status(Status(StatusCode.ERROR))
        else:
            done = list(outcomes.values())
            span.set_attributes({
                "inferframe.errors": sum(not o.ok for o in done),
                "gen_ai.usage.input_tokens": sum(o.usage.input_tokens for o in done if o.usage is not None),
                "gen_ai.usage.output_tokens": sum(o.usage.output_tokens for o in done if o.usage is not None)})
        span.end()

    def waits(self) -> tuple[int, float]:
        """(waits on the limits, their seconds) of this stage's runtimes so far."""
        return sum(r.limit_waits for r in self.runtimes), sum(r.limit_wait_s for r in self.runtimes)

    def finish(self, stats: Any, waits: tuple[int, float] | None = None) -> None:
        """The stage's totals on its span and counters; a low-information verdict as a span event.

        ``waits``: (waits, seconds) to count instead of the runtimes' totals (a worker's task: its share).
        """
        waits, wait_s = waits if waits is not None else self.waits()
        attrs = {"inferframe.rate_limit.waits": waits, "inferframe.rate_limit.wait_s": round(wait_s, 6)}
        if stats is not None:
            attrs.update({"inferframe.rows": stats.rows_done, "inferframe.cache.hits": stats.cache_hits,
                          "inferframe.requests": stats.requests, "inferframe.retries": stats.retries,
                          "inferframe.rate_limited": stats.rate_limited, "inferframe.errors": stats.errors,
                          "gen_ai.usage.input_tokens": stats.input_tokens,
                          "gen_ai.usage.output_tokens": stats.output_tokens, "inferframe.cost": float(stats.cost)})
        if self.meters is not None:
            counted = {"inferframe.stage": self.label, "gen_ai.request.model": self.base.get("gen_ai.request.model", "")}
            self.meters.waits.add(waits, counted)
            if stats is not None:
                self.meters.rows.add(stats.rows_done, counted)
                self.meters.cache_hits.add(stats.cache_hits, counted)
                self.meters.cost.add(float(stats.cost), counted)
        if self.span is None:
            return
        self.span.set_attributes(attrs)
        low = same_answer(stats.answers, raw=stats.answers_raw) if stats is not None and stats.answers else None
        if low is not None:
            self.span.add_event("inferframe.low_information", {"inferframe.stage": self.label,
                                                               "inferframe.quality.summary": low.summary})
        self.span.end()
