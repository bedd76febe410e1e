"""A real local Spark Connect server for the tests, started as a user starts one: pyspark's ``bin/spark-submit``
with the ``SparkConnectServer`` class (what ``sbin/start-connect-server.sh`` runs, without its daemon wrapper),
``--master local[2]``, on a free loopback port.

The executors' Python is the server's ``PYSPARK_PYTHON``, set in the server's environment at its start,
as the README tells a user: Spark Connect reads no Python setting from its clients.

Example:
    >>> with ConnectServer(tmp_path, python=sys.executable) as server:   # doctest: +SKIP
    ...     server.url
    'sc://127.0.0.1:40123'
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from spark_cluster import SPARK_HOME, TEST_JVM_OPTIONS, die_with_parent, free_ports, user_env

START_TIMEOUT_S = 180  # one JVM on a loaded 2-core machine
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ConnectServer:
    """A Spark Connect server on ``127.0.0.1``, its log in ``root/connect.log``; stopped on exit (or with this process).

    Parameters:
        root: its working folder (and its user's HOME, so the executors share the client's response cache folder).
        python: the executors' Python (the server's ``PYSPARK_PYTHON``); None: unset, as a server started bare.
    """

    def __init__(self, root: Path, python: str | None) -> None:
        self.root, self.python = Path(root), python
        self.home = self.root / "home"
        (self.port,) = free_ports(1)
        self.url = f"sc://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> "ConnectServer":
        self.home.mkdir(parents=True, exist_ok=True)
        env = {**user_env(self.home), "SPARK_HOME": str(SPARK_HOME)}
        if self.python:
            env["PYSPARK_PYTHON"] = self.python
        command = [str(SPARK_HOME / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", "local[2]",
                   "--name", "Spark Connect server", "--conf", f"spark.connect.grpc.binding.port={self.port}",
                   "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false",
                   "--conf", "spark.driver.memory=1g", "--conf", "spark.sql.shuffle.partitions=4",
                   "--driver-java-options", TEST_JVM_OPTIONS]
        with open(self.root / "connect.log", "wb") as log:
            # spark-submit execs spark-class, which execs java: the server is this process, and dies with the tests.
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
                                            preexec_fn=die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
                return self
            except OSError:  # not listening yet
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the Spark Connect server did not start within {START_TIMEOUT_S} s:\n{self.log()[-3000:]}")

    def log(self) -> str:
        return (self.root / "connect.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self) -> "ConnectServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
