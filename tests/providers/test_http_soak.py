"""The crash soak (issue 42 item 2), short: bench/http_soak.py runs 12 processes, each cheap scenario (a job on
threads that end, an exit with a client open, os.fork and multiprocessing "fork" after a job) with both HTTP
clients, then one Ray and one Spark process on reqwest, and no process or child of theirs may end by a signal,
hang or leave a crash report.

The script runs as a user runs it: its own interpreter, the client chosen by INFERFRAME_HTTP, one simulator in
its process. The full soak (500 processes) is the bench's: bench/README.md has its table.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from inferframe.simulator import Simulator, SimulatorConfig

BENCH = Path(__file__).resolve().parents[2] / "bench" / "http_soak.py"
CHEAP = ("thread", "exit-open", "fork", "mp-fork")


def _soak(*args: str, timeout: float = 240) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=timeout)
    found = [line for line in done.stdout.splitlines() if line.startswith("BENCH_RESULT ")]
    assert found, done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads(found[-1][len("BENCH_RESULT "):])


def test_a_short_soak_ends_no_process_by_a_signal_with_either_client():
    done, result = _soak("--processes", "12", "--scenarios", ",".join(CHEAP))
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-2000:]
    # The table: a row per client, scenario and kind of process, then a verdict per client.
    header = next(line for line in out.splitlines() if line.startswith("client "))
    assert header.split()[:4] == ["client", "scenario", "who", "runs"]
    rows = {tuple(line.split()[:3]): line for line in out.splitlines() if re.match(r"(reqwest|aiohttp) ", line)}
    for client in ("reqwest", "aiohttp"):
        for scenario in CHEAP:
            assert (client, scenario, "process") in rows, out[-3000:]
        assert (client, "fork", "fork-child") in rows and (client, "mp-fork", "mp-process") in rows
        assert re.search(rf"^{client}: 6 processes \+ 2 children, 0 ended by a signal, 0 hung, .*: PASS", out, re.M)
        summary = result["transports"][client]
        assert summary["processes"] == 6 and summary["children"] == 2
        assert summary["signal_deaths"] == summary["hangs"] == summary["crash_reports"] == 0
        assert summary["wrong_client"] == summary["failed_processes"] == 0 and summary["verdict"] == "PASS"
    codes = result["codes"]
    # Every process ended by itself with 0; a child either answered (0) or failed with a clear error (1).
    for key, counts in codes.items():
        if key.endswith("/process"):
            assert counts == {"0": sum(counts.values())}, (key, counts)
        else:
            assert set(counts) <= {"0", "1"}, (key, counts)
    assert sum(codes["reqwest/thread/process"].values()) + sum(codes["aiohttp/thread/process"].values()) == 4
    # On aiohttp a forked child's job answers; on reqwest (pyreqwest 0.15) its client cannot be built after fork():
    # a PlanError that says why and names the way out.
    assert codes["aiohttp/fork/fork-child"] == {"0": 1} and codes["aiohttp/mp-fork/mp-process"] == {"0": 1}
    if "1" in codes["reqwest/fork/fork-child"]:
        assert "A pyreqwest runtime was initialized before fork()" in out
        assert "INFERFRAME_HTTP=reqwest, but the reqwest HTTP client cannot run here" in out


@pytest.mark.ray
@pytest.mark.spark
def test_ray_and_spark_workers_run_jobs_on_reqwest_and_end_by_no_signal():
    # One process each (about 10 s and 15 s): a Ray worker (max_calls=1: it exits after its job) and a Python
    # worker forked by Spark's daemon run jobs through reqwest, the client whose native code crashed processes.
    done, result = _soak("--processes", "2", "--scenarios", "ray,spark", "--transports", "reqwest", timeout=400)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert result["codes"] == {"reqwest/ray/process": {"0": 1}, "reqwest/ray/ray-worker": {"0": 2},
                               "reqwest/spark/process": {"0": 1}, "reqwest/spark/spark-worker": {"0": 1}}
    summary = result["transports"]["reqwest"]
    assert summary["verdict"] == "PASS" and summary["wrong_client"] == 0 and summary["crash_reports"] == 0
    assert re.search(r"^reqwest\s+spark\s+spark-worker\s+1\s+0: 1\s", done.stdout, re.M), done.stdout


def test_the_verdict_counts_a_signal_death():
    bench = _load_bench()
    assert [bench.is_signal(c) for c in (0, 1, -6, -11, 134, 139, "crash", "hang")] == [
        False, False, True, True, True, True, True, False]
    results = [{"i": 0, "transport": "reqwest", "scenario": "fork", "variant": 0, "code": 0, "seconds": 1.0,
                "crash_lines": [], "result": {"reqwest_loaded": True,
                                              "children": [{"who": "fork-child", "code": -11, "error": None}]}}]
    summary = bench.summarize(results, ["reqwest"])["reqwest"]
    assert summary["signal_deaths"] == 1 and summary["verdict"] == "FAIL"
    table = bench.report(results, ["reqwest"], ["fork"], 1.0)
    assert re.search(r"^reqwest\s+fork\s+fork-child\s+1\s+-11: 1\s+1\s+0\s*$", table, re.M), table
    assert re.search(r"^reqwest: .* 1 ended by a signal, .*: FAIL", table, re.M), table


def _load_bench():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_http_soak", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_HALF_READ = textwrap.dedent("""
    import sys
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt

    df = ifr.from_pydict({"q": [f"q{i}" for i in range(8)]}).into_batches(1).with_column(
        "a", prompt(col("q"), provider="openai", base_url=sys.argv[1], api_key="sk-x", model="gpt-5-mini"))
    batches = df.iter_batches()
    print("FIRST", next(batches).to_pydict()["a"], flush=True)  # the first batch is out; the job is not over
    # the script ends here, the stream not read to its end: its job, provider and client still open
""")


@pytest.mark.parametrize("client", ["reqwest", "aiohttp"])
def test_a_script_that_ends_with_a_stream_not_read_to_its_end_exits_at_once(client):
    # Found by the soak: the stream, closed as the interpreter ended, waited 10 s for threads that never run again,
    # then printed "Exception ignored ... RuntimeError: Cannot close a running event loop".
    env = {**os.environ, "INFERFRAME_HTTP": client}
    with Simulator(SimulatorConfig()) as sim:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", _HALF_READ, sim.base_url], capture_output=True, text=True,
                              env=env, timeout=120)
        seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("FIRST ['sim answer: q0'"), done.stdout
    assert "Exception ignored" not in done.stderr, done.stderr
    assert "Cannot close a running event loop" not in done.stderr, done.stderr
    assert seconds < 8, seconds  # 11 s before: two 5 s waits on the loop's thread
