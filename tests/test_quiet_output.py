"""A normal job prints nothing a user cannot act on, and Ctrl-C prints one line and closes its connections.

Each test runs a real job in a subprocess and reads its stderr: Lance's WARN on a new table, Ray's
error-level line about actor constructor arguments, and Ctrl-C (SIGINT) against a slow simulator, by the
command line and by the library.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from inferframe.simulator import Simulator, SimulatorConfig


def _python(code: str, tmp_path, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "INFERFRAME_PROGRESS": "0", **(env or {})})


def test_a_lance_write_prints_no_warning(tmp_path):
    done = _python("""
        import inferframe as ifr
        ifr.from_pydict({"id": [1, 2]}).write_lance("db", table="items", mode="overwrite")
        import lancedb
        print(lancedb.connect("db").open_table("items").count_rows())
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"
    assert "WARN" not in done.stderr, done.stderr  # was: "WARN lance::dataset::write::insert] No existing dataset"


def test_a_lance_log_level_the_user_set_is_kept(tmp_path):
    done = _python("""
        import inferframe as ifr
        ifr.from_pydict({"id": [1]}).write_lance("db", table="items", mode="overwrite")
    """, tmp_path, env={"LANCEDB_LOG": "warn"})
    assert done.returncode == 0, done.stderr
    assert "No existing dataset" in done.stderr


@pytest.mark.ray
def test_a_ray_job_with_actor_pools_prints_no_restart_warning(tmp_path):
    """Ray Data's actor pools always take object-store refs with max_restarts=-1; Ray logs that at error level."""
    done = _python("""
        import inferframe as ifr
        from inferframe import col

        @ifr.cls(max_concurrency=1)
        class Upper:
            def __call__(self, s: str) -> str:
                return s.upper()

        ifr.set_runner_ray("local", num_cpus=2, include_dashboard=False)   # a cluster of its own
        df = ifr.from_pydict({"s": ["a", "b", "c"]}).with_column("u", Upper()(col("s")))
        print(df.to_pydict()["u"])
    """, tmp_path, env={"RAY_AUTH_MODE": "disabled"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['A', 'B', 'C']"
    assert "max_restarts > 0" not in done.stderr, done.stderr
    assert "core_worker.cc" not in done.stderr, done.stderr


@pytest.fixture
def slow_sim():
    with Simulator(SimulatorConfig(latency_ms=2000)) as sim:
        yield sim


def _interrupt(cmd: list[str], sim, tmp_path, wait_for_requests: int = 4) -> subprocess.CompletedProcess:
    """Start ``cmd`` against ``sim``, SIGINT it once requests are in flight, and return what it printed."""
    (tmp_path / "in.csv").write_text("text\n" + "".join(f"row {i}\n" for i in range(200)))
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": sim.base_url, "INFERFRAME_PROGRESS": "0",
           "INFERFRAME_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while sim.state.stats.total < wait_for_requests and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    time.sleep(2.5)  # some answers arrive (2 s latency), more are in flight
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_ctrl_c_on_the_command_line_prints_one_line_and_closes_its_sessions(slow_sim, tmp_path):
    done = _interrupt([sys.executable, "-m", "inferframe", "prompt", "in.csv", "--column", "text", "--provider",
                       "openai", "--model", "gpt-5-mini", "--max-concurrency", "4", "--out", "out"], slow_sim, tmp_path)
    assert done.returncode == 130, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # was: "error: interrupted", then aiohttp's "Unclosed client session"
    assert "kept in the response cache" in lines[0] and str(tmp_path / "cache") in lines[0], lines[0]
    assert "Run the same job again to resume" in lines[0]
    assert "Traceback" not in done.stderr and "Unclosed" not in done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").glob("part-*"))


def test_ctrl_c_in_a_script_says_what_was_kept_and_closes_its_sessions(slow_sim, tmp_path):
    script = textwrap.dedent("""
        import inferframe as ifr
        from inferframe.functions import prompt
        df = ifr.read_csv("in.csv").with_column("a", prompt(ifr.col("text"), model="gpt-5-mini", max_concurrency=4))
        df.write_parquet("out")
    """)
    done = _interrupt([sys.executable, "-c", script], slow_sim, tmp_path)
    assert done.returncode in (130, -signal.SIGINT), done.stderr  # Python's own exit for an uncaught KeyboardInterrupt
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("KeyboardInterrupt: interrupted: ") and "kept in the response cache" in last, done.stderr
    assert "Unclosed client session" not in done.stderr, done.stderr
    assert "stream.py" not in done.stderr and "threading.py" not in done.stderr  # not the executor's internals
