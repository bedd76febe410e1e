"""The local runner: streams the plan through this process's executor."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from inferframe.execution.executor import execute
from inferframe.plan.logical import LogicalPlan


class LocalRunner:
    """Run plans in this process, streaming record batches.

    Parameters:
        morsel_size: rows per batch for vectorised work.
    """

    name = "native"

    def __init__(self, morsel_size: int = 8192) -> None:
        self.morsel_size = morsel_size

    def run(self, plan: LogicalPlan) -> Iterator[pa.RecordBatch]:
        return execute(plan, morsel_size=self.morsel_size)


_RUNNER: LocalRunner | None = None


def get_runner() -> LocalRunner:
    global _RUNNER
    if _RUNNER is None:
        _RUNNER = LocalRunner()
    return _RUNNER


def set_runner_native(morsel_size: int = 8192) -> LocalRunner:
    """Use the local streaming runner (the default)."""
    global _RUNNER
    _RUNNER = LocalRunner(morsel_size=morsel_size)
    return _RUNNER
