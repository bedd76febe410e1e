"""The doctor's checks of where plans run beyond this process: a local Ray cluster, Java for Spark.

Example:
    >>> check_java({"PATH": "/nonexistent"}).status in ("fail", "info")
    True
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from inferframe.doctor.check import FAIL, INFO, OK, WARN, Check, version_of as _version


def check_ray(start: bool = True) -> Check:
    version = _version("ray")
    if version is None:
        return Check("ray", WARN, "not installed", "pip install 'inferframe[ray]' (for set_runner_ray)")
    if not start:
        return Check("ray", OK, f"ray {version} importable (cluster start not tried: --quick)")
    try:
        import ray

        started = time.perf_counter()
        already = ray.is_initialized()
        # The cluster the Ray runner joins when one is named; else a cluster of its own ("local": a plain init
        # joins the one another program started on this machine, and then refuses num_cpus).
        address = os.environ.get("INFERFRAME_RAY_ADDRESS") or os.environ.get("RAY_ADDRESS")
        if not already:
            options = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
            if address:
                ray.init(address=address, **options)
            else:
                ray.init(address="local", num_cpus=1, **options)
        try:
            answer = ray.get(ray.remote(lambda: 42).remote(), timeout=120)
        finally:
            if not already:
                ray.shutdown()
        if answer != 42:
            raise RuntimeError(f"a task returned {answer!r}")
        where = f"the cluster at {address} ran a task" if address and not already else \
            "a local cluster started and ran a task"
        return Check("ray", OK, f"ray {version}: {where} in "
                                f"{time.perf_counter() - started:.1f} s")
    except Exception as exc:
        return Check("ray", FAIL, f"ray {version}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                     "check free memory and /tmp space; 'ray stop' ends a stale cluster")


# pyspark 4 runs on Java 17 or newer; the fix names the package of the common distributions.
SPARK_JAVA = 17
JAVA_FIX = ("install Java 17 or newer (Debian/Ubuntu: apt-get install openjdk-17-jre-headless; "
            "macOS: brew install openjdk@17) and put it on PATH or set JAVA_HOME")


def _java_major(text: str) -> int | None:
    """The major version in ``java -version``'s output ('1.8.0_392' is 8, '17.0.15' is 17).

    Example:
        >>> _java_major('openjdk version "17.0.15" 2025-04-15'), _java_major('java version "1.8.0_392"')
        (17, 8)
    """
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java(env: dict | None = None) -> Check:
    """Java for the Spark runner, checked only when pyspark is installed (``env``: the environment to search).

    Example:
        >>> check_java({"PATH": "/nonexistent"}).status in ("fail", "info")
        True
    """
    version = _version("pyspark")
    if version is None:
        return Check("java (spark)", INFO, "pyspark not installed: Java not needed",
                     "pip install 'inferframe[spark]' (for set_runner_spark)")
    env = dict(os.environ if env is None else env)
    home = env.get("JAVA_HOME")
    java = str(Path(home, "bin", "java")) if home and Path(home, "bin", "java").exists() else \
        shutil.which("java", path=env.get("PATH", ""))
    if java is None:
        return Check("java (spark)", FAIL, f"pyspark {version} is installed but no java was found on PATH or in "
                                          f"JAVA_HOME", JAVA_FIX)
    import subprocess

    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, env=env)
        text = out.stderr + out.stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("java (spark)", FAIL, f"{java} does not run: {type(exc).__name__}", JAVA_FIX)
    major = _java_major(text)
    if major is None or major < SPARK_JAVA:
        found = text.strip().splitlines()[0] if text.strip() else "no version"
        return Check("java (spark)", FAIL, f"{java}: {found}; pyspark {version} needs Java {SPARK_JAVA}+", JAVA_FIX)
    return Check("java (spark)", OK, f"Java {major} at {java} (pyspark {version})")
