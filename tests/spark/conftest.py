"""One local Spark (``local[2,4]``: 2 cores, task retries) for the whole test session: one JVM, started at the first test that asks.

Every test in tests/spark is marked ``spark``: ``pytest -m spark`` runs them alone. Nothing tells the
Python workers which interpreter to run: inferframe makes them run the driver's, as for a user who set
nothing. ``standalone``: a real standalone cluster (a master and a worker, each its own JVM) for the
tests that run scripts on it (tests/spark/spark_cluster.py).
"""

import contextlib
import os

import pytest
from group_scope import until_group_ends
from spark_cluster import TEST_JVM_OPTIONS, StandaloneCluster


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/spark/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark_log(tmp_path_factory):
    """The file Spark's JVM writes its logs to (its stderr: the driver's, the executors' and the Python workers')."""
    return tmp_path_factory.mktemp("spark-log") / "jvm.log"


@pytest.fixture(scope="session")
def spark(tmp_path_factory, spark_log):
    """A local SparkSession with 2 cores, stopped at the end of the session.

    ``local[2,4]``: two task slots, and a failed task is tried up to 4 times as on a cluster (plain
    ``local[2]`` never retries a task). The event log (what the Spark UI shows) is on, so a test can read it.
    """
    os.environ.setdefault("INFERFRAME_PROGRESS", "0")
    from pyspark.sql import SparkSession

    saved = os.dup(2)
    log = open(spark_log, "ab")
    os.dup2(log.fileno(), 2)  # the JVM started now inherits it as its stderr
    try:
        session = (SparkSession.builder.master("local[2,4]").appName("inferframe-tests")
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", "4")
                   .config("spark.sql.execution.arrow.pyspark.enabled", "true")
                   .config("spark.driver.memory", "1g")
                   .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
                   .config("spark.python.worker.reuse", "true")
                   .config("spark.eventLog.enabled", "true")
                   .config("spark.eventLog.dir", str(tmp_path_factory.mktemp("spark-events")))
                   .config("spark.eventLog.compress", "false")  # plain JSON lines a test can read
                   .getOrCreate())
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        log.close()
    session.sparkContext.setLogLevel("ERROR")
    until_group_ends(session.stop)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def standalone(tmp_path_factory):
    """A Spark standalone master and one worker (2 cores, 2 GiB), started once, stopped after its file's last test."""
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(StandaloneCluster(tmp_path_factory.mktemp("standalone")))
        until_group_ends(stack.close)
        yield cluster


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """A local Spark Connect server (``local[2]``) whose executors run this venv's Python, as the README starts one."""
    import sys

    from connect_server import ConnectServer

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(ConnectServer(tmp_path_factory.mktemp("connect"), python=sys.executable))
        until_group_ends(stack.close)
        yield server
