"""``inferframe doctor --spark MASTER_URL``: do a Spark master's executors run a Python that imports this inferframe?

It starts a session on that master and runs the check the first job on a SparkContext runs
(:mod:`inferframe.runners.spark_python`): one tiny task that reports its interpreter and inferframe's
version. The row is ok with what the executors run, or fails with what went wrong and the fix
(a packed venv through ``spark.archives``).

Example:
    >>> check_spark_executors("spark://127.0.0.1:7077").status    # doctest: +SKIP
    'ok'
"""

from __future__ import annotations

from inferframe.doctor.check import FAIL, OK, Check, version_of as _version

NAME = "spark executors"


def check_spark_executors(master: str, timeout_s: float = 120.0) -> Check:
    """Start a session on ``master`` (``spark://host:7077``, ``local[2]``...), run the executors' check, stop it.

    Parameters:
        master: the Spark master URL, as ``SparkSession.builder.master`` takes it.
        timeout_s: how long the check task may wait for an executor.

    Example:
        >>> check_spark_executors("local[1]").found                    # doctest: +SKIP
        "local[1]: the executors run /home/me/.venv/bin/python (the driver's interpreter; a local master: ...)"
    """
    if _version("pyspark") is None:
        return Check(NAME, FAIL, "pyspark is not installed", "pip install 'inferframe[spark]'", needed=True)
    from inferframe.errors import SparkEnvironmentError
    from inferframe.runners.spark_python import executor_python, one_line

    try:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.master(master).appName("inferframe-doctor").getOrCreate()
    except Exception as exc:  # no session is the finding: a bad URL, no Java
        return Check(NAME, FAIL, f"{master}: no Spark session: {one_line(exc)}",
                     "check the master URL (spark://host:7077) and the java (spark) row", needed=True)
    try:
        spark.sparkContext.setLogLevel("ERROR")
        found = executor_python(spark, timeout_s=timeout_s)
    except SparkEnvironmentError as exc:
        return Check(NAME, FAIL, exc.found, exc.fix, needed=True)
    finally:
        spark.stop()
    if not found.checked:
        return Check(NAME, OK, f"{master}: the executors run {found.python} ({found.chosen_by}; a local master "
                               f"runs its tasks on this machine)", needed=True)
    return Check(NAME, OK, f"{master}: the executors run {found.executable} (chosen by {found.chosen_by}) and import "
                           f"inferframe {found.version}, the driver's version", needed=True)
