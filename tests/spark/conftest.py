"""One local Spark (``local[2,4]``: 2 cores, task retries) for the whole test session: one JVM, started at the first test that asks.

Every test in tests/spark is marked ``spark``: ``pytest -m spark`` runs them alone. The Python workers
run this venv's Python (``PYSPARK_PYTHON``), so they import the same inferframe.
"""

import os
import sys

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/spark/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark():
    """A local SparkSession with 2 cores, stopped at the end of the session.

    ``local[2,4]``: two task slots, and a failed task is tried up to 4 times as on a cluster (plain
    ``local[2]`` never retries a task).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("INFERFRAME_PROGRESS", "0")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2,4]").appName("inferframe-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.driver.memory", "1g")
               .config("spark.python.worker.reuse", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
