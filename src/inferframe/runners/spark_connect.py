"""Spark Connect sessions (``SparkSession.builder.remote("sc://...")``): what AI work runs through them, and how.

A Connect client has no SparkContext and no JVM: no ``sparkContext``, no status tracker, no
``parallelize``, no ``pythonExec`` to set. What inferframe does instead:

- the AI columns (``inferframe.spark.functions``) and Spark SQL functions (``inferframe.spark.register``)
  are Arrow UDFs, which Connect ships to the server as they are; their tasks reach the session's
  service (keys, the one budget, counters) in this client process over the loopback, so the Connect
  server must run on this machine (``connect_host``: an error before any request where it does not);
- the executors' Python is the server's: Spark Connect starts Python workers with the server's
  ``PYSPARK_PYTHON`` (its ``spark.pyspark.python`` conf is not read), set when the server is started;
  one tiny UDF checks it imports this inferframe (``runners.spark_python``) before any request;
- a Spark action's end, which a classic session reads from its status tracker, comes from the
  client's progress handler (``ConnectActivity``): each action's totals are ``ifr.last_run()`` and a run
  of the history once it has ended;
- the Spark runner (``set_runner_spark``) and ``inferframe.spark.with_columns`` plan with the
  SparkContext: ``require_classic`` stops them with an error that names the fix.

Example:
    >>> is_connect(object())
    False
    >>> ConnectActivity().busy()
    False
"""

from __future__ import annotations

import socket
import threading
import weakref
from typing import Any, Callable

from inferframe.errors import ArgumentTypeError, SparkEnvironmentError

__all__ = ["is_connect", "require_classic", "connect_host", "server_endpoint", "ConnectActivity", "stopped"]

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0")
START_SERVER = ("PYSPARK_PYTHON=<a Python with inferframe> $SPARK_HOME/sbin/start-connect-server.sh "
                "--master 'local[*]' (SPARK_HOME: the installed pyspark's folder)")


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` (a SparkSession or a DataFrame) is of a Spark Connect client.

    Example:
        >>> is_connect("not a session")
        False
    """
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def server_endpoint(spark: Any) -> str:
    """The Connect server's ``host:port`` as the client was told it (``sc://host:port``), or ``"?"``."""
    builder = getattr(getattr(spark, "client", None), "_builder", None)  # pyspark keeps the channel's builder there
    return str(getattr(builder, "endpoint", "?"))


def _this_machine(host: str) -> bool:
    if host.lower() in LOOPBACK:
        return True
    try:
        names = {socket.gethostname(), socket.getfqdn()}
        addresses = {socket.gethostbyname(n) for n in names}
    except OSError:  # no name for this machine: only the loopback counts
        return False
    return host in names or host in addresses


def connect_host(spark: Any) -> str:
    """The address the session's service listens on for a Connect server's executors: this machine's loopback.

    The service runs in this client process, and the executors' Python workers call it for each batch
    (keys, leases, counters): they reach it only when the Connect server runs on this machine.

    Raises:
        SparkEnvironmentError: the server is elsewhere; before any request.
    """
    endpoint = server_endpoint(spark)
    host = endpoint.rsplit(":", 1)[0] if ":" in endpoint else endpoint
    if not _this_machine(host.strip("[]") if host.startswith("[") else host):
        found = (f"the Spark Connect server at sc://{endpoint} is not on this machine: inferframe's AI columns call "
                 f"a service in this client process (keys, the shared rate limits and budget, counters) from the "
                 f"executors, over this machine's loopback")
        fix = (f"start the Connect server on this machine ({START_SERVER}) and connect to sc://127.0.0.1:<port>, "
               f"or use a classic SparkSession (SparkSession.builder.master(...).getOrCreate()) on the cluster")
        raise SparkEnvironmentError(f"{found}. No request was sent. Fix: {fix}.", found=found, fix=fix)
    return "127.0.0.1"


def require_classic(spark: Any, what: str) -> None:
    """Stop ``what`` before any request when ``spark`` (a session or a DataFrame) is of Spark Connect.

    Example:
        >>> require_classic(None, "set_runner_spark()")
    """
    if is_connect(spark):
        raise ArgumentTypeError(
            f"{what} is not available over Spark Connect: it plans with the SparkContext (job groups, partitions, "
            f"the status tracker), which a Connect client does not have. Use a classic SparkSession "
            f"(SparkSession.builder.master(...).getOrCreate()), or over Connect the column functions "
            f"(from inferframe.spark import functions as AF; sdf.withColumn('label', AF.classify_text('review', "
            f"[...]))) and the Spark SQL functions (inferframe.spark.register(spark)).")


def stopped(session_ref: Callable[[], Any]) -> bool:
    """Whether the Connect session is gone or stopped (a service of the session then ends)."""
    session = session_ref()
    return session is None or bool(getattr(session, "is_stopped", True))


class ConnectActivity:
    """Whether a Connect session has a Spark action running with AI work, from the client's progress handler.

    Registered with ``spark.registerProgressHandler``: the client calls it with ``done=True`` as each
    action ends. An AI task's report (``reported``) comes before its batch's answers reach Spark, so once
    an action has ended after the latest report, the session runs no AI work now.

    Parameters:
        session: the Connect session (held weakly); None: never stopped (tests, the docstring).

    Example:
        >>> activity = ConnectActivity()
        >>> activity.reported(); activity.busy()
        True
        >>> activity(stages=[], inflight_tasks=0, operation_id="op", done=True); activity.busy()
        False
    """

    def __init__(self, session: Any = None) -> None:
        self._session = weakref.ref(session) if session is not None else None
        self._lock = threading.Lock()
        self._seq = 0
        self._report = 0  # the sequence number of the latest report
        self._done = 0  # ... of the latest end of an action

    def __call__(self, stages: Any = None, inflight_tasks: int = 0, operation_id: str | None = None,
                 done: bool = False) -> None:
        if done:
            with self._lock:
                self._seq += 1
                self._done = self._seq

    def reported(self) -> None:
        """An AI task reported counters: its action runs until the client sees it end."""
        with self._lock:
            self._seq += 1
            self._report = self._seq

    def busy(self) -> bool:
        """Whether an action reported AI work and has not ended since; raises once the session stopped."""
        if self._session is not None and stopped(self._session):
            raise RuntimeError("the Spark Connect session stopped")
        with self._lock:
            return self._report > self._done

    def watching(self, on_change: Callable[[Any, str], None]) -> Callable[[Any, str], None]:
        """``on_change`` (a service's listener) that first marks the report (``reported``)."""

        def changed(service: Any, key: str) -> None:
            self.reported()
            on_change(service, key)

        return changed
