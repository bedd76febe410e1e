"""How the suite's tests are grouped into units of work and ordered for the scheduler (tests/conftest.py).

A group is a file, or all of tests/ray, or all of tests/spark (each of those starts one cluster). Groups are
handed out longest first, by the seconds each took in a full run (``tests/durations.json``, written by
``scripts/test_durations.py``). Its own module, not conftest.py: the tests and the script import it by name,
where ``import conftest`` may find another directory's conftest.
"""

from __future__ import annotations

from pathlib import Path

# Seconds each process group took in a full run (scripts/test_durations.py writes it from a JUnit XML): the
# scheduler (tests/conftest.py) hands out the longest groups first, so the last group to start is a short one and both
# processes end together. A group missing from the file counts as its tests times DEFAULT_SECONDS_PER_TEST.
DURATIONS = Path(__file__).with_name("durations.json")
DEFAULT_SECONDS_PER_TEST = 0.5


def longest_first(items: list, durations: dict[str, float]) -> list:
    """``items`` with each group's tests together, the groups by their recorded seconds, longest first.

    A group keeps its tests in the order they were collected. Groups of equal weight keep their
    collection order (the sort is stable).

    Example:
        >>> class I:
        ...     def __init__(self, group): self.group = group
        >>> items = [I("a"), I("b"), I("a"), I("c")]
        >>> [i.group for i in longest_first(items, {"b": 9.0, "c": 0.1})]
        ['b', 'a', 'a', 'c']
    """
    by_group: dict[str, list] = {}
    for item in items:
        by_group.setdefault(item.group, []).append(item)

    def weight(group: str) -> float:
        return durations.get(group, DEFAULT_SECONDS_PER_TEST * len(by_group[group]))

    return [item for group in sorted(by_group, key=weight, reverse=True) for item in by_group[group]]


# Files of tests/spark that never use the test process's own SparkSession: each starts its own JVMs (a standalone
# master and worker, a Connect server) in a session fixture only it uses, and runs the product in scripts. As groups
# of their own they run beside the "spark" group in the other process (together they were the longest group).
OWN_JVMS = ("tests/spark/test_spark_cluster.py", "tests/spark/test_spark_connect.py")


def group_of(where: str) -> str:
    """The process group of a test file (a path from the repository root): "ray" for tests/ray, "spark" for
    tests/spark but the files of ``OWN_JVMS``, else the file itself.

    Example:
        >>> group_of("tests/ray/test_ray_runner.py"), group_of("tests/test_cli.py")
        ('ray', 'tests/test_cli.py')
        >>> group_of("tests/spark/test_spark_columns.py"), group_of("tests/spark/test_spark_connect.py")
        ('spark', 'tests/spark/test_spark_connect.py')
    """
    if where.startswith("tests/ray/"):
        return "ray"
    return "spark" if where.startswith("tests/spark/") and where not in OWN_JVMS else where
