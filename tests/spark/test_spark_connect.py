"""Through a Spark Connect session (``SparkSession.builder.remote("sc://...")``, no SparkContext in the client):
the AI columns and Spark SQL functions run on a real local Connect server; what needs a SparkContext stops
before any request, saying what to use instead.

Each client is a script run as a user runs one (tests/spark/spark_cluster.py ``run_script``): a process that
creates a Connect session switches pyspark's functions to Connect for good, so it cannot be the test
session's process, which holds a classic SparkContext. The server (``connect_server``, tests/spark/conftest.py)
is started as the README says; the OpenAI-compatible simulator counts the requests.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from connect_server import ConnectServer
from spark_cluster import run_script, user_env

from inferframe.simulator import FailRule, Simulator, SimulatorConfig

README = Path(__file__).resolve().parents[2] / "README.md"

PREAMBLE = """
import json, sys, time, uuid
from pyspark.sql import SparkSession
import inferframe as ifr
import inferframe.spark
from inferframe.spark import functions as AF

url, base_url = sys.argv[1:3]
spark = SparkSession.builder.remote(url).getOrCreate()
hosted = dict(provider="openai", base_url=base_url, api_key="k-connect", model="gpt-5-mini", use_chat_completions=True)
run = uuid.uuid4().hex  # texts no earlier run has cached
reviews = spark.createDataFrame([(i, i % 10, f"review {i} {run}") for i in range(200)],
                                "id long, stars int, review string").repartition(2)

def out(**found):
    print(json.dumps(found, default=str), flush=True)
"""

COLUMNS = PREAMBLE + """
assert type(spark).__module__.startswith("pyspark.sql.connect.")
labeled = reviews.withColumn("label", AF.classify_text("review", ["positive", "negative"], **hosted))
rows = labeled.where("stars >= 9").collect()
totals = ifr.last_run()
for _ in range(40):  # stored in the history once the action has ended
    stored = ifr.runs(limit=1).to_pylist()
    if stored and stored[0]["requests"] == 20:
        break
    time.sleep(0.25)
out(rows=len(rows), labels=sorted({r.label for r in rows}), requests=[t["requests"] for t in totals],
    done=[t["rows_done"] for t in totals], stored=stored[0])

notes = spark.createDataFrame([(1, f"fine {run}"), (2, f"BROKEN {run}"), (3, f"more {run}")], "id long, review string")
ask = AF.prompt("review", **hosted, max_retries=0)
rows = sorted(notes.select("id", ask.alias("a"), AF.ai_error(ask).alias("e")).collect(), key=lambda r: r.id)
out(answers=[r.a for r in rows], errors=[r.e for r in rows], counted=sum(t["errors"] for t in ifr.last_run()))
"""


def _run(server: ConnectServer, code: str, tmp_path, base_url: str, url: str | None = None):
    ran = run_script(code, tmp_path, url or server.url, base_url, env=user_env(server.home), timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:] + "\n--- server\n" + server.log()[-2000:]
    return [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]


def test_ai_columns_over_connect_send_only_the_kept_rows_and_a_failed_row_is_null(connect_server, tmp_path):
    with Simulator(SimulatorConfig(fail_rules=(FailRule(match="BROKEN", status=400, message="bad row"),))) as sim:
        kept, failed = _run(connect_server, COLUMNS, tmp_path, sim.base_url)
        sent = sim.stats()["total_requests"]
    assert kept["rows"] == 20 and set(kept["labels"]) <= {"positive", "negative"}
    assert kept["requests"] == [20] and kept["done"] == [20]  # last_run(): what the executors reported
    stored = kept["stored"]
    assert stored["requests"] == 20 and stored["status"] == "ok" and stored["rows"] == 20, stored
    assert failed["answers"][0] and failed["answers"][1] is None and failed["answers"][2]
    assert failed["errors"][0] is None and "bad row" in failed["errors"][1] and failed["errors"][2] is None
    assert failed["counted"] >= 1
    # 20 kept rows; then 3 notes, the failed one asked again by ai_error's own evaluation of the column at most
    assert 20 + 3 <= sent <= 20 + 4, sent


SQL = PREAMBLE + """
reviews.createOrReplaceTempView("reviews")
ifr.set_provider("openai", base_url=base_url, api_key="k-connect-sql")
out(names=inferframe.spark.register(spark, use_chat_completions=True))
rows = spark.sql("SELECT id, ai_classify(review, array('positive', 'negative'), model => 'gpt-5-mini') AS label "
                 "FROM reviews WHERE stars >= 9").collect()
out(rows=len(rows), labels=sorted({r.label for r in rows}), requests=sum(t["requests"] for t in ifr.last_run()))
"""


def test_spark_sql_ai_classify_over_connect_runs_after_the_where(connect_server, tmp_path):
    with Simulator(SimulatorConfig()) as sim:
        names, found = _run(connect_server, SQL, tmp_path, sim.base_url)
        sent = sim.stats()["total_requests"]
    assert {"ai_classify", "ai_complete", "ai_error"} <= set(names["names"])
    assert found["rows"] == 20 and set(found["labels"]) <= {"positive", "negative"}
    assert found["requests"] == 20 and sent == 20


UNSUPPORTED = PREAMBLE + """
from inferframe import col
from inferframe.functions import prompt

