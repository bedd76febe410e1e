"""Which runner runs DataFrames in this process: the session's, the local one unless told otherwise.

``INFERFRAME_RUNNER=ray`` (with ``INFERFRAME_RAY_ADDRESS``) picks the Ray runner before the first
job, ``INFERFRAME_RUNNER=spark`` the Spark runner (the active SparkSession); ``set_runner_ray()``,
``set_runner_spark()`` and ``set_runner_native()`` switch at any time. The runner is a setting of
the session (``inferframe.session``), like the provider and the cache.

Example:
    >>> get_runner().name
    'native'
"""

from __future__ import annotations

import os
from typing import Any

from inferframe.session import current, set_runner
from inferframe.errors import PlanError
from inferframe.runners.base import Runner
from inferframe.runners.local import LocalRunner


def get_runner() -> Runner:
    """The session's runner (chosen from ``INFERFRAME_RUNNER`` the first time, then kept in the session)."""
    runner = current().runner
    if runner is None:
        choice = os.environ.get("INFERFRAME_RUNNER", "native").strip().lower()
        if choice == "ray":
            from inferframe.runners.ray_runner import RayRunner

            runner = RayRunner()
        elif choice == "spark":
            from inferframe.runners.spark_runner import SparkRunner

            runner = SparkRunner()
        elif choice in ("native", "local", ""):
            runner = LocalRunner()
        else:
            raise PlanError(f"INFERFRAME_RUNNER={choice!r} is not a runner; use 'native', 'ray' or 'spark'.")
        set_runner(runner)
    return runner


def set_runner_native(morsel_size: int = 8192) -> LocalRunner:
    """Use the local streaming runner (the default) for every DataFrame from now on.

    Parameters:
        morsel_size: rows per batch for vectorised work.

    Example:
        >>> set_runner_native().name
        'native'
    """
    runner = LocalRunner(morsel_size=morsel_size)
    set_runner(runner)
    return runner


def set_runner_ray(address: str | None = None, **init_options: Any) -> Runner:
    """Run every DataFrame on Ray from now on (``set_runner_native()`` goes back).

    Parameters:
        address: the cluster ("auto", "ray://head:10001"); None: ``INFERFRAME_RAY_ADDRESS``, else
            a running local cluster, else a new local one.
        **init_options: more ``ray.init`` options (``num_cpus``, ``num_gpus``, ...) when Ray starts here.

    Example:
        >>> import inferframe as ifr
        >>> _ = ifr.set_runner_ray(num_cpus=2)   # doctest: +SKIP
        >>> _ = ifr.set_runner_native()
    """
    from inferframe.runners.ray_runner import RayRunner

    runner = RayRunner(address, **init_options)
    set_runner(runner)
    return runner


def set_runner_spark(spark: Any = None) -> Runner:
    """Run every DataFrame on Spark from now on (``set_runner_native()`` goes back).

    Parameters:
        spark: the SparkSession; None: the active one, else a new one (``pip install 'inferframe[spark]'``, Java 17+).

    Example:
        >>> import inferframe as ifr
        >>> _ = ifr.set_runner_spark()   # doctest: +SKIP
        >>> _ = ifr.set_runner_native()
    """
    from inferframe.runners.spark_runner import SparkRunner

    runner = SparkRunner(spark)
    set_runner(runner)
    return runner
