"""OpenTelemetry the standard way, each case in a fresh process: a provider set with ``trace.set_tracer_provider``
and the sampler from ``OTEL_TRACES_SAMPLER``/``_ARG`` (every job and stage span, requests at the ratio), and a
process that configures nothing (nothing recorded, no SDK imported)."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("opentelemetry.sdk")

JOB = """
import json, sys
import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.simulator import Simulator, SimulatorConfig
SETUP
with Simulator(SimulatorConfig()) as sim:
    for _ in range(2):  # two jobs: two job spans, two stage spans (a cache off: every row is sent twice)
        df = ifr.from_pydict({"q": [f"q{i}" for i in range(ROWS)]})
        out = df.with_column("a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="sk-x",
                                         model="gpt-5-mini", cache="off")).to_pydict()
        assert out["a_error"] == [None] * ROWS
REPORT
"""

SDK = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()  # its sampler: OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
"""

COUNT = """
names = [s.name for s in exporter.get_finished_spans()]
print(json.dumps({"jobs": names.count("inferframe.job"), "stages": sum(n.startswith("inferframe.stage") for n in names),
                  "requests": names.count("chat gpt-5-mini")}))
"""


def run(setup: str, report: str, rows: int, **env) -> dict:
    code = JOB.replace("SETUP", setup).replace("REPORT", report).replace("ROWS", str(rows))
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    full_env.update(env, INFERFRAME_PROGRESS="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=full_env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_ratio_sampler_keeps_every_job_and_stage_and_its_share_of_requests():
    counts = run(SDK, COUNT, 500, OTEL_TRACES_SAMPLER="parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG="0.05")
    assert counts["jobs"] == 2 and counts["stages"] == 2
    # 1,000 requests at 5%: 50 expected, sd 6.9; outside 20..90 once in far more than a billion runs.
    assert 20 <= counts["requests"] <= 90, counts


def test_the_default_sampler_keeps_every_request():
    counts = run(SDK, COUNT, 50)
    assert counts == {"jobs": 2, "stages": 2, "requests": 100}


def test_always_off_keeps_nothing():
    counts = run(SDK, COUNT, 20, OTEL_TRACES_SAMPLER="always_off")
    assert counts == {"jobs": 0, "stages": 0, "requests": 0}


def test_with_no_provider_nothing_is_imported_or_recorded():
    report = "print(json.dumps({'otel': sorted(m for m in sys.modules if m.startswith('opentelemetry'))}))"
    assert run("", report, 20, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9") == {"otel": []}


def test_an_api_without_a_provider_records_nothing():
    # The API imported (a library did) but no SDK configured: the no-op provider, so no job trace is made.
    setup = "import opentelemetry.trace, opentelemetry.metrics"
    report = ("from inferframe.observe.otel import providers\n"
              "print(json.dumps({'providers': providers(), 'sdk': 'opentelemetry.sdk' in sys.modules}))")
    assert run(setup, report, 5) == {"providers": None, "sdk": False}
