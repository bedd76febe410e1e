"""The Python that Spark's executors run: the driver's own unless the user chose one, checked on a cluster.

Spark starts every executor's Python workers with ``SparkContext.pythonExec``, which pyspark takes from
``PYSPARK_PYTHON`` once, when the context starts, else ``"python3"``: on most machines a system Python
without inferframe, and each task of the job failed with 20 lines ending in ``ModuleNotFoundError``.
``spark.pyspark.python`` is read only by ``spark-submit`` and the ``pyspark`` shell; a script run with
``python`` ignores it. So, once per SparkContext, before its first inferframe job:

- the interpreter: ``spark.pyspark.python`` when set (as spark-submit, it wins), else ``PYSPARK_PYTHON``
  as the context read it, else the driver's own ``sys.executable``;
- over Spark Connect (no SparkContext), the server's ``PYSPARK_PYTHON``, set when it was started: one tiny
  UDF checks it, as below (``spark_connect``);
- on a local master running the driver's own interpreter, nothing more: the tasks run on this machine;
- else one tiny task reports its ``sys.executable`` and ``inferframe.__version__``; a Python that does not
  start, lacks inferframe or has another version raises :class:`~inferframe.errors.SparkEnvironmentError`
  before any request, naming the interpreter, the one line that went wrong and how to ship the
  environment (a packed venv through ``spark.archives``). ``inferframe doctor --spark URL`` runs it too.

Example:
    >>> from pyspark.sql import SparkSession                              # doctest: +SKIP
    >>> spark = SparkSession.builder.master("local[2]").getOrCreate()     # doctest: +SKIP
    >>> ensure_executor_python(spark)                                     # doctest: +SKIP
    >>> spark.sparkContext.pythonExec == sys.executable                   # doctest: +SKIP
    True
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import threading
import uuid
import weakref
from typing import Any

from inferframe.errors import SparkEnvironmentError
from inferframe.runners.spark_connect import connect_host, is_connect, server_endpoint

CONF = "spark.pyspark.python"
CHECK_TIMEOUT_S = 120.0  # a cluster with no free executor never runs the task: an error, not a hang
# Masters whose tasks run on this machine (local-cluster's executors too, in JVMs of their own).
_THIS_MACHINE = re.compile(r"local(\[[^\]]*\])?$|local-cluster\[")
# The one line that says what went wrong, in a failed job's many (Java's trace, the worker's traceback).
_CAUSES = (re.compile(r'Cannot run program "[^"]*"[^\n]*'), re.compile(r"\[PYTHON_VERSION_MISMATCH\][^\n]*"),
           re.compile(r"(?:ModuleNotFoundError|ImportError): [^\n]*"))


@dataclasses.dataclass(frozen=True)
class ExecutorPython:
    """What the executors run: the interpreter they were told, who chose it, and what a task reported.

    Parameters:
        python: ``SparkContext.pythonExec``, the path or name each executor starts.
        chosen_by: ``"spark.pyspark.python"``, ``"PYSPARK_PYTHON"`` or ``"the driver's interpreter"``.
        executable: the ``sys.executable`` a task reported; None where no task was run (a local master).
        version: the inferframe version a task imported; None where no task was run.

    Example:
        >>> ExecutorPython("/venv/bin/python", "the driver's interpreter").checked
        False
    """

    python: str
    chosen_by: str
    executable: str | None = None
    version: str | None = None

    @property
    def checked(self) -> bool:
        return self.executable is not None


# SparkContext -> what its executors run: the interpreter chosen once, and what the check task found once it passed.
_CHECKED: "weakref.WeakKeyDictionary[Any, ExecutorPython]" = weakref.WeakKeyDictionary()
_CHECK_LOCK = threading.Lock()


def ensure_executor_python(spark: Any) -> None:
    """Make ``spark``'s executors run a Python that imports this inferframe, or raise before any request.

    Idempotent per SparkContext: the first call chooses the interpreter (see the module's docstring) and,
    on a cluster, runs one tiny task; once it passed, later calls return at once (a failed one runs again).

    Parameters:
        spark: a SparkSession (or its SparkContext).

    Raises:
        SparkEnvironmentError: the executors' Python does not start, lacks inferframe or has another version.

    Example:
        >>> ensure_executor_python(spark)   # doctest: +SKIP
    """
    executor_python(spark)


def executor_python(spark: Any, timeout_s: float = CHECK_TIMEOUT_S) -> ExecutorPython:
    """What ``spark``'s executors run, chosen and checked as :func:`ensure_executor_python` does.

    Parameters:
        spark: a SparkSession (or its SparkContext).
        timeout_s: how long the check task may wait for an executor.

    Example:
        >>> executor_python(spark).python   # doctest: +SKIP
        '/home/me/project/.venv/bin/python'
    """
    if is_connect(spark):
        return _connect_python(spark, timeout_s)
    sc = getattr(spark, "sparkContext", spark)
    with _CHECK_LOCK:
        chosen = _CHECKED.get(sc)
        if chosen is None:  # chosen once: after the first choice, pythonExec is no longer the user's alone
            chosen = _CHECKED[sc] = _choose(sc)
        if not chosen.checked:  # a failed check is run again at the next job (the cluster may have changed)
            chosen = _CHECKED[sc] = _check(sc, chosen, timeout_s)
        return chosen


CONNECT_CHOOSER = "the Connect server's PYSPARK_PYTHON"


def _connect_python(spark: Any, timeout_s: float) -> ExecutorPython:
    """What a Connect server's Python workers run, as one tiny UDF found it; the error, before any request, if not this inferframe."""
    connect_host(spark)  # a server elsewhere is an error of its own, before a check that would wait on it
    with _CHECK_LOCK:
        chosen = _CHECKED.get(spark)
        if chosen is not None and chosen.checked:
            return chosen
        executable, version, problem = _run_connect_probe(spark, timeout_s)
        if problem is None and version != driver_version():
            problem = f"imports inferframe {version}, not this client's {driver_version()}"
        if problem is not None:
            python = executable or "its PYSPARK_PYTHON (python3 when unset)"
            remedy = (f"start the Connect server with a Python that has inferframe {driver_version()} (this one: "
                      f"{sys.executable}): PYSPARK_PYTHON={sys.executable} $SPARK_HOME/sbin/start-connect-server.sh "
                      f"--master 'local[*]'. Spark Connect starts the workers with the server's PYSPARK_PYTHON, not "
                      f"with spark.pyspark.python nor with anything this client sets")
            found = (f"Spark's executors cannot run inferframe: the Spark Connect server at sc://{server_endpoint(spark)} "
                     f"starts {python!r} ({CONNECT_CHOOSER}), which {problem}")
            raise SparkEnvironmentError(f"{found}. No request was sent. Fix: {remedy}.", found=found, fix=remedy)
        chosen = _CHECKED[spark] = ExecutorPython(executable, CONNECT_CHOOSER, executable, version)
        return chosen


def _as_list(probe: Any) -> Any:
    # A lambda made here is shipped by value with the probe it calls: a UDF's result is a list, not a tuple.
    return lambda _: list(probe(_))


def _run_connect_probe(spark: Any, timeout_s: float) -> tuple[str | None, str | None, str | None]:
    """``_run_probe`` over Spark Connect: a UDF over one row (no ``parallelize``), cancelled by its tag."""
    from pyspark.sql import functions as F

    tag = f"inferframe-python-check-{uuid.uuid4().hex[:8]}"

    def task() -> tuple:
        spark.addTag(tag)  # this thread's actions only: interruptTag cancels just the check
        return tuple(spark.range(1).select(F.udf(_as_list(_probe_task()), "array<string>")("id").alias("p")).first().p)

    return _on_thread(task, lambda: spark.interruptTag(tag), timeout_s,
                      "the Connect server's executors took none")


def _choose(sc: Any) -> ExecutorPython:
    """The interpreter the executors start, set on ``sc``: the user's choice, else the driver's own."""
    conf = sc.getConf().get(CONF)
    if conf:
        sc.pythonExec = conf  # pyspark reads the conf only under spark-submit; as there, it wins over the variable
        return ExecutorPython(conf, CONF)
    # pyspark read PYSPARK_PYTHON when the context started; "python3" is its default, not the user's choice.
    if "PYSPARK_PYTHON" in os.environ or sc.pythonExec != "python3":
        return ExecutorPython(sc.pythonExec, "PYSPARK_PYTHON")
    sc.pythonExec = sys.executable
    return ExecutorPython(sys.executable, "the driver's interpreter")


def _same_path(a: str, b: str) -> bool:
    # By path, not by file: every venv's bin/python links to the same base interpreter, each with its own packages.
    return os.path.abspath(a) == os.path.abspath(b)


def _check(sc: Any, chosen: ExecutorPython, timeout_s: float) -> ExecutorPython:
    """``chosen`` as one tiny task found it; on a local master running this interpreter, no task is needed."""
    if _THIS_MACHINE.match(sc.master) and _same_path(chosen.python, sys.executable):
        return chosen
    executable, version, problem = _run_probe(sc, timeout_s)
    if problem is None and version != driver_version():
        problem = f"imports inferframe {version}, not the driver's {driver_version()}"
    if problem is not None:
        raise _error(sc, chosen, problem)
    return dataclasses.replace(chosen, executable=executable, version=version)


def driver_version() -> str:
    """This process's inferframe version (``inferframe.__version__``).

    Example:
        >>> driver_version() == __import__("inferframe").__version__
        True
    """
    # The root package is loaded whenever one of its modules is; a runner may not import it (the layers' rule).
    return sys.modules["inferframe"].__version__


def _probe_task():
    """The check task's function, defined here so that cloudpickle ships it by value: it must run, and say
    what it found, in a Python that has no inferframe (or another one)."""

    def probe(_):
        import importlib
        import sys

        try:  # whether it imports there, in the executors' Python (not a use of it by this layer)
            found = importlib.import_module("inferframe")
        except Exception as e:  # what a task would fail with, as data: one line, no traceback
            return sys.executable, None, f"cannot import inferframe ({type(e).__name__}: {e})"
        return sys.executable, getattr(found, "__version__", "unknown"), None

    return probe


def _run_probe(sc: Any, timeout_s: float) -> tuple[str | None, str | None, str | None]:
    """(the task's sys.executable, its inferframe version, what went wrong or None), within ``timeout_s``."""
    group = f"inferframe-python-check-{uuid.uuid4().hex[:8]}"

    def task() -> tuple:
        sc.setJobGroup(group, "inferframe: do the executors import inferframe?", interruptOnCancel=True)
        return sc.parallelize([0], 1).map(_probe_task()).collect()[0]

    return _on_thread(task, lambda: sc.cancelJobGroup(group), timeout_s,
                      "no executor took it (the cluster has no free cores or memory for this application, or its "
                      "workers cannot reach the driver)")


def _on_thread(task: Any, cancel: Any, timeout_s: float, idle: str) -> tuple[str | None, str | None, str | None]:
    """``task()``'s (executable, version, None), or (None, None, what went wrong); on a thread, so that a cluster
    that never runs the task is cancelled (``cancel()``) after ``timeout_s``, not waited on forever."""
    out: dict[str, Any] = {}

    def job() -> None:
        try:
            out["found"] = task()
        except Exception as e:  # Spark's error of a task that could not run: its one telling line
            out["problem"] = f"fails: {one_line(e)}"

    thread = threading.Thread(target=job, name="inferframe-spark-python-check", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        cancel()
        thread.join(10)
        return None, None, f"ran no task within {timeout_s:.0f} s: {idle}"
    if "problem" in out:
        return None, None, out["problem"]
    return out["found"]


def one_line(error: BaseException) -> str:
    """The line of a Spark job's error that says what went wrong (not the 20 lines of traces around it).

    Example:
        >>> one_line(RuntimeError('Job aborted\\n  at x\\nModuleNotFoundError: No module named "inferframe"\\n  at y'))
        'ModuleNotFoundError: No module named "inferframe"'
    """
    text = str(error)
    for cause in _CAUSES:
        found = cause.search(text)
        if found:
            return found.group(0).strip()[:300]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__)[:300]


def fix(version: str) -> str:
    """How to give a cluster's executors this inferframe: a packed venv shipped with the session, or one install per node.

    Example:
        >>> "spark.archives" in fix("0.1.0")
        True
    """
    venv = sys.prefix if sys.prefix != sys.base_prefix else "<a venv with inferframe>"  # this one, where it is a venv
    return (f"ship an environment with inferframe {version}: `pip install venv-pack`, then "
            f"`venv-pack -p {venv} -o env.tar.gz`; start the session with .config(\"spark.archives\", \"env.tar.gz#environment\")"
            f".config(\"spark.pyspark.python\", \"./environment/bin/python\") (the packed venv links to its base "
            f"Python: every node needs that Python at the same path). Or install inferframe {version} on every node "
            f"and set spark.pyspark.python to that interpreter")


def _error(sc: Any, chosen: ExecutorPython, problem: str) -> SparkEnvironmentError:
    version = driver_version()
    if _THIS_MACHINE.match(sc.master):  # the user's own setting, on this machine: point it elsewhere, or drop it
        remedy = (f"set {chosen.chosen_by} to a Python that has inferframe {version} (this one: {sys.executable}), "
                  f"or unset it: inferframe then gives the workers the driver's interpreter")
    else:
        remedy = fix(version)
    found = (f"Spark's executors cannot run inferframe: on {sc.master} they start {chosen.python!r} (chosen by "
             f"{chosen.chosen_by}), which {problem}")
    return SparkEnvironmentError(f"{found}. No request was sent. Fix: {remedy}. `inferframe doctor --spark "
                                 f"{sc.master}` runs this check.", found=found, fix=remedy)
