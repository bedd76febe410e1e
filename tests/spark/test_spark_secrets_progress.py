"""Secrets and progress on Spark.

Item 6: an API key and a cache URL's password reach the executors (the job answers, and its answers land in
the PostgreSQL store) without appearing in Spark's logs, its event log (what the Spark UI shows), the Spark
conf or the task closures Spark ships (every command pickled while the job is planned and run).
Item 7: the driver's counters (the progress line's, then ``last_run()``) count the executors' work while the
job runs, not only at its end.
"""

from __future__ import annotations

import pathlib
import shutil
import tempfile
import threading
import urllib.parse
import uuid

import pgserver
import pytest

import inferframe as ifr
from inferframe import col
from inferframe.functions import prompt
from inferframe.observe import last_run
from inferframe.observe.stats import RunCounters
from inferframe.plan import physical as pp
from inferframe.simulator import Simulator, SimulatorConfig

KEY = "sk-spark-secret-5e1d0c"
PASSWORD = "Pw-spark-9x2Lq-never-shown"


@pytest.fixture(scope="module")
def store_url():
    """A real PostgreSQL (pgserver) with a role whose password must never show; its URL."""
    data = tempfile.mkdtemp(prefix="inferframe-pg-")
    server = pgserver.get_server(data, cleanup_mode="stop")
    server.psql(f"CREATE ROLE sparkrole LOGIN PASSWORD '{PASSWORD}';")
    server.psql("CREATE DATABASE sparkcache OWNER sparkrole;")
    host = urllib.parse.parse_qs(urllib.parse.urlsplit(server.get_uri()).query)["host"][0]
    yield f"postgresql://sparkrole:{PASSWORD}@/sparkcache?host={host}"
    server.cleanup()
    shutil.rmtree(data, ignore_errors=True)


def test_a_key_and_a_store_password_stay_out_of_logs_event_log_conf_and_closures(spark, spark_log, store_url,
                                                                                   monkeypatch):
    from pyspark.serializers import CloudPickleSerializer

    shipped: list[bytes] = []
    dumps = CloudPickleSerializer.dumps

    def recorded(self, obj):  # every command pyspark pickles for the JVM (the closures its tasks run)
        data = dumps(self, obj)
        shipped.append(data)
        return data

    monkeypatch.setattr(CloudPickleSerializer, "dumps", recorded)
    run = uuid.uuid4().hex
    logged_before = spark_log.stat().st_size
    spark.sparkContext.setLogLevel("INFO")
    ifr.set_runner_spark(spark)
    try:
        with Simulator(SimulatorConfig(require_api_key=KEY)) as sim:
            out = ifr.from_pydict({"q": [f"secret row {i} {run}" for i in range(6)]}).with_column(
                "a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key=KEY, model="gpt-5-mini",
                            use_chat_completions=True, cache_url=store_url)).to_arrow()
    finally:
        ifr.set_runner_native()
        spark.sparkContext.setLogLevel("ERROR")
    with open(spark_log, "rb") as f:
        f.seek(logged_before)
        logs = f.read().decode(errors="replace")
    assert out.column("a").null_count == 0 and out.column("a_error").null_count == 6  # the key reached them
    import psycopg

    with psycopg.connect(store_url) as db:  # ... and the password: the answers are in the store
        assert db.execute("SELECT COUNT(*) FROM inferframe_responses").fetchone()[0] >= 6
    assert shipped and any(sim.base_url.encode() in s for s in shipped)  # the recorder saw the closures
    events = pathlib.Path(spark.sparkContext.getConf().get("spark.eventLog.dir").removeprefix("file:"))
    event_text = "".join(p.read_text(errors="replace") for p in events.rglob("*") if p.is_file())
    assert "mapInArrow" in event_text.replace("MapInArrow", "mapInArrow") and " INFO " in logs  # both were written
    for secret in (KEY, PASSWORD):
        assert not [s for s in shipped if secret.encode() in s], f"{secret} in a task closure"
        assert secret not in logs, f"{secret} in Spark's logs"
        assert secret not in event_text, f"{secret} in the event log"
        assert secret not in repr(spark.sparkContext.getConf().getAll()), f"{secret} in the Spark conf"


def test_the_drivers_counters_count_the_executors_work_as_it_goes(spark):
    from inferframe.runners.spark_runner import SparkRunner

    n, run = 240, uuid.uuid4().hex
    counters, seen, done = RunCounters(), [], threading.Event()

    def sample():  # what the progress line reads, twice a second
        while not done.wait(0.2):
            seen.append(sum(r.requests for r in counters.runs()))

    with Simulator(SimulatorConfig(latency_ms=30, rpm=2400, ratelimit_burst_s=1.0)) as sim:
        df = ifr.from_pydict({"q": [f"progress {i} {run}" for i in range(n)]}).repartition(4).with_column(
            "a", prompt(col("q"), provider="openai", base_url=sim.base_url, api_key="k", model="gpt-5-mini",
                        use_chat_completions=True, rpm=2400))
        op = pp.plan_physical(df._runnable())
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            rows = sum(b.num_rows for b in SparkRunner(spark).execute(op, counters))
        finally:
            done.set()
            sampler.join()
        stats = sim.stats()
        sent = stats["total_requests"]
    # Every row asked once; a request the server refused with a 429 (four executors sharing 2,400 RPM, on a
    # loaded machine one burst may pass the shared bucket) is retried and paid for nothing: CI saw 241 of 240.
    assert rows == n and sent - stats["rate_limited"] == n, stats
    assert any(0 < s < n for s in seen), seen  # counted while the executors worked, not only at the end
    (run_stats,) = counters.runs()
    assert run_stats.requests == sent and run_stats.rows_done == n and run_stats.output_tokens > 0

    ifr.set_runner_spark(spark)
    try:
        df.to_arrow()  # the same job through the DataFrame: last_run() on the driver has every executor's rows
    finally:
        ifr.set_runner_native()
    assert last_run()[0]["rows_done"] == n and last_run()[0]["cache_hits"] == n
