"""OpenTelemetry traces and metrics of a job against the simulator, read back from the SDK's in-memory exporter
and reader (issue 47): the span tree, GenAI attributes equal to what the simulator answered, cache hits,
retries after a 429, metrics, and the privacy rule."""

import json

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import inferframe as ifr  # noqa: E402
from inferframe import col  # noqa: E402
from inferframe.functions import prompt  # noqa: E402
from inferframe.session import current  # noqa: E402
from inferframe.simulator import Simulator, SimulatorConfig  # noqa: E402

KEY = "sk-otel-test-very-secret-4711"


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(require_api_key=KEY, seed=3)) as s:
        yield s


@pytest.fixture
def otel():
    """Providers of this test's own, handed to inferframe (the global ones can be set once per process)."""
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    mp = MeterProvider(metric_readers=[reader])
    ifr.set_tracing(tracer_provider=tp, meter_provider=mp)
    yield exporter, reader
    ifr.set_tracing()


def ask(sim, **kw):
    kw.setdefault("model", "gpt-5-mini")
    return prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, **kw)


def rows(n, word="question"):
    return ifr.from_pydict({"q": [f"{word} {i}" for i in range(n)]})


def by_kind(spans):
    jobs = [s for s in spans if s.name == "inferframe.job"]
    stages = [s for s in spans if s.name.startswith("inferframe.stage")]
    requests = [s for s in spans if s.name.startswith("chat ")]
    return jobs, stages, requests


def metric_points(reader):
    out = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name] = (m, list(m.data.data_points))
    return out


@pytest.mark.parametrize("chat", [True, False], ids=["chat.completions", "responses"])
def test_span_tree_and_genai_attributes(sim, otel, chat):
    exporter, _ = otel
    out = rows(6).with_column("a", ask(sim, max_tokens=40, temperature=0.2, use_chat_completions=chat)).to_pydict()
    assert out["a_error"] == [None] * 6
    jobs, stages, requests = by_kind(exporter.get_finished_spans())
    assert len(jobs) == 1 and len(stages) == 1 and len(requests) == 6
    job, stage = jobs[0], stages[0]
    assert stage.parent.span_id == job.context.span_id
    assert stage.context.trace_id == job.context.trace_id
    assert job.attributes["inferframe.outcome"] == "ok" and job.attributes["inferframe.rows"] == 6
    assert len(job.attributes["inferframe.plan.fingerprint"]) == 16
    assert job.attributes["inferframe.run_id"] == current().last_recorded[0]  # the run history's id
    assert stage.attributes["inferframe.rows"] == 6 and stage.attributes["inferframe.requests"] == 6
    for r in requests:
        a = r.attributes
        assert r.name == "chat gpt-5-mini" and r.parent.span_id == stage.context.span_id
        assert r.context.trace_id == job.context.trace_id
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == "gpt-5-mini" and a["gen_ai.request.max_tokens"] == 40
        assert a["gen_ai.request.temperature"] == 0.2
        assert a["gen_ai.response.model"].startswith("gpt-5-mini")
        assert a["gen_ai.response.id"].startswith("chatcmpl-" if chat else "resp_")
        assert a["gen_ai.response.finish_reasons"] == ("stop",)
        assert a["server.address"] == "127.0.0.1" and a["server.port"] == int(sim.base_url.split(":")[2].split("/")[0])
        assert "error.type" not in a
    # The tokens on the spans are the simulator's own counts, which last_run() adds up too.
    totals = ifr.last_run()[0]
    assert sum(r.attributes["gen_ai.usage.input_tokens"] for r in requests) == totals["input_tokens"] > 0
    assert sum(r.attributes["gen_ai.usage.output_tokens"] for r in requests) == totals["output_tokens"] > 0
    assert stage.attributes["gen_ai.usage.input_tokens"] == totals["input_tokens"]


