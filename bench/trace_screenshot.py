"""A job's trace in a real backend, seen in a real browser: Arize Phoenix, headless Chromium, a PNG for the README.

Starts ``phoenix serve`` on 127.0.0.1 (a fresh working folder), runs a prompt job and a semantic join against the
project's simulator in a subprocess under ``opentelemetry-instrument`` with only the ``OTEL_*`` variables set (as
the README's "Tracing (OpenTelemetry)" shows), finds the prompt job's trace through Phoenix's REST API, and takes
a screenshot of Phoenix's trace page with headless Chromium (Debian: ``apt-get install -y chromium``). Prints the
spans Phoenix holds per trace. Needs the test extra (``arize-phoenix``, ``opentelemetry-distro``).

    .venv/bin/python bench/trace_screenshot.py                     # docs/trace_phoenix.png
    .venv/bin/python bench/trace_screenshot.py --png /tmp/x.png --keep   # leave Phoenix running to look around
    .venv/bin/python bench/trace_screenshot.py --runner ray --png /tmp/ray.png   # on a local Ray cluster

With ``--runner ray`` the job starts a local Ray cluster; its workers inherit ``opentelemetry-instrument``'s
environment, so they configure the SDK from the same ``OTEL_*`` variables and their spans join the job's trace.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from inferframe.simulator import Simulator, SimulatorConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
PROJECT = "inferframe-demo"
KEY = "sk-demo"

JOB = '''
import sys
import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt

if sys.argv[3] == "ray":
    ifr.set_runner_ray("local", num_cpus=2)  # a new local cluster: its workers inherit this environment, OTEL_* and all
api = dict(provider="openai", base_url=sys.argv[1], api_key=sys.argv[2], model="gpt-5-mini", use_chat_completions=True)
questions = ifr.from_pydict({"q": [f"question {i}" for i in range(12)]})
questions.with_column("a", prompt(col("q"), **api)).collect()
reviews = ifr.from_pydict({"review": ["good film", "bad film", "good plot", "dull plot"]})
reviews.sem_join(reviews, "{review:left} and {review:right} express the same sentiment", plan="nested", **api).collect()
'''


def answer(body: dict) -> str:
    system, text = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "Decide" in system:
        a, b = text.split(" and ", 1)
        return json.dumps({"label": "yes" if ("good" in a) == ("good" in b.rsplit(" express", 1)[0]) else "no"})
    return "a short answer"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def start_phoenix(folder: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": folder, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(free_port())}
    proc = subprocess.Popen([os.path.join(BIN, "phoenix"), "serve"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url, started = f"http://127.0.0.1:{port}", time.monotonic()
    while True:
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=2).close()
            print(f"phoenix serve: up in {time.monotonic() - started:.1f} s at {url}")
            return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() - started > 300:
                sys.exit("phoenix serve did not start")
            time.sleep(0.25)


def run_job(phoenix: str, folder: str, runner: str) -> None:
    script = os.path.join(folder, "job.py")
    with open(script, "w") as f:
        f.write(JOB)
    env = {"PATH": os.environ["PATH"], "HOME": folder, "OTEL_SERVICE_NAME": "inferframe-demo",
           "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
           "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix, "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
           "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={PROJECT}",
           "RAY_AUTH_MODE": "disabled"}  # as tests/ray/conftest.py: no token for a cluster on 127.0.0.1
    with Simulator(SimulatorConfig(responder=answer, latency_ms=40, seed=1)) as sim:
        subprocess.run([os.path.join(BIN, "opentelemetry-instrument"), sys.executable, script, sim.base_url, KEY, runner],
                       env=env, check=True, timeout=300)


def prompt_trace(phoenix: str, expected: int) -> str:
    """The Phoenix page of the prompt job's trace, its first request span selected, once Phoenix stored
    ``expected`` spans (it stores them in the background); prints the spans of each trace."""
    deadline = time.monotonic() + 60
    while True:
        spans = get(f"{phoenix}/v1/projects/{PROJECT}/spans?limit=1000")["data"]
        if len(spans) >= expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    per_trace = collections.defaultdict(collections.Counter)
    for s in spans:
        per_trace[s["context"]["trace_id"]][s["name"]] += 1
    for trace_id, names in per_trace.items():
        print(trace_id, dict(sorted(names.items())))
    trace_id = next(t for t, names in per_trace.items() if "inferframe.stage prompt[gpt-5-mini]" in names)
    project = next(p["id"] for p in get(f"{phoenix}/v1/projects")["data"] if p["name"] == PROJECT)
    first = min((s for s in spans if s["context"]["trace_id"] == trace_id and s["name"] == "chat gpt-5-mini"),
                key=lambda s: s["start_time"])
    return f"{phoenix}/projects/{project}/traces/{trace_id}?selectedSpanNodeId={first['id']}"


def screenshot(url: str, png: str, width: int, height: int) -> None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        sys.exit("chromium is not installed (Debian: apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as profile:
        # --virtual-time-budget: Phoenix is a single-page app; the trace is drawn after its GraphQL answers.
        proc = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={width},{height}",
                               "--hide-scrollbars", "--virtual-time-budget=15000", url],
                              capture_output=True, text=True, timeout=180)
    if proc.returncode != 0 or not os.path.exists(png):
        sys.exit(f"chromium failed (rc {proc.returncode}): {proc.stderr[-2000:]}")
    print(f"screenshot: {png} ({os.path.getsize(png)} bytes) of {url}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--png", default=os.path.join(ROOT, "docs", "trace_phoenix.png"))
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=900)
    parser.add_argument("--keep", action="store_true", help="leave Phoenix running (its URL is printed)")
    parser.add_argument("--runner", choices=("local", "ray"), default="local")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="inferframe-phoenix-")
    proc, phoenix = start_phoenix(folder)
    try:
        run_job(phoenix, folder, args.runner)
        page = prompt_trace(phoenix, expected=2 + 2 + 12 + 16)
        os.makedirs(os.path.dirname(os.path.abspath(args.png)), exist_ok=True)
        screenshot(page, args.png, args.width, args.height)
    finally:
        if not args.keep:
            proc.terminate()
            proc.wait(timeout=30)
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
