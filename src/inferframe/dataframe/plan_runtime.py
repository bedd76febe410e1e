"""The ``Runtime`` a plan is resolved with (``plan.semantic.resolve``): sub-jobs run as DataFrames of this layer.

The plan layer knows no DataFrame and holds no lock: it asks this runtime to run a plan, count its
rows, and make one thread compute a node while the others wait for its kept result.

Example:
    >>> import inferframe as ifr
    >>> df = ifr.from_pydict({"a": [1, 2]})
    >>> runnable(df._plan, type(df)) is df._plan
    True
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable

import pyarrow as pa

from inferframe.plan.logical import LogicalPlan
from inferframe.plan.semantic.resolve import resolve
from inferframe.plan.whole_table import Key

_guard = threading.Lock()
_locks: "weakref.WeakKeyDictionary[Key, threading.RLock]" = weakref.WeakKeyDictionary()


class FrameRuntime:
    """Runs a plan's sub-jobs as DataFrames of ``frame``'s class (``plan.whole_table.Runtime``)."""

    def __init__(self, frame: Callable[[LogicalPlan], Any]):
        self.frame = frame

    def table(self, plan: LogicalPlan) -> pa.Table:
        return self.frame(plan).to_arrow()

    def count(self, plan: LogicalPlan) -> int:
        return self.frame(plan).count_rows()

    def once(self, key: Key, make: Callable[[], None]) -> None:
        with _guard:
            lock = _locks.setdefault(key, threading.RLock())
        with lock:  # a second caller (another thread) waits, then finds the result kept
            make()


def runnable(plan: LogicalPlan, frame: Callable[[LogicalPlan], Any]) -> LogicalPlan:
    """``plan`` with its semantic nodes planned and its whole-table operators computed (once per node: the result is kept on it)."""
    return resolve(plan, FrameRuntime(frame))
