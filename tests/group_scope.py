"""What a group of tests starts (``suite_order.group_of``: tests/ray's Ray cluster, tests/spark's SparkSession, a
standalone master and worker, a Connect server) stops after the group's last test, not at the end of the session.

Left running, their processes took about 0.13 of a core for the rest of the run (Ray's log monitor, idle workers and
stats actor, three idle JVMs: their CPU ticks over 30 s, measured while the suite's later groups ran on two cores).
The fixtures stay session-scoped (module fixtures of their group depend on them) and register their closer here;
tests/conftest.py calls the closers once the next test belongs to another group. A closer must be safe to call
again (the fixture's own teardown at the session's end calls it once more).

Its own module, not conftest.py: the conftests import it by name, where ``import conftest`` may find another
directory's conftest.
"""

from __future__ import annotations

from collections.abc import Callable

_CLOSERS: list[Callable[[], object]] = []


def until_group_ends(close: Callable[[], object]) -> None:
    """Call ``close`` after the last test of the group that is running now.

    Example:
        >>> stopped = []
        >>> until_group_ends(lambda: stopped.append("cluster"))
        >>> close_group(); stopped
        ['cluster']
    """
    _CLOSERS.append(close)


def close_group() -> None:
    """Call the closers registered since the group began, the last registered first."""
    while _CLOSERS:
        _CLOSERS.pop()()
