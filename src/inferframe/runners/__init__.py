"""Where a physical plan runs: the local runner by default."""

from inferframe.runners.local import LocalRunner, get_runner, set_runner_native

__all__ = ["LocalRunner", "get_runner", "set_runner_native"]
