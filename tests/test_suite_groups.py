"""The README's test command runs each file's tests in one process (tests/conftest.py's scheduler).

xdist 3.8's own ``--dist loadgroup`` marks a group on ``item._nodeid``, which pytest 9.2 does not read:
every test went to whichever process was free, so a file's module fixtures (a README reader's cache, a
model server) were made in both processes and tests/ray started two Ray clusters on two cores.
"""

import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ["tests/test_read_once.py", "tests/test_provider_shim_unused.py", "tests/test_startup.py"]


def test_the_readme_command_keeps_a_files_tests_in_one_process():
    out = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider",
                          "--durations=0", *FILES], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:]
    where = collections.defaultdict(set)
    for worker, nodeid in re.findall(r"^\[(gw\d+)\] \[\s*\d+%\] PASSED (\S+)", out.stdout, re.M):
        where[nodeid.split("::")[0]].add(worker)
    assert set(where) == set(FILES), out.stdout[-3000:]
    assert all(len(workers) == 1 for workers in where.values()), dict(where)


def test_the_longest_recorded_group_is_collected_first_whatever_its_test_count():
    """The scheduler hands out groups in collection order: xdist's own order was by test count, which put
    tests/ray (few, long tests) behind files of many quick ones, and two long groups on one process."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *FILES],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    files = list(dict.fromkeys(line.split("::")[0] for line in out.stdout.splitlines() if "::" in line))
    assert sorted(files) == sorted(FILES), out.stdout[-2000:]
    import json

    recorded = json.loads((ROOT / "tests" / "durations.json").read_text())
    weight = {f: recorded.get(f, 0.0) for f in FILES}
    assert len(set(weight.values())) == len(FILES), weight  # distinct records: the order below is the only one
    assert files == sorted(FILES, key=lambda f: -weight[f]), (files, weight)


def test_longest_first_keeps_a_groups_tests_together_in_their_order():
    sys.path.insert(0, str(ROOT / "tests"))
    from suite_order import longest_first

    class Item:
        def __init__(self, group, n):
            self.group, self.n = group, n

    items = [Item("a", 1), Item("ray", 2), Item("a", 3), Item("b", 4), Item("ray", 5)]
    out = longest_first(items, {"ray": 400.0, "b": 30.0, "a": 1.0})
    assert [(i.group, i.n) for i in out] == [("ray", 2), ("ray", 5), ("b", 4), ("a", 1), ("a", 3)]
    # a group with no record weighs its test count times the default
    assert [i.group for i in longest_first(items, {"b": 0.1})] == ["a", "a", "ray", "ray", "b"]
