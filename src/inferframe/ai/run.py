"""What an AI operator gets from the run it works in: the coordinator of shared limits, the counters and the memo.

A runner makes one ``RunServices`` per job, with the job's own ``RunCounters`` and ``JobMemo``, and the executor
hands it, unopened, to every operator class that asks for it (``for_run``). An operator built
without one (a direct call, a bare ``execute``) gets a local coordinator and counters of its own;
a worker process makes its own services and sends their counters back to the driver with its results.

Example:
    >>> services = services_or_default(None)
    >>> services.coordinator.__class__.__name__, services.counters.runs()
    ('LocalCoordinator', [])
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, Hashable

from inferframe.observe.stats import RunCounters
from inferframe.runtime.coordinator import Coordinator, LocalCoordinator


class JobMemo:
    """What one job computes once for all its operators, by a key of its content: a cascade's thresholds, a fitted
    classifier head.

    It lives on the job's ``RunServices``, so every operator instance of the job (on any thread) shares it and the
    next job starts with an empty one: no job reads what another job computed (on Ray, each worker has its own).
    Computing again in a new job costs no paid request where the model's answers are in the response cache.

    Example:
        >>> memo = JobMemo()
        >>> memo.once("head", lambda: [1]) is memo.once("head", lambda: [2])   # made once, by the first caller
        True
        >>> memo.get("thresholds") is None, memo.put("thresholds", (0.8, 0.0)), len(memo)
        (True, (0.8, 0.0), 2)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict = {}
        self._making: dict = {}  # key -> the lock its first caller holds while making it

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value kept for ``key``, or ``default``."""
        with self._lock:
            return self._values.get(key, default)

    def put(self, key: Hashable, value: Any) -> Any:
        """Keep ``value`` for ``key`` (for a caller that cannot wait on a lock: an event loop); returns it."""
        with self._lock:
            self._values[key] = value
        return value

    def once(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value for ``key``, made by ``make()`` on first use; a caller on another thread waits for it."""
        with self._lock:
            if key in self._values:
                return self._values[key]
            making = self._making.setdefault(key, threading.Lock())
        with making:  # one key's maker does not hold up other keys
            with self._lock:
                if key in self._values:
                    return self._values[key]
            value = make()
            with self._lock:
                self._values[key] = value
                self._making.pop(key, None)
            return value

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)


@dataclasses.dataclass
class RunServices:
    """The shared state of one job: limits per endpoint+model, the job's counters (what the driver shows),
    the secret channel (``worker_env()`` gives the environment that hands keys to a worker process) and what
    the job computes once (``memo``).

    Parameters:
        coordinator: the job's shared limits.
        counters: the job's counters, made for this job only.
        worker_env: the environment that hands keys to a worker process (None: no worker gets keys).
        memo: what the job's operators compute once (a ``JobMemo``; new and empty by default).

    Example:
        >>> from inferframe.observe.stats import RunCounters
        >>> s = RunServices(LocalCoordinator(), RunCounters())
        >>> s.worker_env is None, len(s.memo)
        (True, 0)
    """

    coordinator: Coordinator
    counters: RunCounters
    worker_env: Callable[[], dict] | None = None
    memo: JobMemo = dataclasses.field(default_factory=JobMemo)

    def __reduce__(self):
        raise TypeError("RunServices belong to one process's run; a worker gets its own (see inferframe.ai.run).")


def local_services(counters: RunCounters | None = None) -> RunServices:
    """Services of a run in this process alone: a local coordinator and ``counters`` (None: new ones).

    A worker process makes these for its model class and sends the counters back with every result.

    Example:
        >>> counters = RunCounters()
        >>> local_services(counters).counters is counters
        True
    """
    return RunServices(LocalCoordinator(), counters if counters is not None else RunCounters())


def services_or_default(services: RunServices | None) -> RunServices:
    """``services``, or new local ones: a local coordinator, counters and a memo of their own (no job shows them).

    Example:
        >>> services_or_default(None).counters is services_or_default(None).counters
        False
    """
    return services if services is not None else local_services()
