"""The executors' Python on a local master: the driver's own when the user set none, the user's when set.

Spark's workers start ``PYSPARK_PYTHON``, else ``python3``: a system Python without inferframe, where every
task failed with 20 lines ending in ``ModuleNotFoundError: No module named 'inferframe'``. These tests
start the product as a user does: a script run by this venv's Python with a shell's environment
(PATH, HOME, LANG), nothing of the suite's (spark_cluster.user_env).
"""

from __future__ import annotations

import sys

from spark_cluster import bare_python, readme_spark_block, run_script, user_env

import inferframe as ifr
from inferframe.simulator import Simulator, SimulatorConfig


def test_the_readme_spark_section_runs_on_local_2_with_nothing_set(tmp_path):
    code = readme_spark_block()
    assert 'master("local[2]")' in code and "with_columns" in code and "count_rows()" in code
    with Simulator(SimulatorConfig()) as sim:
        env = {**user_env(tmp_path), "OPENAI_API_KEY": "sk-reader", "OPENAI_BASE_URL": sim.base_url}
        ran = run_script(code, tmp_path / "reader", env=env)
        sent = sim.stats()["total_requests"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.split() == ["2", "1"], ran.stdout
    assert sent == 2  # the AI column ran, in Spark's Python workers


def test_the_test_sessions_workers_run_this_python_and_no_check_task_on_a_local_master(spark):
    from inferframe.runners.spark_python import executor_python

    found = executor_python(spark)
    assert found.python == sys.executable == spark.sparkContext.pythonExec
    assert found.chosen_by == "the driver's interpreter" and not found.checked  # no task was run for it
    assert spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable).collect() == [sys.executable]
    assert executor_python(spark) is found  # once per SparkContext


SCRIPT = """
import inferframe.spark
from inferframe import col
from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[2]").getOrCreate()
try:
    inferframe.spark.with_columns(spark.range(2), twice=col("id") * 2).count()
except Exception as e:
    print(type(e).__name__)
    print(e)
"""


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
