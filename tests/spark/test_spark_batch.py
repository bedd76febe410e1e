"""The Batch API from Spark (seed 003's pattern 4c): ``prompt(..., batch=True)`` on the Spark runner submits
each partition's requests as a batch, polls it and joins the answers back; a driver killed after it submitted
leaves the batches in the ledger, and the next run polls them instead of submitting (and paying) again."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.parquet as pq

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.simulator import Simulator, SimulatorConfig
from spark_cluster import short_jvm
from test_batch_api import batch_controls

ROWS = 24

DRIVER = short_jvm(textwrap.dedent("""
    import os, sys
    from pyspark.sql import SparkSession
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt
    base_url, cache_dir, data = sys.argv[1:4]
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "512m").getOrCreate())
    ifr.set_runner_spark(spark)
    ask = prompt(col("q"), provider="openai", base_url=base_url, api_key="k", model="gpt-5-mini", cache_dir=cache_dir,
                 batch=True, batch_poll_interval=0.05)
    ifr.read_parquet(data).with_column("a", ask).to_arrow()
"""))


def _data(root) -> str:
    """Two files: two Spark tasks, each one batch of its rows, the same rows in every run."""
    root.mkdir()
    for part in range(2):
        ids = list(range(part * ROWS // 2, (part + 1) * ROWS // 2))
        pq.write_table(pa.table({"id": ids, "q": [f"batch row {i}" for i in ids]}), root / f"p{part}.parquet")
    return str(root)


def _batches_in_ledger(cache_dir) -> int:
    path = cache_dir / "responses.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as db:
            return db.execute("SELECT COUNT(*) FROM batches").fetchone()[0]
    except sqlite3.OperationalError:  # the job has not made the table yet
        return 0


def test_batch_true_on_spark_polls_the_batches_a_killed_driver_submitted(spark, tmp_path):
    data, cache_dir = _data(tmp_path / "in"), tmp_path / "cache"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "INFERFRAME_PROGRESS": "0"}  # no PYSPARK_PYTHON: inferframe gives the workers this Python
    with Simulator(SimulatorConfig()) as sim:
        batch_controls(sim, process_s=3.0)  # the batches stay in progress well past the kill
        driver = subprocess.Popen([sys.executable, str(script), sim.base_url, str(cache_dir), data], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 300  # a loaded machine starts Spark slowly
        while _batches_in_ledger(cache_dir) < 2 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(driver.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers: nothing collects
        driver.wait()
        assert sim.stats()["batches_created"] == 2 and _batches_in_ledger(cache_dir) == 2

        ifr.set_runner_spark(spark)
        try:
            out = ifr.read_parquet(data).with_column("a", prompt(
                col("q"), provider="openai", base_url=sim.base_url, api_key="k", model="gpt-5-mini",
                cache_dir=str(cache_dir), batch=True, batch_poll_interval=0.05)).to_pydict()
        finally:
            ifr.set_runner_native()
        stats = sim.stats()
    assert stats["batches_created"] == 2  # the next run polled the driver's batches; it submitted none
    assert out["id"] == list(range(ROWS))
    assert out["a"] == [f"sim answer: batch row {i}" for i in range(ROWS)] and out["a_error"] == [None] * ROWS
    assert not stats.get("by_endpoint", {}).get("chat.completions")  # nothing went outside the batches
