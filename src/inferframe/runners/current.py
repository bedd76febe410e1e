"""Which runner runs DataFrames in this process: the local one unless told otherwise.

``INFERFRAME_RUNNER=ray`` (with ``INFERFRAME_RAY_ADDRESS``) picks the Ray runner before the first
job; ``set_runner_ray()`` and ``set_runner_native()`` switch at any time.

Example:
    >>> get_runner().name
    'native'
"""

from __future__ import annotations

import os
from typing import Any

from inferframe.runners.base import Runner
from inferframe.runners.local import LocalRunner

_RUNNER: Runner | None = None


def get_runner() -> Runner:
    """The runner of this process (chosen from ``INFERFRAME_RUNNER`` the first time)."""
    global _RUNNER
    if _RUNNER is None:
        choice = os.environ.get("INFERFRAME_RUNNER", "native").strip().lower()
        if choice == "ray":
            from inferframe.runners.ray_runner import RayRunner

            _RUNNER = RayRunner()
        elif choice in ("native", "local", ""):
            _RUNNER = LocalRunner()
        else:
            raise ValueError(f"INFERFRAME_RUNNER={choice!r} is not a runner; use 'native' or 'ray'.")
    return _RUNNER


def set_runner_native(morsel_size: int = 8192) -> LocalRunner:
    """Use the local streaming runner (the default)."""
    global _RUNNER
    _RUNNER = LocalRunner(morsel_size=morsel_size)
    return _RUNNER


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
    global _RUNNER
    from inferframe.runners.ray_runner import RayRunner

    _RUNNER = RayRunner(address, **init_options)
    return _RUNNER
