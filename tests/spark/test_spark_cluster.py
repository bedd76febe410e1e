"""On a real Spark standalone cluster: a master and a worker, each its own JVM, whose executor starts its own Python workers.

Each test runs its program as a user runs a script on the cluster's machine: this venv's Python with a
shell's environment (tests/spark/spark_cluster.py), its own driver (one process cannot hold the test
session's local SparkContext and another). The OpenAI-compatible simulator counts the requests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from spark_cluster import bare_python, readme_spark_block, run_script, short_jvm, user_env

import inferframe as ifr
from inferframe.simulator import Simulator, SimulatorConfig

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def test_the_readme_spark_section_runs_on_a_standalone_cluster_with_nothing_set(standalone, tmp_path):
    code = readme_spark_block().replace('master("local[2]")', f'master("{standalone.url}")')
    assert standalone.url in code
    with Simulator(SimulatorConfig()) as sim:
        env = {**user_env(standalone.home), "OPENAI_API_KEY": "sk-reader", "OPENAI_BASE_URL": sim.base_url}
        ran = run_script(code, tmp_path, env=env)
        sent = sim.stats()["total_requests"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.split() == ["2", "1"], ran.stdout
    assert sent == 2  # the AI column ran on the cluster's executor
    assert standalone.state()["completedapps"], "the script ran as an application of the standalone master"


NO_INFERFRAME = short_jvm("""
import sys
import inferframe as ifr
import inferframe.spark
from inferframe import col
from inferframe.functions import prompt
from pyspark.sql import SparkSession

master, python, base_url = sys.argv[1:4]
spark = SparkSession.builder.master(master).config("spark.pyspark.python", python).getOrCreate()
ask = prompt(col("body"), provider="openai", base_url=base_url, api_key="k", model="gpt-5-mini")
attempts = [lambda: inferframe.spark.with_columns(spark.createDataFrame([("a",)], "body string"), a=ask).count()]
ifr.set_runner_spark(spark)
attempts.append(lambda: ifr.from_pydict({"body": ["a"]}).with_column("a", ask).count_rows())
for attempt in attempts:
    try:
        attempt()
        print("ran")
    except Exception as e:
        print(type(e).__name__ + ": " + str(e).replace(chr(10), " | "))
""")


def test_a_python_without_inferframe_stops_the_first_job_before_any_request(standalone, tmp_path):
    python = bare_python(tmp_path / "bare")
    with Simulator(SimulatorConfig()) as sim:
        ran = run_script(NO_INFERFRAME, tmp_path, standalone.url, python, sim.base_url, env=user_env(standalone.home))
        sent = sim.stats()["total_requests"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    lines = ran.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("SparkEnvironmentError: ") for line in lines), ran.stdout
    for line in lines:  # with_columns, then the runner: each stops at the check
        assert f"they start {python!r} (chosen by spark.pyspark.python)" in line
        assert "cannot import inferframe (ModuleNotFoundError: No module named" in line  # (in a checkout: pyarrow)
        assert 'spark.archives", "env.tar.gz#environment"' in line and "venv-pack -p " in line
        assert " | " not in line and "Traceback" not in line  # one line of what went wrong, not Spark's trace
    assert sent == 0


PACKED = short_jvm("""
import sys
import inferframe.spark
from inferframe import col
from inferframe.functions import prompt
from inferframe.runners.spark_python import executor_python
from pyspark.sql import SparkSession

master, base_url = sys.argv[1:3]
spark = (SparkSession.builder.master(master)
         .config("spark.archives", "env.tar.gz#environment")
         .config("spark.pyspark.python", "./environment/bin/python").getOrCreate())
print(executor_python(spark).executable)
print(spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("inferframe").__file__).collect()[0])
sdf = spark.createDataFrame([("good",), ("bad",)], "body string")
out = inferframe.spark.with_columns(sdf, a=prompt(col("body"), provider="openai", base_url=base_url, api_key="k",
                                                  model="gpt-5-mini")).collect()
