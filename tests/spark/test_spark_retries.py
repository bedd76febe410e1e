"""Task retries never pay twice: a Python worker killed mid-task makes Spark run the task again, and the
answers it had already received come from the response cache."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.observe import last_run
from inferframe.simulator import Simulator, SimulatorConfig


def _python_workers() -> list[int]:
    """Spark's Python workers: the processes the ``pyspark.daemon`` forks (same command line, a daemon parent)."""
    import psutil

    daemons = [p for p in psutil.process_iter(["cmdline"]) if "pyspark.daemon" in " ".join(p.info["cmdline"] or [])]
    ids = {p.pid for p in daemons}
    return [p.pid for p in daemons if p.ppid() in ids]


def test_a_python_worker_killed_mid_task_loses_no_row_and_repeats_no_paid_request(spark):
    n, bound = 600, 16
    run = uuid.uuid4().hex  # questions no earlier run has cached
    ifr.set_runner_spark(spark)
    try:
        with Simulator(SimulatorConfig(latency_ms=40, record_requests=True, record_max=10 * n)) as sim:
            df = (ifr.from_pydict({"id": list(range(n)), "q": [f"question {i} {run}" for i in range(n)]})
                  .repartition(4)
                  .with_column("a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="k",
                                           model="gpt-5-mini", use_chat_completions=True, max_concurrency=bound)))
            killed: list[int] = []

            def kill_one_when_a_third_is_paid():
                deadline = time.monotonic() + 240
                while time.monotonic() < deadline and not killed:
                    if sim.stats()["total_requests"] >= n // 3:
                        for pid in _python_workers()[:1]:
                            os.kill(pid, signal.SIGKILL)
                            killed.append(pid)
                    time.sleep(0.05)

            killer = threading.Thread(target=kill_one_when_a_third_is_paid, daemon=True)
            killer.start()
            out = df.to_arrow()
            killer.join(timeout=5)
            asked = [r["body"]["messages"][-1]["content"] for r in sim.requests()]
    finally:
        ifr.set_runner_native()
    assert killed, "no Python worker was found to kill"
    assert out.column("id").to_pylist() == list(range(n))  # every row exactly once, in order
    assert out.column("a_error").null_count == n and out.column("a").null_count == 0
    # Answers stored before the kill are not bought again: at most the requests in flight then are repeated.
    assert len(set(asked)) == n and len(asked) - n <= bound
    assert last_run()[0]["rows_done"] == n  # a partition run again counts its rows once
