"""A real Spark standalone cluster for the tests: a master and one worker, each its own JVM, as an operator starts them.

Both come from pyspark's own ``bin/spark-class`` (``org.apache.spark.deploy.master.Master``,
``org.apache.spark.deploy.worker.Worker``) on the loopback, on free ports, their logs in files. The
worker starts one executor JVM per application, and the executor starts its own Python workers: the
interpreter each runs is the one the application's SparkContext names, as on any cluster.

Programs that use the cluster run as a user runs a script: ``.venv/bin/python script.py`` with the
environment a user's shell has (``user_env``), never the test suite's variables.

Example:
    >>> with StandaloneCluster(tmp_path) as cluster:        # doctest: +SKIP
    ...     cluster.url
    'spark://127.0.0.1:40123'
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT_S = 180  # two JVMs on a loaded 2-core machine
# The JVMs the suite itself starts (its local session, a Connect server, a cluster's daemons; never a user's script's):
# C1 only and one GC thread. Their jobs are a few rows each, which C2's compiles and parallel GC threads never repay: on
# the 2-core machine tests/spark/test_sql_spark.py took 89 CPU-seconds with Java's defaults and 64 with these.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def user_env(home: Path | None = None) -> dict[str, str]:
    """The environment of a user's shell: PATH, HOME and LANG; nothing the suite sets (no PYSPARK_PYTHON).

    A checkout run with ``PYTHONPATH=src`` (a git worktree of the repository) keeps it, so that the code
    under test is what runs; an installed inferframe, as CI and users have, needs none.
    """
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home or os.environ.get("HOME", "/root")),
           "LANG": "C.UTF-8"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


README = Path(__file__).resolve().parents[2] / "README.md"


def short_jvm(code: str) -> str:
    """``code`` (a script the tests wrote, never a README copy) with its SparkSession's driver and executors on
    ``TEST_JVM_OPTIONS``.

    Each such script is a few rows in a new driver JVM, and on a cluster a new executor JVM too, whose C2
    compiles never repay; what the tests check (which Python runs, what is sent, what comes back) does not
    depend on the JIT. A user may write the same two ``.config`` lines; the README's own blocks run as written.
    On the 2-core machine a local session's start and first job took 14.7-15.6 CPU-seconds with Java's
    defaults and 8.6-8.7 with these.

    Example:
        >>> short_jvm("SparkSession.builder.master(m)").count("extraJavaOptions")
        2
    """
    assert code.count("SparkSession.builder.") == 1, "one session per script"
    return code.replace("SparkSession.builder.", "SparkSession.builder"
                        f'.config("spark.driver.extraJavaOptions", "{TEST_JVM_OPTIONS}")'
                        f'.config("spark.executor.extraJavaOptions", "{TEST_JVM_OPTIONS}").')



def readme_spark_block() -> str:
    """The first ```python block of README.md's "Running on Spark" section, as a reader copies it."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Running on Spark"):]
    section = section[:section.index("\n## ", 1)]
    return re.search(r"^```python\n(.*?)^```", section, re.S | re.M).group(1)


def bare_python(where: Path) -> str:
    """A Python of this version without inferframe: a new venv with nothing installed; its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    return str(where / "bin" / "python")


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free now (each socket is held until all are chosen, so none is chosen twice)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def run_script(code: str, where: Path, *args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """``code`` written to ``where/script.py`` and run as a user runs it: this venv's Python, a shell's environment."""
    where.mkdir(parents=True, exist_ok=True)
    script = where / "script.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script), *args], cwd=where, env=env or user_env(),
                          capture_output=True, text=True, timeout=timeout)


def die_with_parent() -> None:
    # A test process killed before its fixtures end (a timeout, a crash) must not leave two JVMs running:
    # the kernel sends each daemon SIGTERM when its parent dies (PR_SET_PDEATHSIG; spark-class execs java).
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


class StandaloneCluster:
    """A standalone master and one worker (``cores`` cores, ``memory``), started in ``root``; stopped on exit.

    ``home``: the HOME of the user who started it, on this one machine; the programs run on it get the same
    (so the executors and the driver share one response cache under ``~/.cache``, as one user's would).
    """

    def __init__(self, root: Path, cores: int = 2, memory: str = "2g") -> None:
        self.root, self.cores, self.memory = Path(root), cores, memory
        self.home = self.root / "home"
        self.port, self.ui_port, self.worker_ui_port = free_ports(3)
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []

    def _daemon(self, name: str, *args: str) -> None:
        env = {**user_env(self.home), "SPARK_HOME": str(SPARK_HOME),  # spark-class needs Spark's place, as an operator sets it
               # No REST submission server: its fixed port 6066 would clash with another cluster on this machine.
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false", "SPARK_DAEMON_JAVA_OPTS": TEST_JVM_OPTIONS}
        log = open(self.root / f"{name}.log", "wb")
        self.processes.append(subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=env,
                                               stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
                                               preexec_fn=die_with_parent))
        log.close()

    def start(self) -> "StandaloneCluster":
        (self.root / "work").mkdir(parents=True, exist_ok=True)
        self.home.mkdir(exist_ok=True)
        self._daemon("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(self.port), "--webui-port", str(self.ui_port))
        self._daemon("worker", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                     "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(self.root / "work"),
                     "--webui-port", str(self.worker_ui_port))
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.processes):
                break
            if self.state().get("aliveworkers") == 1:
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the standalone cluster did not start within {START_TIMEOUT_S} s:\n{self.logs()[-3000:]}")

    def state(self) -> dict:
        """The master's own report (its web UI's /json): workers, cores, applications."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
                found = json.loads(r.read())
        except (OSError, ValueError):  # not up yet (a starting UI may answer with an HTML page)
            return {}
        return found if found.get("url") == self.url else {}

    def logs(self) -> str:
        return "".join(f"--- {p.name}\n{p.read_text(errors='replace')}" for p in sorted(self.root.glob("*.log")))

    def stop(self) -> None:
        for p in reversed(self.processes):
            p.terminate()  # the worker ends its executors as it stops
        for p in reversed(self.processes):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.processes.clear()

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
