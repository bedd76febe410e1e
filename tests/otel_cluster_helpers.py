"""One trace across a cluster (issue 47), checked the same way on Ray (tests/ray) and Spark (tests/spark).

The driver records into the test's in-memory exporter; every worker process configures the OpenTelemetry SDK
itself, through ``ifr.set_tracing(worker_setup=...)`` as a user's cluster would, with the SDK's own
``ConsoleSpanExporter`` writing one JSON span per line into a file of its own (workers are other processes:
an in-memory exporter there could not be read from the test). This module travels to the workers by value.
"""

import functools
import glob
import json
import os

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt

KEY = "sk-otel-cluster-very-secret-0815"
ROWS = 24


def write_spans_to(folder: str) -> None:
    """A worker's SDK set-up: its spans, one JSON object per line, into ``folder/<pid>.jsonl``."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    out = open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a", buffering=1)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(
        ConsoleSpanExporter(out=out, formatter=lambda span: span.to_json(indent=None) + "\n")))
    trace.set_tracer_provider(provider)


def worker_spans(folder) -> tuple[list[dict], list[str]]:
    """Every span the workers wrote (as ``ReadableSpan.to_json`` has it), and the files' text."""
    texts = [open(p).read() for p in sorted(glob.glob(os.path.join(folder, "*.jsonl")))]
    return [json.loads(line) for text in texts for line in text.splitlines() if line.strip()], texts


def run_traced_job(sim, folder) -> tuple[dict, list]:
    """A prompt job of ``ROWS`` rows on the current runner, traced: (its answers, the driver's spans)."""
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    ifr.set_tracing(tracer_provider=tp, worker_setup=functools.partial(write_spans_to, str(folder)))
    try:
        df = ifr.from_pydict({"q": [f"question {i}" for i in range(ROWS)]}).repartition(4)
        out = df.with_column("a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY,
                                         model="gpt-5-mini", cache="off")).to_pydict()
    finally:
        ifr.set_tracing()
    return out, exporter.get_finished_spans()


def check_one_trace(driver_spans: list, folder, requests_sent: int) -> dict:
    """The workers' stage and request spans are in the driver's job trace, under the job and their stages.

    Returns counts the caller may print: workers, stage spans, request spans.
    """
    jobs = [s for s in driver_spans if s.name == "inferframe.job"]
    assert len(jobs) == 1, [s.name for s in driver_spans]
    job = jobs[0]
    trace_id, job_id = f"0x{job.context.trace_id:032x}", f"0x{job.context.span_id:016x}"
    spans, texts = worker_spans(folder)
    stages = [s for s in spans if s["name"] == "inferframe.stage prompt[gpt-5-mini]"]
    requests = [s for s in spans if s["name"] == "chat gpt-5-mini"]
    assert stages and requests, [s["name"] for s in spans]
    assert {s["context"]["trace_id"] for s in spans} == {trace_id}  # one trace: the driver's
    assert {s["parent_id"] for s in stages} == {job_id}  # each task's stage span: a child of the job span
    stage_ids = {s["context"]["span_id"] for s in stages}
    assert {s["parent_id"] for s in requests} <= stage_ids  # each request: under its task's stage span
    assert len(requests) == requests_sent  # every request the simulator answered has its span
    assert sum(s["attributes"]["inferframe.rows"] for s in stages) == ROWS  # the tasks' shares add up
    assert sum(s["attributes"]["inferframe.requests"] for s in stages) == requests_sent
    for r in requests:
        a = r["attributes"]
        assert r["kind"] == "SpanKind.CLIENT" and a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.request.model"] == "gpt-5-mini" and a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert "gen_ai.input.messages" not in a  # prompts only with the standard opt-in
    assert all(s["attributes"]["inferframe.worker"] for s in stages)
    assert not any(KEY in t for t in texts)  # the key never reaches a span
    assert job.attributes["inferframe.rows"] == ROWS and job.attributes["inferframe.outcome"] == "ok"
    return {"workers": len(texts), "stage spans": len(stages), "request spans": len(requests)}


def traced_job_on(use_runner) -> "callable":
    """Run the traced job on the runner ``use_runner()`` selects (back to the native one after) and check its one
    trace: a function of the test's ``tmp_path`` returning ``check_one_trace``'s counts."""
    from inferframe.simulator import Simulator, SimulatorConfig

    def run(folder) -> dict:
        use_runner()
        try:
            with Simulator(SimulatorConfig(require_api_key=KEY, seed=5)) as sim:
                out, driver_spans = run_traced_job(sim, folder)
                sent = sim.stats()["total_requests"]
        finally:
            ifr.set_runner_native()
        assert len(out["a"]) == ROWS and all(out["a"])
        return check_one_trace(driver_spans, folder, sent)

    return run