def test_a_rerun_shows_cache_hits_and_sends_nothing(sim, otel):
    exporter, reader = otel
    rows(5).with_column("a", ask(sim)).to_pydict()
    exporter.clear()
    rows(5).with_column("a", ask(sim)).to_pydict()
    jobs, stages, requests = by_kind(exporter.get_finished_spans())
    assert requests == [] and len(jobs) == 1
    assert stages[0].attributes["inferframe.cache.hits"] == 5 and stages[0].attributes["inferframe.requests"] == 0
    points = metric_points(reader)
    assert sum(p.value for p in points["inferframe.cache.hits"][1]) == 5
    assert sum(p.value for p in points["inferframe.rows"][1]) == 10


def test_a_429_is_a_failed_attempt_span_then_a_retry(sim, otel):
    exporter, reader = otel
    sim.configure(fail_rules=[{"match": "question 2", "status": 429, "times": 1}])
    out = rows(4).with_column("a", ask(sim)).to_pydict()
    assert out["a_error"] == [None] * 4
    _, stages, requests = by_kind(exporter.get_finished_spans())
    failed = [r for r in requests if "error.type" in r.attributes]
    assert len(requests) == 5 and len(failed) == 1
    assert failed[0].attributes["error.type"] == "rate_limit"
    assert failed[0].attributes["http.response.status_code"] == 429
    assert failed[0].status.status_code.name == "ERROR"
    assert sorted(r.attributes["inferframe.attempt"] for r in requests) == [1, 1, 1, 1, 2]
    assert stages[0].attributes["inferframe.retries"] == 1 and stages[0].attributes["inferframe.rate_limited"] == 1
    durations = metric_points(reader)["gen_ai.client.operation.duration"][1]
    assert sorted(p.attributes.get("error.type", "") for p in durations) == ["", "rate_limit"]
    assert sum(p.count for p in durations) == 5


