"""Where a physical plan runs: the local runner by default, or Ray, or Spark."""

from inferframe.runners.base import Runner
from inferframe.runners.current import get_runner, set_runner_native, set_runner_ray, set_runner_spark
from inferframe.runners.local import LocalRunner

__all__ = ["LocalRunner", "Runner", "get_runner", "set_runner_native", "set_runner_ray", "set_runner_spark"]
