"""A real trace backend (issue 47): Arize Phoenix (``phoenix serve``, from PyPI) on 127.0.0.1 receives the traces of a
job run the standard way, under ``opentelemetry-instrument`` with the ``OTEL_*`` variables and nothing configured in
code (tests/otel_backend_job.py: a prompt job and a semantic join against the simulator), and the test reads them
back through Phoenix's own REST API: the job spans, their stage spans and the request spans with their ``gen_ai.*``
attributes. One backend start for every check."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-otel-backend-very-secret-2718"
PROJECT = "inferframe-tests"
JOB = Path(__file__).with_name("otel_backend_job.py")
BIN = Path(sys.executable).parent  # the venv's console scripts: phoenix, opentelemetry-instrument
# Phoenix starts in 18 s on the 2-core machine with its modules compiled, 60 s the first time after install.
START_S = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    """``phoenix serve`` on 127.0.0.1 with its own SQLite folder: its base URL (OTLP at /v1/traces, REST at /v1)."""
    if not (BIN / "phoenix").exists():
        pytest.fail("arize-phoenix is not installed: scripts/install.sh --tests installs it (the trace-backend extra)")
    home = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(home), "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(free_port())}
    log = open(home / "phoenix.log", "wb")
    proc = subprocess.Popen([str(BIN / "phoenix"), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_S
    while True:
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"phoenix serve did not start: {(home / 'phoenix.log').read_text()[-2000:]}")
            time.sleep(0.25)
    yield url
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def answer(body):
    """A sem_join check says yes when both reviews are good or both are not; a prompt gets a short answer."""
    system, text = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "Decide" in system:
        a, b = text.split(" and ", 1)
        return json.dumps({"label": "yes" if ("good" in a) == ("good" in b.rsplit(" express", 1)[0]) else "no"})
    return "a short answer"


def spans_in(phoenix: str, expected: int, wait_s: float = 60.0) -> list[dict]:
    """The project's spans as Phoenix's REST API gives them, once ``expected`` arrived (Phoenix stores them in the background)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            spans = get(f"{phoenix}/v1/projects/{PROJECT}/spans?limit=1000")["data"]
        except urllib.error.HTTPError:  # the project appears with its first span
            spans = []
        if len(spans) >= expected or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def test_a_job_under_opentelemetry_instrument_reaches_phoenix_as_one_trace_per_job(phoenix, tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "OTEL_SERVICE_NAME": "inferframe-job", "OTEL_TRACES_EXPORTER": "otlp",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix,
           "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
           "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={PROJECT}"}
    with Simulator(SimulatorConfig(responder=answer, require_api_key=KEY)) as sim:
        run = subprocess.run([str(BIN / "opentelemetry-instrument"), sys.executable, str(JOB), sim.base_url, KEY],
                             env=env, capture_output=True, text=True, timeout=300)
        sent = sim.stats()["total_requests"]
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["6", "5"]  # 6 answers; 5 pairs of the same sentiment (good/good x4, bad/bad)
    assert sent == 6 + 9  # one request per prompt row, one per pair of the nested join

    spans = spans_in(phoenix, 2 + 2 + sent)
    names = sorted(s["name"] for s in spans)
    jobs = {s["context"]["trace_id"]: s for s in spans if s["name"] == "inferframe.job"}
    assert len(jobs) == 2, names  # two jobs, two traces
    stages = [s for s in spans if s["name"].startswith("inferframe.stage ")]
    requests = [s for s in spans if s["name"] == "chat gpt-5-mini"]
    assert len(stages) == 2 and len(requests) == sent, names
    by_stage = {}
    for stage in stages:
        job = jobs[stage["context"]["trace_id"]]
        assert stage["parent_id"] == job["context"]["span_id"]
        assert job["attributes"]["inferframe.outcome"] == "ok" and job["attributes"]["inferframe.runner"] == "LocalRunner"
        mine = [r for r in requests if r["parent_id"] == stage["context"]["span_id"]]
        assert {r["context"]["trace_id"] for r in mine} == {stage["context"]["trace_id"]}
        assert len(mine) == stage["attributes"]["inferframe.requests"]
        by_stage[stage["attributes"]["inferframe.stage"]] = len(mine)
    assert by_stage == {"prompt[gpt-5-mini]": 6, "sem_join.check[gpt-5-mini]": 9}
    for r in requests:
        a = r["attributes"]
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == "gpt-5-mini"
        assert a["gen_ai.response.id"].startswith("chatcmpl-") and a["gen_ai.response.finish_reasons"] == ["stop"]
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["server.address"] == "127.0.0.1" and a["inferframe.attempt"] == 1
    raw = json.dumps(spans)
    assert KEY not in raw and "question 0" not in raw and "good film" not in raw  # no key; prompts only opted in
    print("phoenix:", {"traces": len(jobs), "stage spans": len(stages), "request spans": len(requests)})