attempts = {
    "set_runner_spark": lambda: ifr.set_runner_spark(spark),
    "with_columns": lambda: inferframe.spark.with_columns(reviews, a=prompt(col("review"), **hosted)).count(),
}
for name, attempt in attempts.items():
    try:
        attempt()
        out(name=name, error=None)
    except Exception as e:
        out(name=name, error=type(e).__name__ + ": " + str(e))
# These need no SparkContext: Arrow in and out through the Connect session.
out(from_spark=ifr.from_spark(reviews.limit(3)).count_rows(),
    to_spark=ifr.from_pydict({"a": [1, 2]}).to_spark(spark).count())
"""


def test_what_needs_a_spark_context_stops_before_any_request_over_connect(connect_server, tmp_path):
    with Simulator(SimulatorConfig()) as sim:
        runner, with_columns, interop = _run(connect_server, UNSUPPORTED, tmp_path, sim.base_url)
        sent = sim.stats()["total_requests"]
    for found, what in ((runner, "The Spark runner (ifr.set_runner_spark(spark))"),
                        (with_columns, "inferframe.spark.with_columns()")):
        assert found["error"].startswith(f"ArgumentTypeError: {what} is not available over Spark Connect: "), found
        assert "Use a classic SparkSession (SparkSession.builder.master(...).getOrCreate())" in found["error"]
        assert "inferframe.spark.register(spark)" in found["error"]
    assert interop == {"from_spark": 3, "to_spark": 2}
    assert sent == 0


ELSEWHERE = """
import sys
from pyspark.sql import SparkSession
from inferframe.spark import functions as AF

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
try:
    AF.classify_text("review", ["positive", "negative"], provider="openai", base_url=sys.argv[2], api_key="k",
                     model="gpt-5-mini")
    print("made")
except Exception as e:
    print(type(e).__name__ + ": " + str(e), flush=True)
import os
os._exit(0)  # not pyspark's exit hook: it would try to release the session on the unreachable server for minutes
"""


def test_a_connect_server_on_another_machine_is_an_error_before_any_request(tmp_path):
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: the executors could not reach this client's service.
    with Simulator(SimulatorConfig()) as sim:
        ran = run_script(ELSEWHERE, tmp_path, "sc://192.0.2.1:15002", sim.base_url, timeout=120)
        sent = sim.stats()["total_requests"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.startswith("SparkEnvironmentError: the Spark Connect server at sc://192.0.2.1:15002 is not on "
                                 "this machine"), ran.stdout
    assert "No request was sent. Fix: start the Connect server on this machine" in ran.stdout
    assert sent == 0


def test_a_connect_server_without_inferframe_in_its_python_stops_before_any_request(tmp_path):
    # The server's PYSPARK_PYTHON names a Python without inferframe (a bare venv), as a server started with another one.
    from spark_cluster import bare_python

    bare = bare_python(tmp_path / "bare")
    with ConnectServer(tmp_path / "server", python=bare) as server, Simulator(SimulatorConfig()) as sim:
        ran = run_script(ELSEWHERE, tmp_path / "client", server.url, sim.base_url, env=user_env(server.home),
                         timeout=300)
        sent = sim.stats()["total_requests"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    line = ran.stdout.strip()
    assert line.startswith(f"SparkEnvironmentError: Spark's executors cannot run inferframe: the Spark Connect server "
                           f"at sc://127.0.0.1:{server.port} starts"), line
    assert "ModuleNotFoundError: No module named" in line and "No request was sent." in line
    assert f"PYSPARK_PYTHON={sys.executable} $SPARK_HOME/sbin/start-connect-server.sh" in line
    assert sent == 0


def readme_connect_block() -> str:
    """The Python block (```py: README tests run ```python blocks without a server) of README's "### Spark Connect"."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Spark Connect"):]
    section = section[:section.index("\n## ", 1)]
    return re.search(r"^```py\n(.*?)^```", section, re.S | re.M).group(1)


def test_the_readme_connect_example_runs_as_written_on_a_connect_server(connect_server, tmp_path):
    code = readme_connect_block()
    assert 'remote("sc://127.0.0.1:15002")' in code
    code = code.replace("sc://127.0.0.1:15002", connect_server.url)
    with Simulator(SimulatorConfig()) as sim:
        env = {**user_env(connect_server.home), "OPENAI_API_KEY": "sk-reader", "OPENAI_BASE_URL": sim.base_url}
        ran = run_script(code, tmp_path, env=env, timeout=300)
        sent = sim.stats()["total_requests"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.split() == ["2", "2", "2"], ran.stdout
    assert 2 <= sent <= 4  # 2 kept rows by the column; the same 2 texts again in SQL unless the cache answered
