"""The executors' Python on a local master: the driver's own when the user set none, the user's when set.

Spark's workers start ``PYSPARK_PYTHON``, else ``python3``: a system Python without inferframe, where every
task failed with 20 lines ending in ``ModuleNotFoundError: No module named 'inferframe'``. These tests
start the product as a user does: a script run by this venv's Python with a shell's environment
(PATH, HOME, LANG), nothing of the suite's (spark_cluster.user_env). The README's own block on ``local[2]`` runs
as a reader runs it in tests/test_readme.py (workers without inferframe fail its job: the reader's script exits
non-zero); tests/spark/test_spark_cluster.py runs it on a standalone cluster and counts its requests.
"""

from __future__ import annotations

import sys

from spark_cluster import bare_python, run_script, short_jvm, user_env

import inferframe as ifr


def test_the_test_sessions_workers_run_this_python_and_no_check_task_on_a_local_master(spark):
    from inferframe.runners.spark_python import executor_python

    found = executor_python(spark)
    assert found.python == sys.executable == spark.sparkContext.pythonExec
    assert found.chosen_by == "the driver's interpreter" and not found.checked  # no task was run for it
    assert spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable).collect() == [sys.executable]
    assert executor_python(spark) is found  # once per SparkContext


SCRIPT = short_jvm("""
import inferframe.spark
from inferframe import col
from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[2]").getOrCreate()
try:
    inferframe.spark.with_columns(spark.range(2), twice=col("id") * 2).count()
except Exception as e:
    print(type(e).__name__)
    print(e)
""")


def test_a_users_pyspark_python_is_kept_and_a_python_without_inferframe_is_one_clear_error(tmp_path):
    python = bare_python(tmp_path / "bare")
    ran = run_script(SCRIPT, tmp_path, env={**user_env(tmp_path), "PYSPARK_PYTHON": python})
    assert ran.returncode == 0, ran.stderr[-3000:]
    name, message = ran.stdout.split("\n", 1)
    assert name == "SparkEnvironmentError", ran.stdout
    assert f"{python!r} (chosen by PYSPARK_PYTHON)" in message
    # (No module named 'inferframe'; in a checkout run with PYTHONPATH=src, its first dependency's name.)
    assert "cannot import inferframe (ModuleNotFoundError: No module named" in message
    assert f"set PYSPARK_PYTHON to a Python that has inferframe {ifr.__version__} (this one: {sys.executable})" in message
    assert "Traceback" not in message and "\tat " not in message  # one line of what went wrong, not Spark's trace