print(sum(r.a is not None for r in out))
""")


def _pack_a_venv_with_inferframe(where: Path) -> Path:
    """A small venv (inferframe, not editable, with its base dependencies) packed by venv-pack; the archive."""
    source = where / "source"  # the package's files only: pip builds in the tree it is given
    shutil.copytree(ROOT / "src" / "inferframe", source / "src" / "inferframe",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    venv = where / "venv"
    # The wheel a user installs from PyPI, built by this venv's setuptools (no isolated build environment to make).
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(where / "dist"), str(source)], check=True, timeout=300)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    # --no-compile, --compress-level 1: the executor compiles what it imports, and the archive crosses no network
    # here (on the 2-core machine: pip 43 -> 39 s, packing 15.6 -> 7.9 s; the archive 115 -> 110 MB). This venv's
    # pip installs into the new one (--python): no pip of its own to bootstrap, as venv-pack needs none.
    wheel = next((where / "dist").glob("inferframe-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-compile", str(wheel), "venv-pack"], check=True, timeout=600)
    archive = where / "env.tar.gz"
    subprocess.run([str(venv / "bin" / "venv-pack"), "-p", str(venv), "-o", str(archive), "--compress-level", "1"],
                   check=True, timeout=600, capture_output=True)
    return archive


def test_a_venv_packed_with_venv_pack_and_shipped_with_spark_archives_runs_the_job(standalone, tmp_path):
    started = time.monotonic()
    archive = _pack_a_venv_with_inferframe(tmp_path / "pack")
    packed_s = time.monotonic() - started
    shutil.copy(archive, tmp_path / "env.tar.gz")
    with Simulator(SimulatorConfig()) as sim:
        ran = run_script(PACKED, tmp_path, standalone.url, sim.base_url, env=user_env(standalone.home))
        sent = sim.stats()["total_requests"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    executable, module, answered = ran.stdout.split()
    # The executor unpacked the archive in its own directory and runs the venv's interpreter from there.
    assert executable.startswith(str(standalone.root / "work")) and executable.endswith("/environment/bin/python")
    if "PYTHONPATH" not in user_env():  # (a checkout run with PYTHONPATH=src hands the cluster its source instead)
        assert "/environment/lib/python3" in module and module.startswith(str(standalone.root / "work")), module
    assert answered == "2" and sent == 2
    print(f"packing the venv took {packed_s:.0f} s")


CHECKS = short_jvm("""
import pathlib
import sys

sys.path.insert(0, sys.argv[2])  # tests/spark: the checks the local session's tests run
import spark_checks
from pyspark.sql import SparkSession

spark = SparkSession.builder.master(sys.argv[1]).getOrCreate()
spark_checks.check_a_plan_matches_local(spark, spark_checks.write_data(pathlib.Path("in")), pathlib.Path("."))
print("the plan matches the local runner")
spark_checks.check_shared_limit(spark)
print("the executors share the limit")
""")


def test_the_local_comparison_and_the_shared_limit_hold_on_the_cluster(standalone, tmp_path):
    # One driver for both (a session's start is the slow part): the tests/spark checks of test_spark_runner.py
    # (read, filter, @func, prompt, sort, groupby, join, write equal the local runner's) and test_spark_limits.py.
    ran = run_script(CHECKS, tmp_path, standalone.url, str(HERE), env=user_env(standalone.home))
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert ran.stdout.splitlines() == ["the plan matches the local runner", "the executors share the limit"]


INFERFRAME = Path(sys.executable).parent / "inferframe"  # the venv's command, as a user runs it


def _doctor(master: str, env: dict) -> tuple[int, dict]:
    ran = subprocess.run([str(INFERFRAME), "doctor", "--spark", master, "--json"],
                         env=env, capture_output=True, text=True, timeout=600)
    rows = {row["name"]: row for row in json.loads(ran.stdout)}
    return ran.returncode, rows["spark executors"]


def test_doctor_spark_reports_the_executors_python_or_the_fix(standalone, tmp_path):
    code, row = _doctor(standalone.url, user_env(standalone.home))
    assert code == 0 and row["status"] == "ok", row
    driver = INFERFRAME.read_text().splitlines()[0].removeprefix("#!")  # the command's interpreter: the driver's
    assert f"the executors run {driver} (chosen by the driver's interpreter)" in row["found"], row
    assert f"import inferframe {ifr.__version__}" in row["found"]

    python = bare_python(tmp_path / "bare")
    code, row = _doctor(standalone.url, {**user_env(standalone.home), "PYSPARK_PYTHON": python})
    assert code == 1 and row["status"] == "fail", row
    assert python in row["found"] and "cannot import inferframe" in row["found"]
    assert "spark.archives" in row["fix"] and "./environment/bin/python" in row["fix"]