def test_metrics_follow_the_conventions(sim, otel):
    _, reader = otel
    rows(3).with_column("a", ask(sim)).to_pydict()
    totals = ifr.last_run()[0]
    points = metric_points(reader)
    usage, usage_points = points["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    by_type = {p.attributes["gen_ai.token.type"]: p for p in usage_points}
    assert by_type["input"].sum == totals["input_tokens"] and by_type["input"].count == 3
    assert by_type["output"].sum == totals["output_tokens"]
    assert by_type["input"].attributes["gen_ai.operation.name"] == "chat"
    assert by_type["input"].attributes["gen_ai.request.model"] == "gpt-5-mini"
    duration, duration_points = points["gen_ai.client.operation.duration"]
    assert duration.unit == "s" and duration_points[0].count == 3
    for name, unit in [("inferframe.rows", "{row}"), ("inferframe.cache.hits", "{row}"),
                       ("inferframe.rate_limit.waits", "{wait}"), ("inferframe.cost", "{USD}")]:
        assert points[name][0].unit == unit and points[name][0].description
    assert sum(p.value for p in points["inferframe.cost"][1]) == pytest.approx(totals["cost"])


def _everything_exported(exporter, reader) -> str:
    texts = []
    for s in exporter.get_finished_spans():
        texts.append(s.to_json())
    texts.append(reader.get_metrics_data().to_json())
    return "\n".join(texts)


def test_no_key_and_no_prompt_text_without_the_opt_in(sim, otel, monkeypatch):
    exporter, reader = otel
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    out = rows(3, word="zebracorn").with_column("a", ask(sim)).to_pydict()
    dump = _everything_exported(exporter, reader)
    assert "chat gpt-5-mini" in dump  # the scan reads the request spans
    assert KEY not in dump and "zebracorn" not in dump and out["a"][0] not in dump


def test_prompts_and_answers_only_with_the_opt_in(sim, otel, monkeypatch):
    exporter, reader = otel
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    out = rows(2, word="zebracorn").with_column("a", ask(sim)).to_pydict()
    dump = _everything_exported(exporter, reader)
    assert "zebracorn 1" in dump and KEY not in dump
    _, _, requests = by_kind(exporter.get_finished_spans())
    sent = {json.loads(r.attributes["gen_ai.input.messages"])[-1]["parts"][0]["content"] for r in requests}
    assert sent == {"zebracorn 0", "zebracorn 1"}
    answers = {json.loads(r.attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] for r in requests}
    assert answers == set(out["a"])


def test_a_failed_job_says_so(sim, otel):
    exporter, _ = otel
    sim.configure(fail_rules=[{"match": "question", "status": 400}])
    with pytest.raises(ifr.RowFailed):
        rows(2).with_column("a", ask(sim, on_error="raise")).to_pydict()
    jobs, _, _ = by_kind(exporter.get_finished_spans())
    assert jobs[0].attributes["inferframe.outcome"] == "failed"
    assert jobs[0].attributes["error.type"] == "RowFailed" and jobs[0].status.status_code.name == "ERROR"


def test_set_tracing_false_records_nothing(sim, otel):
    exporter, reader = otel
    ifr.set_tracing(False)
    rows(2).with_column("a", ask(sim)).to_pydict()
    assert exporter.get_finished_spans() == ()
    assert reader.get_metrics_data() is None or not reader.get_metrics_data().resource_metrics


def test_a_batch_api_run_is_a_span_under_its_stage(sim, otel, tmp_path):
    exporter, _ = otel
    call = prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini",
                  cache_dir=str(tmp_path), batch=True, batch_poll_interval=0.05)
    out = rows(5).with_column("a", call).to_pydict()
    assert out["a_error"] == [None] * 5
    spans = exporter.get_finished_spans()
    _, stages, requests = by_kind(spans)
    batches = [s for s in spans if s.name == "inferframe.batch gpt-5-mini"]
    assert len(batches) == 1 and requests == []  # nothing sent one by one
    assert batches[0].parent.span_id == stages[0].context.span_id
    assert batches[0].attributes["inferframe.batch.requests"] == 5 and batches[0].attributes["inferframe.errors"] == 0
    assert batches[0].attributes["gen_ai.usage.input_tokens"] == ifr.last_run()[0]["input_tokens"] > 0


def test_a_low_information_stage_has_the_verdict_as_an_event(otel):
    import warnings

    from inferframe.functions import classify_text

    exporter, _ = otel
    df = ifr.from_pydict({"r": [f"review {i}" for i in range(20)]})
    with Simulator(SimulatorConfig(responder=lambda body: json.dumps({"label": "positive"}))) as s:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ifr.LowInformationWarning)  # the guard's own warning, tested elsewhere
            df.with_column("s", classify_text(col("r"), ["positive", "negative"], provider="openai",
                                              base_url=s.base_url, api_key=KEY, model="gpt-5-mini",
                                              use_chat_completions=True, cache="off")).to_pydict()
    _, stages, _ = by_kind(exporter.get_finished_spans())
    events = [e for e in stages[0].events if e.name == "inferframe.low_information"]
    assert len(events) == 1 and "20/20 positive" in events[0].attributes["inferframe.quality.summary"]


def test_a_ratio_sampler_set_in_code_keeps_its_share_of_requests_and_every_stage(sim):
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    exporter = InMemorySpanExporter()
    tp = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.1)))
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    ifr.set_tracing(tracer_provider=tp)
    try:
        rows(400).with_column("a", ask(sim, cache="off")).to_pydict()
    finally:
        ifr.set_tracing()
    jobs, stages, requests = by_kind(exporter.get_finished_spans())
    assert len(jobs) == 1 and len(stages) == 1
    # 400 requests at 10%: 40 expected, sd 6; outside 12..80 far less than once in a billion runs.
    assert 12 <= len(requests) <= 80, len(requests)
    assert all(r.parent.span_id == stages[0].context.span_id for r in requests)
